/* export.h - what every entry file needs. Entries are thin: they check that
 * the real function exists, step aside when the shim passes through, and
 * hand the call to a core module. Only symbols marked US_EXPORT leave the
 * library (it is built with -fvisibility=hidden). */
#ifndef UNSTALL_ENTRY_EXPORT_H
#define UNSTALL_ENTRY_EXPORT_H

#include <cuda_runtime_api.h>

#include "classify.h"
#include "device_state.h"
#include "real.h"
#include "state.h"
#include "watch.h"

#define US_EXPORT __attribute__((visibility("default")))

#endif
