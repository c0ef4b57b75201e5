/* spill.h - ordinary host memory that holds the source bytes of a pageable
 * H2D which its pinned slots could not take inside the call.
 *
 * A pageable H2D behind queued work must return once its source is read
 * (contract.md §2), and may not wait for the queue
 * (case B). When the pool has fewer free pinned slots than the copy needs
 * (the first copies of a size, while the grower thread pins more), the
 * bytes the slots cannot take are copied here, at host-memory speed and on
 * the copy threads, and fed into the slots later, in stream order, by host
 * functions on the copy's stream (pipeline_h2d.c).
 *
 * Buffers come from one region of address space of option spill_max bytes
 * (transparent huge pages advised, so that they fault in 2 MiB at a time;
 * MADV_DONTFORK, so that a forked child shares none of it), reserved once:
 * the memory it costs is what spills have written, spill_max at most, and
 * stays with the process (a copy into memory already in runs at memcpy
 * speed, one into new memory pays its page faults). Thread-safe; never on
 * the hot path (only copies that spill come here); no CUDA calls, so a
 * buffer may be given back from a host function. */
#ifndef UNSTALL_SPILL_H
#define UNSTALL_SPILL_H

#include <stdbool.h>
#include <stddef.h>

struct us_spill;

/* Reserves the region now (after the program's first device allocation,
 * us_staging_warm), so that no spill maps memory, and faults in its first
 * `warm_bytes` (rounded up to 2 MiB), so that the first spills write
 * memory already in; nothing when spill_max is 0. */
void us_spill_reserve(size_t warm_bytes);

/* After the program's first device allocation (us_staging_warm; where
 * pageable H2D copies are rewritten), or its first rewritten pageable H2D
 * if that comes first (pipeline_h2d.c): once, a background thread faults
 * the region in up to option spill_warm, 2 MiB at a time, so that a first
 * large copy behind queued work spills into memory already in (into new
 * memory the kernel zeroes each page as the copy first writes it). Not in a
 * forked child; nothing when spill_warm or spill_max is 0. Cheap after the
 * first call (one atomic load). */
void us_spill_warm_start(void);

/* Whether that thread still runs, and how far the region's pages are in
 * (warmed, or carved before): tests. */
bool us_spill_warming(void);
size_t us_spill_touched_bytes(void);

/* A buffer of at least `bytes` (*out; its memory: us_spill_memory). false:
 * spill_max would be passed, or the mapping failed (logged once each). */
bool us_spill_take(size_t bytes, struct us_spill **out);

/* The buffer's memory. */
char *us_spill_memory(const struct us_spill *spill);

/* Whether some of the buffer's pages are not in yet (memory never written
 * before): the copy into it faults them in (us_hostcopy_to_fresh). */
bool us_spill_fresh(const struct us_spill *spill);

/* Gives a buffer back (kept for the next spill). */
void us_spill_give(struct us_spill *spill);

/* Spill memory carved from the region so far (taken and kept), and taken
 * now: tests. */
size_t us_spill_carved_bytes(void);
size_t us_spill_taken_bytes(void);

/* Tests: stops the warming thread and waits for it, unmaps the region;
 * every buffer must have been given back. */
void us_spill_reset(void);

#endif
