/* chain.h - the one path every intercepted copy takes, whichever entry layer
 * (runtime or driver) it came in through: classify, decide, pipeline or
 * native, record (docs/architecture.md draws it). */
#ifndef UNSTALL_CHAIN_H
#define UNSTALL_CHAIN_H

#include <cuda_runtime_api.h>

#include "copy.h"

/* The whole chain for one copy. The only function an entry calls for a copy;
 * it may fill c's classification fields. */
cudaError_t us_copy_run(struct us_copy *c);

/* Once per process, after the program's first device allocation (usually the
 * call that created its context, which took milliseconds anyway): pays the
 * one-time costs a process's first copy would otherwise pay inside the call.
 * The pool's first slots, their events and a first DMA through them, from
 * the allocation just made, device_bytes (us_staging_warm), the host copy
 * threads (us_hostcopy_start), and a call site
 * captured from the program's own stack: the unwinder reads an object's
 * unwind tables the first time one of its frames is on a captured stack,
 * which the constructor's stack (the shim's, ld.so's) does not reach. And
 * the calling thread's own first-use costs, on the thread that is likely to
 * make the first copies: its pointer-table reader slot and, with findings,
 * its id (a system call; 2 us on an H200 host). Returns true the one time
 * it warms, when findings are kept: the caller then rehearses the copies
 * (us_copy_rehearsal_bytes). */
bool us_copy_warm(const void *device_bytes, size_t size);

/* The source of a rehearsal: a copy from these bytes, to device memory, runs
 * through the chain as a small pageable H2D does when findings are kept
 * (classified, its call site captured after a native call) with nothing
 * issued, no finding recorded and no call counted. The entry layer makes one
 * through each of its common copy exports once (us_entry_rehearse_copies,
 * export.h), when us_copy_warm has warmed: the unwinder's first walk through
 * a return address reads that frame's unwind tables (about 1.5 us each where
 * the caches are cold) and the finding path's code is not in the caches yet,
 * which the program's first copy paid. With these return addresses met, the
 * first copy meets only its caller's. */
extern const unsigned char us_copy_rehearsal_bytes[4];

#endif
