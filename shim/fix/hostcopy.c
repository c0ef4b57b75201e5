/* hostcopy.c - memcpy on several threads (hostcopy.h).
 *
 * One job per call, on the caller's stack: the copy cut into parts. The
 * caller puts the job on the pool's queue, wakes the workers, then claims
 * parts itself like any worker; when no part is left it waits until every
 * claimed part is done. Claiming a part and counting it done both happen
 * under the pool mutex, so a job leaves the queue when its last part is
 * claimed and nobody touches it after the caller saw its last part done:
 * the job can live on the caller's stack. A caller never waits for a worker
 * to start: if the workers are busy with other jobs, it copies every part
 * itself. A worker that copied a part spins a while for the next job when
 * jobs come back to back, and so does every worker an announcement
 * (us_hostcopy_expect) woke; otherwise it sleeps on the pool's condition. */
#include "hostcopy.h"
#include "hot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "config.h"
#include "lifecycle.h"
#include "log.h"
#include "probe.h"
#include "state.h"
#include "thread.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define HC_MAX_WORKERS 63            /* copy_threads is at most 64, the caller included */
/* A copy is cut into parts of this size, which the threads claim one at a
 * time: a worker that starts late, or runs on a slow vCPU, holds up the
 * caller by one part at most. With two parts per thread (256 KiB at least)
 * a 2 MiB D2H on an H200 host ran in phases of tens of milliseconds at
 * twice the fast phase's time (its median 202 us, p99 460, per process
 * 176-336; native 238 / 294); with 128 KiB parts 148 / 196 (147-148), and
 * 4-16 MiB as before (tools/bench/smallcopy.sh's rows). 64 KiB parts did as
 * well at 2 MiB and cost 16 MiB copies 6% (one lock round per part). */
#define HC_PART_BYTES (128u << 10)
#define HC_PART_ALIGN 4096u          /* part boundaries on page boundaries of the source offset */
#define HC_STACK_BYTES (256u << 10)

/* One job: one or more segments (us_hostcopy_segments), each cut into
 * parts of its own size, numbered across the job in segment order, so that
 * the parts of a segment are claimed before the next segment's. */
struct hc_job {
    const struct us_hostcopy_segment *seg;
    unsigned nsegs;
    const size_t *part_bytes;  /* per segment */
    const unsigned *first_part; /* per segment, and the job's nparts after the last */
    atomic_uint *seg_done;     /* per segment: its parts copied */
    bool streaming; /* into a pinned slot: stores that bypass the cache (copy_to_staging) */
    unsigned nparts;
    unsigned next;  /* next part to claim (under pool.mu) */
    atomic_uint done; /* parts copied: counted under pool.mu, read by the caller without it */
    struct hc_job *queue_next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work;  /* workers wait here for a job */
    pthread_cond_t done;  /* callers wait here for their last part */
    struct hc_job *head;  /* jobs with parts left to claim, oldest first */
    unsigned spawned;     /* under mu */
    bool spawn_failed;    /* under mu: stop trying */
    unsigned announced;   /* under mu: us_hostcopy_expect calls that woke the workers */
} pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static atomic_uint workers;      /* == pool.spawned, readable without the lock */
static atomic_uint jobs_posted;  /* jobs queued so far: what a spinning worker watches */
static _Atomic uint64_t last_done_ns; /* when a caller last saw its job done (0: never) */
static atomic_bool back_to_back; /* the newest job came within HC_WORKER_SPIN_NS of the one before it ending */
static atomic_uint spins;        /* spins begun (tests) */
static atomic_uint sleeping;     /* workers waiting on pool.work (changed under pool.mu) */
static int spawn_warned;

unsigned us_hostcopy_workers(void)
{
    return atomic_load(&workers);
}

unsigned us_hostcopy_worker_spins(void)
{
    return atomic_load(&spins);
}

/* A copy into a pinned slot, which the GPU reads next and the CPU never
 * again: non-temporal stores write it to memory without reading its lines
 * into the cache first, and without pushing the program's data out of it.
 * On an H200 host (16 vCPUs, 300 MiB L3) a 16 MiB pageable H2D took 766 us
 * with memcpy's stores and 466 with these (native 1121; five processes each,
 * tools/bench/smallcopy.sh). Into the program's memory (a D2H) they made
 * the 16 MiB copy slower (400 -> 518 us): the program reads that memory next.
 * The fence makes the stores visible before the caller issues the DMA (and
 * before a worker reports its part done). SSE2 is part of x86-64; elsewhere
 * memcpy. */
static void copy_to_staging(char *dst, const char *src, size_t n)
{
#if defined(__x86_64__)
    if (n < 4096) {
        memcpy(dst, src, n);
        return;
    }
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15; /* streaming stores need 16-byte aligned addresses */
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), a);
        _mm_stream_si128((__m128i *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(dst + i + 48), d);
    }
    _mm_sfence();
    memcpy(dst + i, src + i, n - i);
#else
    memcpy(dst, src, n);
#endif
}

static void copy_range(char *dst, const char *src, size_t n, bool streaming)
{
    if (streaming)
        copy_to_staging(dst, src, n);
    else
        memcpy(dst, src, n);
}

/* The segment part `idx` belongs to (segments are few: a pipeline's slots). */
static unsigned segment_of(const struct hc_job *job, unsigned idx)
{
    unsigned k = 0;
    while (idx >= job->first_part[k + 1])
        k++;
    return k;
}

static void copy_part(struct hc_job *job, unsigned idx)
{
    unsigned k = segment_of(job, idx);
    const struct us_hostcopy_segment *seg = &job->seg[k];
    size_t off = (size_t)(idx - job->first_part[k]) * job->part_bytes[k];
    size_t n = seg->bytes - off < job->part_bytes[k] ? seg->bytes - off : job->part_bytes[k];
    copy_range((char *)seg->dst + off, (const char *)seg->src + off, n, job->streaming);
}

static void unlink_job_locked(struct hc_job *job)
{
    for (struct hc_job **at = &pool.head; *at != NULL; at = &(*at)->queue_next) {
        if (*at == job) {
            *at = job->queue_next;
            return;
        }
    }
}

/* Claims the next part of `job` (pool.mu held); false when none is left. */
static bool claim_locked(struct hc_job *job, unsigned *idx)
{
    if (job->next >= job->nparts)
        return false;
    *idx = job->next++;
    if (job->next == job->nparts)
        unlink_job_locked(job);
    return true;
}

/* After the count reaches nparts the caller may return and its stack (the
 * job) be reused: nothing of the job is read after it. A segment's count
 * goes first, then the job's. The caller may wait for any segment: every
 * segment that completes wakes the callers. */
static void part_done_locked(struct hc_job *job, unsigned idx)
{
    unsigned k = segment_of(job, idx);
    unsigned seg_parts = job->first_part[k + 1] - job->first_part[k];
    unsigned nparts = job->nparts;
    bool segment_done = atomic_fetch_add_explicit(&job->seg_done[k], 1, memory_order_release) + 1 == seg_parts;
    bool job_done = atomic_fetch_add_explicit(&job->done, 1, memory_order_release) + 1 == nparts;
    if (segment_done || job_done)
        pthread_cond_broadcast(&pool.done);
}

/* How long a caller whose parts are all claimed spins for the workers' last
 * ones before it sleeps (a part takes 10-30 us; a caller that sleeps waits
 * for its own wake-up too). On H100 hosts every row of 2-16 MiB pipelined
 * copies, whose host copy is shared, had calls of 0.5-6 ms scattered through
 * it, and none with one copy thread; the spin cut the asynchronous rows' p99
 * (4 MiB D2H 1250 / 337 / 988 -> 297 / 383 / 336 us, three runs) and left
 * the others within the runs' spread (tools/bench/smallcopy.sh). */
#define HC_SPIN_NS 300000u

/* Spins until ready(arg), or until `ns` passed (the clock is read every 64
 * rounds); returns whether ready. The caller's wait for its job's last parts
 * and a worker's wait for the next job. */
static bool spin_until(bool (*ready)(const void *arg), const void *arg, uint64_t ns)
{
    uint64_t start = us_now_ns();
    for (unsigned i = 1;; i++) {
        if (ready(arg))
            return true;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (i % 64 == 0 && us_now_ns() - start > ns)
            return false;
    }
}

struct segment_wait {
    const struct hc_job *job;
    unsigned k;
};

static bool all_done(const void *job)
{
    const struct hc_job *j = job;
    return atomic_load_explicit(&j->done, memory_order_acquire) == j->nparts;
}

static bool segment_done(const void *arg)
{
    const struct segment_wait *w = arg;
    return atomic_load_explicit(&w->job->seg_done[w->k], memory_order_acquire) ==
           w->job->first_part[w->k + 1] - w->job->first_part[w->k];
}

/* How long a worker that copied a part of a job spins for the next job
 * before it sleeps, when jobs come back to back (the newest one came within
 * this time of the one before it ending: a pipelined copy's chunks, a loop
 * of copies); otherwise it sleeps at once. A worker woken from its sleep
 * claims a part late, and the caller waits for that part: on H200 hosts (two
 * runs of 6 rounds of the 1-4 MiB rows back to back, performance.md session
 * 29) the p99 of 10 and 9 of the 12 rows fell with a spin of 100 us (4 MiB
 * D2H 315 -> 223 and 487 -> 233 us, 2 MiB asynchronous H2D 147 -> 93), the
 * medians moved by -11 to +4 us; with 2 ms between copies the medians moved
 * by -5 to +21, inside what those rows move between processes. A worker
 * spins once after its last part, and a copy that comes milliseconds after
 * the last one ended costs no spin at all. */
#define HC_WORKER_SPIN_NS 100000u

/* A job was queued since jobs_posted read *seen. */
static bool job_posted_since(const void *seen)
{
    return atomic_load_explicit(&jobs_posted, memory_order_acquire) != *(const unsigned *)seen;
}

static void *worker_main(void *arg)
{
    (void)arg;
    bool copied = false; /* a part since this worker last waited */
    pthread_mutex_lock(&pool.mu);
    unsigned spun_for = pool.announced; /* the last announcement (us_hostcopy_expect) it spun for */
    for (;;) {
        while (pool.head == NULL) {
            bool announced = pool.announced != spun_for;
            spun_for = pool.announced;
            if (announced || (copied && atomic_load_explicit(&back_to_back, memory_order_relaxed))) {
                unsigned seen = atomic_load_explicit(&jobs_posted, memory_order_relaxed);
                pthread_mutex_unlock(&pool.mu);
                atomic_fetch_add_explicit(&spins, 1, memory_order_relaxed);
                (void)spin_until(job_posted_since, &seen, HC_WORKER_SPIN_NS);
                pthread_mutex_lock(&pool.mu);
            } else {
                atomic_fetch_add_explicit(&sleeping, 1, memory_order_relaxed);
                pthread_cond_wait(&pool.work, &pool.mu);
                atomic_fetch_sub_explicit(&sleeping, 1, memory_order_relaxed);
            }
            copied = false;
        }
        copied = true;
        struct hc_job *job = pool.head;
        unsigned idx;
        if (!claim_locked(job, &idx))
            continue; /* cannot happen: a job with no part left is off the queue */
        pthread_mutex_unlock(&pool.mu);
        copy_part(job, idx);
        pthread_mutex_lock(&pool.mu);
        part_done_locked(job, idx);
    }
    return NULL;
}

/* copy_threads, with 0 (the default) resolved once: the CPUs this process
 * may run on less two (the program's own threads keep two), 8 at least, 16
 * at most. The host copy's bandwidth grows with threads up to about 16 (on
 * an H200 host a 256 MiB H2D ran at 33 GB/s on 8, 43-44 on 16), and a
 * process's first large H2D behind queued work is that copy
 * (docs/pipelines.md). 8, the fixed default before, stays the floor: a
 * thread a small machine's copy does not get is only one waiting, and the
 * copies' parts are claimed, so a worker that runs late holds up no one. */
#define HC_AUTO_MIN 8u
#define HC_AUTO_MAX 16u
static atomic_uint auto_threads; /* 0: not resolved yet */

unsigned us_hostcopy_auto_threads(unsigned cpus)
{
    unsigned n = cpus > 2 ? cpus - 2 : 0;
    return n < HC_AUTO_MIN ? HC_AUTO_MIN : n > HC_AUTO_MAX ? HC_AUTO_MAX : n;
}

static unsigned copy_threads(const struct us_config *cfg)
{
    if (cfg->copy_threads != 0)
        return cfg->copy_threads;
    unsigned n = atomic_load_explicit(&auto_threads, memory_order_relaxed);
    if (n == 0) {
        cpu_set_t set;
        int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        n = us_hostcopy_auto_threads(cpus > 0 ? (unsigned)cpus : 1);
        atomic_store_explicit(&auto_threads, n, memory_order_relaxed);
    }
    return n;
}

/* Makes sure `want` workers run (fewer if threads cannot be created).
 * Returns how many run. */
static unsigned ensure_workers(unsigned want)
{
    if (want > HC_MAX_WORKERS)
        want = HC_MAX_WORKERS;
    unsigned have = atomic_load(&workers);
    if (have >= want)
        return have;
    us_lifecycle_watch_forks(); /* after a fork the pool does not exist in the child */
    pthread_mutex_lock(&pool.mu);
    if (pool.spawned < want && !pool.spawn_failed) {
        while (pool.spawned < want) {
            char name[16];
            snprintf(name, sizeof name, "unstall-cp%u", pool.spawned);
            int rc = us_thread_start(worker_main, NULL, HC_STACK_BYTES, name);
            if (rc != 0) {
                pool.spawn_failed = true;
                us_log_once(&spawn_warned, US_LOG_WARN,
                            "host copy pool: cannot start a thread (%s); copying with %u helper threads",
                            strerror(rc), pool.spawned);
                break;
            }
            pool.spawned++;
        }
        atomic_store(&workers, pool.spawned);
    }
    have = pool.spawned;
    pthread_mutex_unlock(&pool.mu);
    return have;
}

void us_hostcopy_start(void)
{
    unsigned threads = copy_threads(us_config());
    if (threads > 1 && !atomic_load(&us_lifecycle_in_forked_child))
        (void)ensure_workers(threads - 1);
}

/* Whether a copy of `bytes` is shared with the pool's workers. */
static bool shared(size_t bytes, const struct us_config *cfg)
{
    return bytes >= cfg->copy_thread_min && copy_threads(cfg) > 1 && bytes >= 2 * (size_t)HC_PART_BYTES &&
           !atomic_load(&us_lifecycle_in_forked_child);
}

US_HOT void us_hostcopy_expect(size_t bytes)
{
    if (!shared(bytes, us_config()) || atomic_load_explicit(&sleeping, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&pool.mu);
    pool.announced++;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
}

/* A segment's part size: parts of about HC_PART_BYTES on page boundaries;
 * whole huge pages into memory whose pages are not in yet. */
static size_t part_size(const struct us_hostcopy_segment *seg)
{
    size_t nparts = (seg->bytes + HC_PART_BYTES - 1) / HC_PART_BYTES;
    size_t part = nparts > 0 ? (seg->bytes + nparts - 1) / nparts : HC_PART_BYTES;
    part = (part + HC_PART_ALIGN - 1) / HC_PART_ALIGN * HC_PART_ALIGN;
    return seg->fresh && part < US_HOSTCOPY_FRESH_PART ? US_HOSTCOPY_FRESH_PART : part;
}

/* The caller's wait for segment k's last parts: a spin, then the pool's
 * condition. */
static void wait_segment(const struct hc_job *job, unsigned k)
{
    struct segment_wait w = {job, k};
    if (spin_until(segment_done, &w, HC_SPIN_NS))
        return;
    pthread_mutex_lock(&pool.mu);
    while (!segment_done(&w))
        pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
}

/* Hands the caller's callback each segment whose bytes are all in, in
 * order, from *next on; after a callback said stop, the rest are only
 * counted. */
static void hand_over_done(const struct hc_job *job, unsigned *next, bool *go_on, us_hostcopy_ready_fn ready,
                           void *arg)
{
    for (; *next < job->nsegs; ++*next) {
        struct segment_wait w = {job, *next};
        if (!segment_done(&w))
            return;
        if (*go_on)
            *go_on = ready(arg, *next);
    }
}

static bool copy_segments(const struct us_hostcopy_segment *seg, unsigned nsegs, bool streaming,
                          us_hostcopy_ready_fn ready, void *arg)
{
    size_t total = 0;
    for (unsigned k = 0; k < nsegs; k++)
        total += seg[k].bytes;
    const struct us_config *cfg = us_config();
    unsigned helpers = 0;
    if (total > 0 && nsegs <= US_HOSTCOPY_MAX_SEGMENTS && shared(total, cfg))
        helpers = ensure_workers(copy_threads(cfg) - 1);
    if (helpers == 0) { /* one thread: each segment in turn */
        bool go_on = true;
        for (unsigned k = 0; k < nsegs && go_on; k++) {
            copy_range(seg[k].dst, seg[k].src, seg[k].bytes, streaming);
            if (ready != NULL)
                go_on = ready(arg, k);
        }
        return go_on;
    }
    size_t part_bytes[US_HOSTCOPY_MAX_SEGMENTS];
    unsigned first_part[US_HOSTCOPY_MAX_SEGMENTS + 1];
    atomic_uint seg_done[US_HOSTCOPY_MAX_SEGMENTS];
    first_part[0] = 0;
    for (unsigned k = 0; k < nsegs; k++) {
        part_bytes[k] = part_size(&seg[k]);
        first_part[k + 1] = first_part[k] + (unsigned)((seg[k].bytes + part_bytes[k] - 1) / part_bytes[k]);
        atomic_init(&seg_done[k], 0);
    }
    struct hc_job job = {
        .seg = seg,
        .nsegs = nsegs,
        .part_bytes = part_bytes,
        .first_part = first_part,
        .seg_done = seg_done,
        .streaming = streaming,
        .nparts = first_part[nsegs],
    };

    uint64_t before = atomic_load_explicit(&last_done_ns, memory_order_relaxed);
    atomic_store_explicit(&back_to_back, before != 0 && us_now_ns() - before < HC_WORKER_SPIN_NS,
                          memory_order_relaxed);
    pthread_mutex_lock(&pool.mu);
    struct hc_job **tail = &pool.head;
    while (*tail != NULL)
        tail = &(*tail)->queue_next;
    *tail = &job;
    atomic_fetch_add_explicit(&jobs_posted, 1, memory_order_release);
    if (job.nparts - 1 >= helpers)
        pthread_cond_broadcast(&pool.work);
    else
        for (unsigned i = 0; i + 1 < job.nparts; i++)
            pthread_cond_signal(&pool.work);
    US_PROBE_STAMP(workers_woken);
    unsigned idx, next = 0;
    bool go_on = true;
    while (claim_locked(&job, &idx)) {
        pthread_mutex_unlock(&pool.mu);
        copy_part(&job, idx);
        pthread_mutex_lock(&pool.mu);
        part_done_locked(&job, idx);
        if (ready != NULL) { /* a segment done: the caller's work on it overlaps the rest of the copy */
            pthread_mutex_unlock(&pool.mu);
            hand_over_done(&job, &next, &go_on, ready, arg);
            pthread_mutex_lock(&pool.mu);
        }
    }
    pthread_mutex_unlock(&pool.mu);
    US_PROBE_STAMP(own_parts_done);
    for (; next < nsegs; next++) {
        wait_segment(&job, next);
        if (ready != NULL && go_on)
            go_on = ready(arg, next);
    }
    /* a worker counts a segment's part before the job's: the job (this
     * stack) lives until the job's count is complete too */
    if (!spin_until(all_done, &job, HC_SPIN_NS)) {
        pthread_mutex_lock(&pool.mu);
        while (atomic_load(&job.done) < job.nparts)
            pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
    atomic_store_explicit(&last_done_ns, us_now_ns(), memory_order_relaxed);
    return go_on;
}

static void hostcopy(void *dst, const void *src, size_t bytes, bool streaming, bool fresh)
{
    if (bytes == 0)
        return;
    struct us_hostcopy_segment seg = {.dst = dst, .src = src, .bytes = bytes, .fresh = fresh};
    (void)copy_segments(&seg, 1, streaming, NULL, NULL);
}

US_HOT void us_hostcopy(void *dst, const void *src, size_t bytes)
{
    hostcopy(dst, src, bytes, false, false);
}

void us_hostcopy_to_staging(void *dst, const void *src, size_t bytes)
{
    hostcopy(dst, src, bytes, true, false);
}

void us_hostcopy_to_fresh(void *dst, const void *src, size_t bytes)
{
    hostcopy(dst, src, bytes, true, true);
}

bool us_hostcopy_segments_to_staging(const struct us_hostcopy_segment *seg, unsigned nsegs,
                                     us_hostcopy_ready_fn ready, void *arg)
{
    return copy_segments(seg, nsegs, true, ready, arg);
}

/* The kernel's transparent huge page size, 0 where the advice would do
 * nothing (THP mode never, or no THP at all): read once. */
static pthread_once_t thp_once = PTHREAD_ONCE_INIT;
static uintptr_t thp_bytes;

static bool read_sysfs_line(const char *path, char *line, size_t size)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    bool ok = fgets(line, (int)size, f) != NULL;
    fclose(f);
    return ok;
}

static void read_thp(void)
{
    char mode[128], size[32];
    if (!read_sysfs_line("/sys/kernel/mm/transparent_hugepage/enabled", mode, sizeof mode) ||
        strstr(mode, "[never]") != NULL || strchr(mode, '[') == NULL ||
        !read_sysfs_line("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", size, sizeof size))
        return;
    unsigned long long huge = strtoull(size, NULL, 10);
    if (huge >= 4096 && (huge & (huge - 1)) == 0)
        thp_bytes = (uintptr_t)huge;
}

US_HOT bool us_hostcopy_advise_fresh(void *dst, size_t bytes)
{
    size_t min = us_config()->d2h_hugepages;
    if (min == 0 || bytes < min)
        return false;
    pthread_once(&thp_once, read_thp);
    uintptr_t huge = thp_bytes;
    if (huge == 0)
        return false;
    uintptr_t lo = ((uintptr_t)dst + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)dst + bytes) & ~(huge - 1);
    if (hi <= lo)
        return false;
    /* one page tells: a new buffer has none of its pages yet, and one the
     * program already wrote keeps its pages as they are */
    unsigned char resident = 0;
    if (mincore((void *)lo, 1, &resident) != 0 || (resident & 1) != 0)
        return false;
    /* a program that turned THP off for itself keeps it off */
    if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) > 0)
        return false;
    return madvise((void *)lo, hi - lo, MADV_HUGEPAGE) == 0;
}
