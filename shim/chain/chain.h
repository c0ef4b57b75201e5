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

#endif
