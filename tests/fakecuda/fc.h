/* fc.h - what the files of fakecuda share. Nothing here is exported: the
 * version script (libcudart.map) exports only cuda* and fakecuda_*.
 *
 * One mutex (fc_g.mu) guards streams, events, captures and devices; one
 * condition variable (fc_g.done) is broadcast whenever an operation completes
 * or a kernel ends, and every wait in the simulation waits on it. One more
 * lock is part of the model, not of the implementation: the API lock
 * (case C), and the staging queue of case A is a chain of dependencies from
 * each staged copy to the one issued before it. Lock order: API lock, then
 * fc_g.mu. Workers never take the API lock. */
#ifndef FAKECUDA_FC_H
#define FAKECUDA_FC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <uthash.h>

#include "fakecuda.h"
#include "ptsz.h"

#define FC_MAX_DEVICES 16
/* SMs per simulated device (an H100/H200): a kernel of at least this many
 * blocks occupies every SM (case D). */
#define FC_SM_COUNT 132

/* --- configuration (config.c) ------------------------------------------------ */

struct fc_config {
    const struct fc_config *previous; /* the one this replaced (kept: readers may hold it) */
    int devices;                   /* fixed at first use */
    double time_scale;
    double bw_pinned, bw_pageable, bw_d2d, bw_peer, bw_staged; /* GB/s */
    double latency_us;
    size_t pageable_h2d_async_max; /* bytes */
    double timeslice_us;
    int staged_hold;               /* 1: a staged copy holds its caller until done */
    double host_alloc_us_per_mib;  /* cudaHostAlloc holds the API lock this long per MiB */
    double host_register_us_per_mib; /* cudaHostRegister: the same (pinning pages already mapped) */
    int p2p_atomics;               /* cudaDevP2PAttrNativeAtomicSupported of a capable pair */
    int p2p_rank;                  /* cudaDevP2PAttrPerformanceRank of a capable pair */
    int ctx_reuse;                 /* 1: cuCtxCreate reuses a destroyed context's address */
    bool peer_capable[FC_MAX_DEVICES][FC_MAX_DEVICES];
    /* what cudaDeviceEnablePeerAccess does on a capable pair (matrix cell) */
    enum fc_peer_enable { FC_PEER_ENABLE_OK, FC_PEER_ENABLE_REFUSED, FC_PEER_ENABLE_HANGS }
        peer_enable[FC_MAX_DEVICES][FC_MAX_DEVICES];
};

/* The configuration in force. Never NULL once fc_init() ran; a reload swaps
 * in a new copy and leaves the old one allocated, so a pointer stays valid. */
const struct fc_config *fc_cfg(void);
/* Reads the environment; `devices` < 0: read FAKECUDA_DEVICES too. */
void fc_config_load(int devices);

/* --- process state, time, errors (fc.c) ---------------------------------------- */

void fc_init(void); /* idempotent and cheap */
/* Every CUDA entry point starts here: fc_init(), then false in the child of
 * a fork() made after first use, where the real runtime fails every call
 * with cudaErrorInitializationError (worker threads do not survive a fork). */
bool fc_enter(void);
double fc_now_us(void);
void fc_sleep_until_us(double t_us);
/* Condition variables on CLOCK_MONOTONIC; the wait returns false on timeout. */
void fc_cond_init(pthread_cond_t *cond);
bool fc_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, double t_us);
/* cudaErrorXxx name -> code (for FAKECUDA_FAULT_* values). */
bool fc_error_from_name(const char *name, cudaError_t *out);
/* Records a failure as the calling thread's last error (cudaGetLastError). */
cudaError_t fc_ret(cudaError_t err);
int fc_current_device(void);

/* --- contexts (fc.c; the driver API in driver.c) ------------------------------------------ */

/* A CUDA context: each device's primary one (what the runtime uses), and
 * those cuCtxCreate makes. Streams and events belong to the context current
 * at their creation; each context has its own legacy (NULL) stream. */
struct fc_ctx {
    int device;
    bool primary;
    bool live;                 /* a created context not destroyed */
    unsigned flags;
    unsigned long long id;     /* cuCtxGetId: unique in the process, also when an address is reused */
    int retains;               /* primary: cuDevicePrimaryCtxRetain count */
    bool used;                 /* primary: the runtime worked in it (atomic) */
    struct fc_stream *legacy;  /* its NULL stream */
    int running_kernels;       /* its kernels running now (case D: other contexts' wait) */
    int running_full_kernels;  /* of them, those that occupy every SM (case D: its own copies wait) */
    struct fc_ctx *next;       /* fc_g.created */
};

/* The calling thread's current context: the primary context of the current
 * device unless the driver API made another one current. Never NULL. */
struct fc_ctx *fc_current_ctx(void);

/* Case D (copy.c): work of a context waits for the compute engine while
 * another context's kernel holds it (a time slice), and keeps it until the
 * slice ends or the host waits for that context's work. Called by the op's
 * run function, unlocked. */
struct fc_op;
void fc_engine_slice_wait(const struct fc_op *op, int device);
/* Makes ctx current on the calling thread (NULL: the current device's
 * primary context). A primary context also sets the current device. */
void fc_set_current_ctx(struct fc_ctx *ctx);

/* --- faults and statistics (control.c) ------------------------------------------ */

/* cudaSuccess, or the error a fault site injects into this call. */
cudaError_t fc_fault(enum fakecuda_fault_site site);
void fc_faults_from_env(void);
/* Statistics: `fc_stat_add(field, n)` adds to a counter, fc_stat_max keeps the
 * larger value. Both lock the statistics mutex. */
extern struct fakecuda_stats fc_stats_now;
extern pthread_mutex_t fc_stats_mu;
#define fc_stat_add(field, n)                                                 \
    do {                                                                       \
        pthread_mutex_lock(&fc_stats_mu);                                      \
        fc_stats_now.field += (n);                                             \
        pthread_mutex_unlock(&fc_stats_mu);                                    \
    } while (0)
#define fc_stat_max(field, v)                                                 \
    do {                                                                       \
        pthread_mutex_lock(&fc_stats_mu);                                      \
        if ((v) > fc_stats_now.field)                                          \
            fc_stats_now.field = (v);                                          \
        pthread_mutex_unlock(&fc_stats_mu);                                    \
    } while (0)

/* The process-wide API lock of case C. fc_api_touch takes and releases it at
 * once: what a launch does. */
void fc_api_lock(void);
void fc_api_unlock(void);
void fc_api_touch(void);

/* --- memory registry (memory.c) --------------------------------------------------- */

enum fc_mem { FC_MEM_PAGEABLE, FC_MEM_DEVICE, FC_MEM_PINNED, FC_MEM_REGISTERED };

struct fc_mem_info {
    enum fc_mem kind;
    int device;      /* device memory: its device; pinned/registered: device current at allocation */
    uintptr_t base;  /* the allocation or registered range (0 for pageable) */
    size_t size;
};

/* Classifies p: pageable when no allocation or registered range contains it. */
void fc_mem_lookup(const void *p, struct fc_mem_info *out);
/* cudaDeviceReset: frees the device memory of `device` and the pinned
 * memory allocated while it was current. */
void fc_mem_reset_device(int device);
/* cuCtxDestroy: frees the pinned memory allocated, and drops the ranges
 * registered, while the created context `ctx` was current (portable or not:
 * the context that pinned them releases them); returns how many. */
unsigned fc_mem_release_ctx(const struct fc_ctx *ctx);
/* Whether [p, p+bytes) lies inside the allocation `m` describes. */
bool fc_mem_covers(const struct fc_mem_info *m, const void *p, size_t bytes);

/* --- streams, operations, captures (stream.c) --------------------------------------- */

enum fc_stream_kind { FC_STREAM_USER, FC_STREAM_LEGACY, FC_STREAM_PER_THREAD };

struct fc_graph;

/* A set of graph nodes (indices): what the next node captured on a stream
 * depends on, or what an event recorded in a capture stands for. */
struct fc_front {
    size_t *nodes;
    size_t n, cap;
};

struct fc_capture {
    uint64_t id;
    enum cudaStreamCaptureMode mode;
    pthread_t thread;          /* the thread that began it */
    struct fc_stream *origin;  /* the stream it began on */
    bool invalidated;
    struct fc_graph *graph;    /* what it recorded so far (graph.c) */
    struct fc_capture *next;
};

struct fc_stream {
    void *key;                 /* == this struct: the handle (user streams) */
    UT_hash_handle hh;
    enum fc_stream_kind kind;
    int device;
    struct fc_ctx *ctx;        /* the context it belongs to */
    unsigned flags;
    int priority;
    bool live;                 /* a user stream not destroyed */
    uint64_t submitted;        /* sequence number of the last queued op */
    uint64_t completed;        /* sequence number of the last completed op */
    struct fc_op *head, *tail;
    bool worker_running;
    pthread_cond_t work;       /* the worker waits here for ops */
    cudaError_t sticky;        /* asynchronous error, kept */
    cudaError_t armed;         /* fakecuda_fail_stream: the next op fails with it */
    struct fc_capture *capture;
    struct fc_front front;     /* capturing: the nodes the next captured op depends on */
};

struct fc_dep {
    struct fc_stream *stream;
    uint64_t seq;
};

struct fc_op;
typedef void (*fc_run_fn)(struct fc_op *op, cudaError_t status);

/* Payloads of the operations (copy.c, launch.c, event.c fill them). */
enum fc_path {
    FC_PATH_H2D_PINNED, FC_PATH_H2D_PAGEABLE, FC_PATH_D2H_PINNED, FC_PATH_D2H_PAGEABLE,
    FC_PATH_H2H_PINNED, FC_PATH_H2H_PAGEABLE, FC_PATH_D2D, FC_PATH_PEER, FC_PATH_STAGED
};

struct fc_copy_op {
    void *dst;
    const void *src;
    size_t dpitch, spitch, width, height;
    enum fc_path path;
    int device;             /* FC_PATH_D2D: the device whose engine it needs */
    double duration_us;     /* modelled, scaled */
    void *owned;            /* snapshot buffer to free (case B small) */
};

struct fc_memset_op {
    void *dst;
    int value;
    size_t bytes;
    double duration_us;
};

struct fc_kernel_op {
    void (*fn)(void **args);
    void **args;
    void *owned;            /* copied argument values, freed after the run */
    bool occupies_all;      /* at least one block per SM: no room for a copy kernel (case D) */
    bool holds_engine;      /* counted as running (kernel_occupy_locked) */
};

struct fc_host_op {
    cudaHostFn_t fn;        /* cudaLaunchHostFunc */
    cudaStreamCallback_t cb;/* cudaStreamAddCallback */
    cudaStream_t handle;    /* what the callback is told */
    void *data;
};

struct fc_record_op {
    struct fc_event *event;
    uint64_t gen;
    double t_us;
};

struct fc_op {
    struct fc_op *next;
    struct fc_stream *stream;
    uint64_t seq;
    fc_run_fn run;          /* on the worker without locks; NULL for markers */
    void (*complete)(struct fc_op *op); /* under fc_g.mu after the run; may be NULL */
    bool counts_as_work;    /* FAKECUDA_FAULT_ASYNC counts it */
    bool runs_after_error;  /* stream callbacks: run with the error as status */
    cudaError_t fail;       /* injected: does not run, makes the stream sticky */
    size_t ndeps, capdeps;
    struct fc_dep *deps;
    union {
        struct fc_copy_op copy;
        struct fc_memset_op memset;
        struct fc_kernel_op kernel;
        struct fc_host_op host;
        struct fc_record_op record;
    } u;
};

struct fc_device {
    struct fc_stream *legacy;
    bool peer_enabled[FC_MAX_DEVICES]; /* this device may access the peer */
    int running_kernels;
    int running_full_kernels;          /* of them, those that occupy every SM (case D) */
    double copy_slice_until;           /* case D: copies own the compute engine until then */
    double copy_slice_end;             /* case D: and at the latest until then (their slice) */
    const struct fc_ctx *slice_owner;  /* case D: the context those copies belong to */
};

struct fc_global {
    pthread_mutex_t mu;
    pthread_cond_t done;
    struct fc_device dev[FC_MAX_DEVICES];
    struct fc_ctx primary[FC_MAX_DEVICES]; /* legacy == dev[d].legacy */
    struct fc_ctx *created;      /* cuCtxCreate contexts, destroyed ones included (never freed) */
    int ndev;
    struct fc_stream *handles;   /* live user streams, by handle */
    struct fc_stream **all;      /* every stream ever made (none is freed) */
    size_t nall, capall;
    struct fc_event *events;     /* live events, by handle */
    struct fc_event *free_events;
    struct fc_capture *captures; /* active capture sequences */
    struct fc_dep last_staged;   /* the staged copy issued last: the next one waits for it */
    uint64_t next_capture_id;
};

extern struct fc_global fc_g;

/* Resolves a stream handle under fc_g.mu, for work issued to it. `per_thread`:
 * the entry point is a _ptsz/_ptds one, where 0 means the per-thread default
 * stream. 0 and cudaStreamLegacy are the current context's streams. A stream
 * of another context of the current device is an invalid handle there
 * (cudaErrorInvalidResourceHandle: a shim that issues work on streams of the
 * primary context while a created one is current fails this way, measured);
 * a stream of another device is accepted (measured on a GPU). */
cudaError_t fc_stream_get(cudaStream_t handle, bool per_thread, struct fc_stream **out);
/* The same without the ownership check: for calls that only look at the
 * stream (synchronize, query, flags, device). */
cudaError_t fc_stream_get_any(cudaStream_t handle, bool per_thread, struct fc_stream **out);
/* Whether work issued while `cur` is current may use an object of `owner`. */
bool fc_ctx_may_use(const struct fc_ctx *cur, const struct fc_ctx *owner);
/* Under fc_g.mu: waits for every stream of a context; the first kept error. */
cudaError_t fc_ctx_sync_locked(struct fc_ctx *ctx);
bool fc_stream_blocking(const struct fc_stream *s);
/* Under fc_g.mu: a new stream, appended to fc_g.all (user streams also enter
 * fc_g.handles). NULL when out of memory. */
struct fc_stream *fc_stream_new_locked(enum fc_stream_kind kind, int device, unsigned flags, int priority);

/* Allocates an op (zeroed). Never NULL (aborts when out of memory). */
struct fc_op *fc_op_new(fc_run_fn run);
void fc_op_add_dep(struct fc_op *op, struct fc_stream *s, uint64_t seq);
/* Under fc_g.mu: op waits for the earlier work of a device's legacy and
 * blocking streams (but `self`): what legacy-stream work waits for. */
void fc_op_wait_device_locked(struct fc_op *op, int device, const struct fc_stream *self);
/* Under fc_g.mu: device's legacy stream (and so its blocking streams) waits
 * for op seq of stream s before its later work: a marker op on it. */
void fc_legacy_follow_locked(int device, struct fc_stream *s, uint64_t seq);
/* Under fc_g.mu: adds the legacy-stream dependencies, applies armed faults,
 * queues the op on s and starts s's worker if needed. Returns its seq. */
uint64_t fc_submit_locked(struct fc_stream *s, struct fc_op *op);
/* op is its stream's next and may run now: a GPU would start it at once,
 * whenever the simulation's stream thread gets to it. */
bool fc_op_startable_locked(const struct fc_op *op);
/* Under fc_g.mu: waits until s completed seq. */
void fc_wait_locked(struct fc_stream *s, uint64_t seq);
/* Under fc_g.mu: waits for every stream of a device; returns the first sticky
 * error found among them. */
cudaError_t fc_device_sync_locked(int device);
/* Locks fc_g.mu, synchronizes a device (implicit synchronization of the
 * allocation calls), unlocks. */
void fc_device_sync_implicit(int device);

/* --- graphs and stream-ordered allocation (graph.c) --------------------------------------- */

enum fc_node_kind { FC_NODE_COPY, FC_NODE_MEMSET, FC_NODE_KERNEL, FC_NODE_HOST, FC_NODE_ALLOC, FC_NODE_FREE };

/* An allocation made by a graph (cudaMallocAsync during capture): its memory
 * is reserved at capture, so the pointer the capture returned is valid in
 * every replay, and belongs to the graph until the graph is gone. `live`:
 * allocated by a launch and not yet freed (in submission order). */
struct fc_graph_mem {
    void *ptr;
    size_t size;
    bool live;
    unsigned refs;             /* graphs and executable graphs that hold it */
    struct fc_graph_mem *next;
};

struct fc_node {
    enum fc_node_kind kind;
    struct fc_front deps;      /* earlier nodes it depends on */
    union {
        struct fc_copy_op copy;
        struct fc_memset_op memset;
        struct fc_kernel_op kernel;   /* owned: the graph's copy of the argument values */
        struct fc_host_op host;
        struct fc_graph_mem *mem;     /* ALLOC, FREE */
    } u;
};

/* Under fc_g.mu: records a node captured on s (s->capture != NULL): it
 * depends on s's front, and becomes it. The payload is moved into the graph. */
void fc_capture_add_node_locked(struct fc_stream *s, struct fc_node *node);
/* Under fc_g.mu: a new, empty graph for a capture; frees one. */
struct fc_graph *fc_graph_new_locked(void);
void fc_graph_release_locked(struct fc_graph *g);
/* cudaStreamEndCapture: the graph gets its handle. */
cudaGraph_t fc_graph_hand_out_locked(struct fc_graph *g);
/* Whether the unjoined-work rule holds: every stream that took part in
 * capture c ends up in the origin's front (cudaErrorStreamCaptureUnjoined). */
bool fc_capture_joined_locked(const struct fc_capture *c);
/* cudaFree of a graph allocation: the graph keeps the memory, the
 * allocation is no longer live. False when ptr is no graph's allocation. */
bool fc_graph_mem_release(void *ptr);
/* Front sets. */
void fc_front_clear(struct fc_front *f);
void fc_front_add(struct fc_front *f, size_t node);
void fc_front_union(struct fc_front *f, const struct fc_front *from);
void fc_front_copy(struct fc_front *f, const struct fc_front *from);

/* Ops made from a recorded payload, for graph launches (copy.c, launch.c). */
struct fc_op *fc_copy_op_new(const struct fc_copy_op *copy);
struct fc_op *fc_memset_op_new(const struct fc_memset_op *memset);
struct fc_op *fc_kernel_op_new(void (*fn)(void **), void **args);
struct fc_op *fc_host_op_new(const struct fc_host_op *host);
/* Copies the argument values of a registered kernel (launch.c); NULL when
 * it is not registered. */
void *fc_kernel_args_copy(const void *func, void **args);

/* memory.c: device memory of `device`, registered; released without a
 * device synchronization (the caller orders it). */
cudaError_t fc_device_alloc(size_t size, int device, void **out);
bool fc_device_release(void *ptr);

/* Capture rules (stream.c), under fc_g.mu: whether the calling thread may
 * make a potentially unsafe call now; when not, invalidates the captures that
 * forbid it and returns cudaErrorStreamCaptureUnsupported. */
cudaError_t fc_capture_check_locked(void);
/* Same, taking fc_g.mu itself. */
cudaError_t fc_capture_check(void);
struct fc_capture *fc_capture_find_locked(uint64_t id);

/* --- events (event.c) --------------------------------------------------------------- */

struct fc_event {
    void *key;
    UT_hash_handle hh;
    struct fc_event *next_free;
    int device;
    struct fc_ctx *ctx;        /* the context current at creation */
    unsigned flags;
    uint64_t gen;              /* bumped by every record and by destroy */
    bool recorded;
    struct fc_stream *stream;
    uint64_t seq;
    bool timed;                /* t_us valid */
    double t_us;
    uint64_t capture_id;       /* last recorded inside this capture (0: not) */
    struct fc_front front;     /* recorded in a capture: the nodes it stands for */
};

#endif /* FAKECUDA_FC_H */
