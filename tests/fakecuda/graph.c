/* graph.c - CUDA graphs made by stream capture, and stream-ordered
 * allocation.
 *
 * A capture records each operation issued to a capturing stream as a node
 * (copy, memset, kernel, host function, allocation, free) that depends on the
 * stream's front: the nodes before it on that stream, widened by the events
 * it waited for. Nodes are appended in issue order, so that order is a
 * topological order of the graph; cudaGraphLaunch replays the nodes in it,
 * one after the other, as operations of the launch stream. Branches that
 * could run in parallel on a GPU run in sequence here: same results for a
 * correct program, no concurrency inside one launch.
 *
 * cudaMallocAsync during a capture reserves the memory at once (device
 * memory of the stream's device), so the pointer it returns is valid in every
 * replay; the graph owns it until the graph and its executable graphs are
 * gone. A launch allocates it (it becomes live) and a free node, cudaFreeAsync
 * or cudaFree frees it; a graph whose allocation is still live cannot be
 * launched again (cudaErrorInvalidValue). Outside a capture cudaMallocAsync
 * allocates at once and cudaFreeAsync frees when the stream gets there.
 * Everything here runs under fc_g.mu. */
#include "fc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fc_graph {
    void *key;                 /* == this struct: the handle */
    UT_hash_handle hh;
    bool has_handle;           /* handed out by cudaStreamEndCapture, not yet destroyed */
    unsigned refs;             /* the handle (or the capture) and each executable graph */
    struct fc_node *nodes;
    size_t n, cap;
};

struct fc_graph_exec {
    void *key;
    UT_hash_handle hh;
    struct fc_graph *graph;
};

static struct fc_graph *graphs;         /* by handle */
static struct fc_graph_exec *execs;     /* by handle */
static struct fc_graph_mem *graph_mems; /* every graph allocation alive */

static void *must(void *p)
{
    if (p == NULL) {
        fputs("fakecuda: out of memory\n", stderr);
        abort();
    }
    return p;
}

/* --- fronts ---------------------------------------------------------------------------------- */

void fc_front_clear(struct fc_front *f)
{
    f->n = 0;
}

void fc_front_add(struct fc_front *f, size_t node)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->nodes[i] == node)
            return;
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 4;
        f->nodes = must(realloc(f->nodes, f->cap * sizeof *f->nodes));
    }
    f->nodes[f->n++] = node;
}

void fc_front_union(struct fc_front *f, const struct fc_front *from)
{
    for (size_t i = 0; i < from->n; i++)
        fc_front_add(f, from->nodes[i]);
}

void fc_front_copy(struct fc_front *f, const struct fc_front *from)
{
    fc_front_clear(f);
    fc_front_union(f, from);
}

/* --- graphs ---------------------------------------------------------------------------------- */

struct fc_graph *fc_graph_new_locked(void)
{
    struct fc_graph *g = must(calloc(1, sizeof *g));
    g->key = g;
    g->refs = 1;
    return g;
}

static void mem_unref_locked(struct fc_graph_mem *m)
{
    if (--m->refs > 0)
        return;
    for (struct fc_graph_mem **p = &graph_mems; *p != NULL; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            break;
        }
    }
    fc_device_release(m->ptr);
    free(m);
}

static void graph_unref_locked(struct fc_graph *g)
{
    if (--g->refs > 0)
        return;
    for (size_t i = 0; i < g->n; i++) {
        struct fc_node *node = &g->nodes[i];
        free(node->deps.nodes);
        if (node->kind == FC_NODE_KERNEL)
            free(node->u.kernel.owned);
        else if (node->kind == FC_NODE_ALLOC || node->kind == FC_NODE_FREE)
            mem_unref_locked(node->u.mem);
    }
    free(g->nodes);
    free(g);
}

void fc_graph_release_locked(struct fc_graph *g)
{
    if (g->has_handle) {
        HASH_DEL(graphs, g);
        g->has_handle = false;
    }
    graph_unref_locked(g);
}

/* A graph handed out by cudaStreamEndCapture and not destroyed; else NULL. */
static struct fc_graph *graph_get_locked(cudaGraph_t handle)
{
    struct fc_graph *g = NULL;
    if (handle != NULL)
        HASH_FIND_PTR(graphs, &handle, g);
    return g;
}

void fc_capture_add_node_locked(struct fc_stream *s, struct fc_node *node)
{
    struct fc_graph *g = s->capture->graph;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 16;
        g->nodes = must(realloc(g->nodes, g->cap * sizeof *g->nodes));
    }
    struct fc_node *at = &g->nodes[g->n];
    *at = *node;
    at->deps = (struct fc_front){0};
    fc_front_copy(&at->deps, &s->front);
    fc_front_clear(&s->front);
    fc_front_add(&s->front, g->n);
    g->n++;
    fc_stat_add(captured_ops, 1);
}

bool fc_capture_joined_locked(const struct fc_capture *c)
{
    const struct fc_graph *g = c->graph;
    bool *reached = must(calloc(g->n + 1, sizeof *reached));
    /* nodes are in topological order: walk back from the origin's front */
    for (size_t i = 0; i < c->origin->front.n; i++)
        reached[c->origin->front.nodes[i]] = true;
    for (size_t k = g->n; k-- > 0;)
        if (reached[k])
            for (size_t d = 0; d < g->nodes[k].deps.n; d++)
                reached[g->nodes[k].deps.nodes[d]] = true;
    bool joined = true;
    for (size_t i = 0; i < fc_g.nall && joined; i++) {
        const struct fc_stream *t = fc_g.all[i];
        if (t->capture != c || t == c->origin)
            continue;
        for (size_t k = 0; k < t->front.n && joined; k++)
            joined = reached[t->front.nodes[k]];
    }
    free(reached);
    return joined;
}


/* --- graph memory ---------------------------------------------------------------------------- */

static struct fc_graph_mem *mem_find_locked(const void *ptr)
{
    struct fc_graph_mem *m = graph_mems;
    while (m != NULL && m->ptr != ptr)
        m = m->next;
    return m;
}

bool fc_graph_mem_release(void *ptr)
{
    pthread_mutex_lock(&fc_g.mu);
    struct fc_graph_mem *m = mem_find_locked(ptr);
    if (m != NULL)
        m->live = false;
    pthread_mutex_unlock(&fc_g.mu);
    return m != NULL;
}

static void free_run(struct fc_op *op, cudaError_t status)
{
    (void)status;
    fc_device_release(op->u.host.data);
}

static cudaError_t malloc_async(void **ptr, size_t size, cudaStream_t stream, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (ptr == NULL)
        return fc_ret(cudaErrorInvalidValue);
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    void *p = NULL;
    cudaError_t err = fc_stream_get(stream, per_thread, &s);
    if (err == cudaSuccess)
        err = fc_device_alloc(size, s->device, &p); /* reserved now, in a capture too */
    if (err == cudaSuccess && s->capture != NULL) {
        /* an allocation node: the graph owns the memory */
        struct fc_graph_mem *m = must(calloc(1, sizeof *m));
        *m = (struct fc_graph_mem){.ptr = p, .size = size, .refs = 1, .next = graph_mems};
        graph_mems = m;
        struct fc_node node = {.kind = FC_NODE_ALLOC, .u.mem = m};
        fc_capture_add_node_locked(s, &node);
    }
    pthread_mutex_unlock(&fc_g.mu);
    if (err == cudaSuccess)
        *ptr = p;
    return fc_ret(err);
}

static cudaError_t free_async(void *ptr, cudaStream_t stream, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (ptr == NULL)
        return cudaSuccess;
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t err = fc_stream_get(stream, per_thread, &s);
    struct fc_graph_mem *m = err == cudaSuccess ? mem_find_locked(ptr) : NULL;
    if (err == cudaSuccess && s->capture != NULL) {
        if (m == NULL) { /* a free node frees a graph allocation only (API docs) */
            err = cudaErrorInvalidValue;
        } else {
            m->refs++;
            struct fc_node node = {.kind = FC_NODE_FREE, .u.mem = m};
            fc_capture_add_node_locked(s, &node);
        }
    } else if (m != NULL) {
        m->live = false; /* the graph keeps the memory for its next launch */
    } else if (err == cudaSuccess) {
        struct fc_mem_info info;
        fc_mem_lookup(ptr, &info);
        if (info.kind != FC_MEM_DEVICE || info.base != (uintptr_t)ptr) {
            err = cudaErrorInvalidValue;
        } else {
            struct fc_op *op = fc_op_new(free_run); /* freed when the stream gets there */
            op->u.host.data = ptr;
            fc_submit_locked(s, op);
        }
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    return malloc_async(ptr, size, stream, false);
}

cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    return malloc_async(ptr, size, stream, true);
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    return free_async(ptr, stream, false);
}

cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    return free_async(ptr, stream, true);
}

/* --- the graph API ----------------------------------------------------------------------------- */

cudaGraph_t fc_graph_hand_out_locked(struct fc_graph *g)
{
    if (!g->has_handle) {
        HASH_ADD_PTR(graphs, key, g);
        g->has_handle = true;
    }
    return (cudaGraph_t)g;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (exec == NULL)
        return fc_ret(cudaErrorInvalidValue);
    (void)flags;
    pthread_mutex_lock(&fc_g.mu);
    struct fc_graph *g = graph_get_locked(graph);
    struct fc_graph_exec *x = NULL;
    if (g != NULL) {
        x = must(calloc(1, sizeof *x));
        x->key = x;
        x->graph = g;
        g->refs++;
        HASH_ADD_PTR(execs, key, x);
    }
    pthread_mutex_unlock(&fc_g.mu);
    if (x == NULL)
        return fc_ret(cudaErrorInvalidValue);
    *exec = (cudaGraphExec_t)x;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    return cudaGraphInstantiate(exec, graph, flags);
}

static struct fc_op *node_op(const struct fc_node *node)
{
    switch (node->kind) {
    case FC_NODE_COPY: return fc_copy_op_new(&node->u.copy);
    case FC_NODE_MEMSET: return fc_memset_op_new(&node->u.memset);
    case FC_NODE_KERNEL: return fc_kernel_op_new(node->u.kernel.fn, node->u.kernel.args);
    case FC_NODE_HOST: return fc_host_op_new(&node->u.host);
    case FC_NODE_ALLOC:
    case FC_NODE_FREE: break;
    }
    return NULL;
}

static void launch_done(struct fc_op *op)
{
    graph_unref_locked(op->u.host.data);
}

static cudaError_t graph_launch(cudaGraphExec_t exec, cudaStream_t stream, bool per_thread)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_graph_exec *x = NULL;
    struct fc_stream *s = NULL;
    cudaError_t err = cudaSuccess;
    if (exec != NULL)
        HASH_FIND_PTR(execs, &exec, x);
    if (x == NULL)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        err = fc_stream_get(stream, per_thread, &s);
    if (err == cudaSuccess && s->capture != NULL) {
        /* not modelled: a graph launched into a capture (a child graph node) */
        s->capture->invalidated = true;
        err = cudaErrorStreamCaptureUnsupported;
    }
    const struct fc_graph *g = x != NULL ? x->graph : NULL;
    for (size_t i = 0; err == cudaSuccess && i < g->n; i++)
        if (g->nodes[i].kind == FC_NODE_ALLOC && g->nodes[i].u.mem->live)
            err = cudaErrorInvalidValue; /* its allocation from the last launch was not freed */
    for (size_t i = 0; err == cudaSuccess && i < g->n; i++) {
        const struct fc_node *node = &g->nodes[i];
        if (node->kind == FC_NODE_ALLOC)
            node->u.mem->live = true;
        else if (node->kind == FC_NODE_FREE)
            node->u.mem->live = false;
        else
            fc_submit_locked(s, node_op(node));
    }
    if (err == cudaSuccess) {
        /* the replay reads the graph (kernel arguments) until it ran, even if
         * the program destroys the graph and its executable meanwhile */
        x->graph->refs++;
        struct fc_op *done = fc_op_new(NULL);
        done->complete = launch_done;
        done->u.host.data = x->graph;
        fc_submit_locked(s, done);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    return graph_launch(exec, stream, false);
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream)
{
    return graph_launch(exec, stream, true);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_graph_exec *x = NULL;
    if (exec != NULL)
        HASH_FIND_PTR(execs, &exec, x);
    if (x != NULL) {
        /* a replay still queued keeps the graph (graph_launch) */
        HASH_DEL(execs, x);
        graph_unref_locked(x->graph);
        free(x);
    }
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(x != NULL ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_graph *g = graph_get_locked(graph);
    if (g != NULL)
        fc_graph_release_locked(g);
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(g != NULL ? cudaSuccess : cudaErrorInvalidResourceHandle);
}
