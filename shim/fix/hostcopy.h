/* hostcopy.h - host-to-host memcpy on several threads, for the pipelines'
 * copies between pageable memory and pinned slots (measured on a GPU host:
 * 1 thread 11 GB/s, 8 threads 33 GB/s).
 *
 * A copy of at least option copy_thread_min bytes is split into parts that
 * the calling thread and a pool of worker threads copy together; option
 * copy_threads counts every thread on one copy, the caller included (1: the
 * caller alone, no pool; 0, the default: the CPUs the process may run on less
 * two, 8 at least, 16 at most, us_hostcopy_auto_threads). Smaller copies are a plain memcpy on the caller.
 *
 * The pool starts on the first large copy, or earlier with us_hostcopy_start
 * (after the program's first device allocation: us_copy_warm). Its threads are detached and block
 * every signal: they never keep the process alive at exit and never take a
 * program's signal. Several threads may copy at once; each call returns when
 * its own bytes are in place. In a child after fork() every copy is a plain
 * memcpy on the caller (the pool's threads do not exist there). No CUDA
 * calls, no logging on the copy path. */
#ifndef UNSTALL_HOSTCOPY_H
#define UNSTALL_HOSTCOPY_H

#include <stdbool.h>
#include <stddef.h>

/* memcpy(dst, src, bytes), on several threads when it is large; returns when
 * done. The ranges must not overlap (like memcpy). bytes 0: nothing. */
void us_hostcopy(void *dst, const void *src, size_t bytes);

/* The threads copy_threads=0 stands for in a process that may run on `cpus`
 * CPUs: cpus - 2, 8 at least, 16 at most. */
unsigned us_hostcopy_auto_threads(unsigned cpus);

/* The same into a pinned slot that the GPU reads next (an H2D's chunk): the
 * stores bypass the cache (non-temporal, on x86-64), so the slot's lines are
 * neither read first nor kept; the bytes are visible to the DMA the caller
 * issues after it returns. */
void us_hostcopy_to_staging(void *dst, const void *src, size_t bytes);

/* The same into memory whose pages are not in yet, from a 2 MiB boundary
 * on, advised to use transparent huge pages (a spill, spill.h): the parts
 * are whole huge pages, so that each page faults in on one thread. With the
 * usual 128 KiB parts, the threads' parts share a huge page and all wait for
 * its one fault: measured on an H100 host, 248 MiB spilled at 8.6 GB/s on
 * 8 threads, where new memory copied in contiguous parts takes 19.7 GB/s
 * (tools/bench/freshcopy.c). */
#define US_HOSTCOPY_FRESH_PART ((size_t)2 << 20)
void us_hostcopy_to_fresh(void *dst, const void *src, size_t bytes);

/* Several copies into pinned slots as one job (an H2D's chunks, and the
 * spill of what its slots cannot take): the threads copy the segments' parts
 * in segment order without a pause between segments, and the caller, which
 * copies parts too, is handed each segment as soon as its bytes are all in,
 * in order (ready(arg, k), on the calling thread: it issues that chunk's
 * transfer while the others go on copying the next). Copied one segment
 * after another, each a job of its own, the threads waited at every
 * segment's end for its last part and for the caller's CUDA calls. A
 * segment marked fresh (memory whose pages are not in yet) is cut in whole
 * huge pages (US_HOSTCOPY_FRESH_PART). Once ready returns false the
 * segments after it are not handed over (they may or may not be copied);
 * returns false then. At most US_HOSTCOPY_MAX_SEGMENTS
 * segments are shared with the pool; more are copied by the caller alone. */
#define US_HOSTCOPY_MAX_SEGMENTS 80u
struct us_hostcopy_segment {
    void *dst;
    const void *src;
    size_t bytes;
    bool fresh;
};
typedef bool (*us_hostcopy_ready_fn)(void *arg, unsigned segment);
bool us_hostcopy_segments_to_staging(const struct us_hostcopy_segment *seg, unsigned nsegs,
                                     us_hostcopy_ready_fn ready, void *arg);

/* Before a D2H's host copy writes `bytes` at `dst`: where the destination is
 * at least option d2h_hugepages long and its first 2 MiB-aligned page is not
 * mapped yet (a new buffer), advises the kernel to back its 2 MiB-aligned
 * interior with transparent huge pages (MADV_HUGEPAGE). A new buffer faults
 * in page by page as the copy writes it, and its program's free() unmaps it
 * page by page: on an H200 host 256 MiB copied into new memory ran at 9.3
 * GB/s on 8 threads (12.7 with the advice) and its free() took 12 ms (1 ms),
 * which a Python program spends holding the GIL. The bytes are the same;
 * memory already mapped is left alone, so only memory the copy is about to
 * write in full changes page size. The huge page is the kernel's
 * (hpage_pmd_size: 2 MiB on x86-64). Nothing where the kernel's THP mode is
 * never (read once) or the process turned THP off (PR_SET_THP_DISABLE); a
 * MADV_NOHUGEPAGE the program gave a buffer it has not written yet is not
 * seen (option d2h_hugepages=0). Returns whether it advised (tests). */
bool us_hostcopy_advise_fresh(void *dst, size_t bytes);

/* A copy of `bytes` (one us_hostcopy call) comes next, after a wait for the
 * GPU: where the pool shares it and any of its workers sleeps, wakes them now,
 * to spin for the job (as after a job when jobs come back to back). A worker
 * that slept takes 20-200 us to run again on an H200 VM host after 2 ms idle,
 * against 17 us when the machine is busy (seven workers); woken when the job
 * is posted, the caller waited for that. Woken here, the wake-up overlaps the
 * caller's wait for its first chunk. Costs the caller one broadcast (6-8 us
 * there) only when a worker sleeps, which the job would otherwise pay. */
void us_hostcopy_expect(size_t bytes);

/* Starts the pool's threads now, as many as a large copy would use: their
 * creation was the first large pipelined copy's (on H100 hosts the first
 * 2 MiB H2D of a process's rows took 0.78-0.84 ms with the pool's first
 * slots pinned ahead and the threads not, 0.31-0.37 with both; native
 * 0.22-0.29). */
void us_hostcopy_start(void);

/* Worker threads running now (tests). 0 before the first large copy. */
unsigned us_hostcopy_workers(void);

/* Times a worker, its part copied, spun for the next job instead of
 * sleeping (tests): only while jobs come back to back (hostcopy.c). */
unsigned us_hostcopy_worker_spins(void);

#endif
