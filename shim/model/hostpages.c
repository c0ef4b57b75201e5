/* hostpages.c - see hostpages.h.
 *
 * Per thread, a direct-mapped table of 4 KiB page numbers, each with the
 * generation it was learnt in; one global generation, bumped by
 * us_hostpages_mapping_changed. A lookup is a thread-local read and one
 * atomic load of a line that changes only when memory is mapped: no lock,
 * nothing shared written. 4 KiB is the smallest page a registration covers,
 * so a remembered span never straddles two kinds of memory (a larger system
 * page only makes the spans finer than they need be).
 *
 * Who calls us_hostpages_mapping_changed: the runtime's allocation and
 * registration exports (entry_runtime/alloc.c) and the driver's functions that map
 * memory at an address (entry_driver/mappings.c: pinned and managed
 * allocations, registrations, device allocations, virtual memory mappings,
 * IPC and pool imports), which a dynamic runtime's own allocations also go
 * through. */
#include "hostpages.h"
#include "hot.h"

#include <stdatomic.h>
#include <stdint.h>

#define PAGE_SHIFT 12
#define SLOTS 16 /* a power of two */

struct remembered {
    uintptr_t page;
    uint64_t generation; /* 0: empty */
};

static _Atomic uint64_t generation = 1; /* never 0, an empty slot's */
static _Thread_local struct remembered pages[SLOTS] __attribute__((tls_model("initial-exec")));
static _Thread_local unsigned own_mappings __attribute__((tls_model("initial-exec")));

static inline struct remembered *slot_of(uintptr_t page)
{
    return &pages[(page ^ (page >> 5)) & (SLOTS - 1)];
}

US_HOT bool us_hostpages_pageable(const void *ptr)
{
    uintptr_t page = (uintptr_t)ptr >> PAGE_SHIFT;
    const struct remembered *r = slot_of(page);
    return r->page == page && r->generation == atomic_load_explicit(&generation, memory_order_acquire);
}

US_HOT uint64_t us_hostpages_generation(void)
{
    return atomic_load_explicit(&generation, memory_order_acquire);
}

US_HOT void us_hostpages_learn_pageable(const void *ptr, uint64_t asked_in)
{
    uintptr_t page = (uintptr_t)ptr >> PAGE_SHIFT;
    struct remembered *r = slot_of(page);
    r->page = page;
    r->generation = asked_in;
}

void us_hostpages_forget(const void *ptr)
{
    uintptr_t page = (uintptr_t)ptr >> PAGE_SHIFT;
    struct remembered *r = slot_of(page);
    if (r->page == page)
        r->generation = 0;
}

void us_hostpages_mapping_changed(void)
{
    if (own_mappings == 0)
        atomic_fetch_add_explicit(&generation, 1, memory_order_acq_rel);
}

void us_hostpages_own_mapping_begin(void)
{
    own_mappings++;
}

void us_hostpages_own_mapping_end(void)
{
    own_mappings--;
}
