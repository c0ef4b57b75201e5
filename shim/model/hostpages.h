/* hostpages.h - host pages the runtime called pageable, remembered.
 *
 * Asking the runtime what a host pointer is (cudaPointerGetAttributes) is
 * most of what classifying a small pageable copy costs: 0.3 us back to back
 * and 2.8-7 us after the host was idle 2 ms, on an H200 host
 * (tools/bench/probe.sh), where a native 4 B copy takes 5-20 us. A program
 * copies from the same buffers step after step, so each thread remembers the
 * last pages the runtime answered "unregistered" (pageable) for.
 *
 * A page stays pageable until memory is mapped or registered: every call the
 * shim sees that can do that (the runtime's allocations and registrations,
 * the driver's: hostpages.c lists them) forgets every page, in every thread,
 * at once (a generation count). What the shim does not see (a library that
 * pins through a libcuda of its own linker namespace) is caught where it
 * matters: a copy the shim would rewrite on a remembered answer asks the
 * runtime again before it waits for anything (pipeline_d2h.c,
 * pipeline_h2d.c), and goes native when the answer changed. A remembered
 * answer that was wrong can then only mislabel a finding, never change what
 * a copy does. Strict mode does not use remembered answers (a copy it would
 * refuse is classified by the runtime). */
#ifndef UNSTALL_HOSTPAGES_H
#define UNSTALL_HOSTPAGES_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the calling thread remembers ptr's page as pageable. */
bool us_hostpages_pageable(const void *ptr);

/* The generation to learn an answer in: read before asking the runtime, so
 * that memory mapped while the question was asked forgets the answer. */
uint64_t us_hostpages_generation(void);

/* The runtime answered "unregistered" for ptr, asked in `generation`. */
void us_hostpages_learn_pageable(const void *ptr, uint64_t generation);

/* The runtime answered otherwise for ptr after all: its page is forgotten. */
void us_hostpages_forget(const void *ptr);

/* Memory was mapped or registered: every thread forgets every page, unless
 * the calling thread is mapping memory of the shim's own (below). */
void us_hostpages_mapping_changed(void);

/* Around the shim's own pinned allocations (its staging, fix/staging.c and
 * fix/d2d_stage.c): the runtime's registration reaches libcuda through the
 * driver layer's wrappers, which call us_hostpages_mapping_changed. Such
 * memory is freshly mapped: a page the program still holds cannot be in it
 * (the kernel maps new memory only where nothing is mapped), so every page
 * remembered stays right, and the calling thread's mapping changes are not
 * heeded until the matching end. Without this, each growth of the staging
 * pool made every thread ask the runtime again at its next pageable copy: a
 * cold pointer query inside the first copy after a larger one (2.8-7 us
 * after an idle moment). Nests. */
void us_hostpages_own_mapping_begin(void);
void us_hostpages_own_mapping_end(void);

#endif
