/* prefault.h - the shim's own pages, mapped in at its start, and the
 * memory it maps for itself (staging, spills) on a boundary and faulted in.
 *
 * The shim's .data and .bss (about 250 KiB: tables, locks, counters) are
 * anonymous memory the process has not touched, and its code and read-only
 * data are mapped from the file as they are first read: each page faults the
 * first time, and that was inside a program's first copies (a finding's lock
 * and row, the in-flight table, the unwind tables). On the simulated runtime
 * the first 4 B pageable cudaMemcpy took 5 page faults under the shim against
 * 1 natively (4 against 1 on an H200 host, whose VM makes a fault cost
 * microseconds). Mapping them at the start moves that cost into the shim's
 * start, which runs inside the program's first CUDA call (usually the one
 * that creates the context: a hundred milliseconds or more). */
#ifndef UNSTALL_PREFAULT_H
#define UNSTALL_PREFAULT_H

#include <stdbool.h>
#include <stddef.h>

/* Maps in every page of [start, start + bytes), rounded out to pages, for
 * reading or for writing: MADV_POPULATE_READ/WRITE (Linux 5.14), before it a
 * read per page, or an atomic add of 0, which writes without changing a byte
 * another thread may be writing. Returns the bytes covered. */
size_t us_prefault_range(void *start, size_t bytes, bool write);

/* An anonymous private mapping of `bytes` (rounded up to pages) that starts
 * on a multiple of `boundary` (a power of two, a whole number of pages), so
 * that huge pages can fill it; `flags` are added to MAP_PRIVATE |
 * MAP_ANONYMOUS (MAP_NORESERVE). It is cut from a mapping `boundary` larger,
 * whose rest goes back. NULL: the mapping failed. */
void *us_map_on_boundary(size_t bytes, size_t boundary, int flags);

/* Maps in every page of the object this code is linked into (libunstall.so,
 * or a test program linking the core): code and read-only data for reading,
 * the writable data past RELRO for writing (as us_prefault_range). Never
 * changes a byte.
 * Returns the bytes it covered; 0 where it found nothing. */
size_t us_prefault_self(void);

#endif
