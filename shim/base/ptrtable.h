/* ptrtable.h - what the shim has learnt about memory ranges.
 *
 * Ranges come from intercepted allocations (cudaMalloc, cudaMallocHost,
 * cudaHostAlloc, cudaHostRegister) and leave with their release. The table
 * is split in shards by 2 MiB granule. A lookup takes no lock: it announces
 * the shard it reads in its thread's own reader slot, and waits on the
 * shard's reader-writer lock only while a writer (an allocation or release
 * of that shard) is updating it; writers are serialised by one mutex. No
 * global lock sits on the copy path (ptrtable.c says how). Pointers the table does not know are
 * classified by the runtime (classify.c), not here. */
#ifndef UNSTALL_PTRTABLE_H
#define UNSTALL_PTRTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum us_mem_kind {
    US_MEM_UNKNOWN = 0, /* not in the table */
    US_MEM_DEVICE,      /* cudaMalloc */
    US_MEM_PINNED,      /* cudaMallocHost / cudaHostAlloc */
    US_MEM_REGISTERED,  /* cudaHostRegister */
    US_MEM_PAGEABLE,    /* plain host memory (from the runtime's answer; never stored) */
    US_MEM_MANAGED,     /* managed memory (from the runtime's answer; never stored) */
};

struct us_range {
    uintptr_t base;
    size_t size;
    enum us_mem_kind kind;
    int device; /* owning device for US_MEM_DEVICE, -1 for host ranges */
};

/* Add a range; an existing range with the same base is replaced. */
void us_ptrtable_insert(uintptr_t base, size_t size, enum us_mem_kind kind, int device);

/* Remove the range that starts at base; false if there was none. *removed
 * (may be NULL) receives it. */
bool us_ptrtable_remove(uintptr_t base, struct us_range *removed);

/* The range that contains addr; false if none. */
bool us_ptrtable_lookup(uintptr_t addr, struct us_range *out);

/* The calling thread's reader slot, claimed now rather than in its first
 * lookup (a copy's classification). */
void us_ptrtable_prepare_thread(void);

/* Drop everything (tests, and a forked child). */
void us_ptrtable_clear(void);

#endif
