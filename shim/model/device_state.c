/* device_state.c - see device_state.h. Out-of-range devices are ignored:
 * they answer "unknown" (no peer access, no blocking streams), which sends
 * the copies that depend on them to the native path. */
#include "device_state.h"
#include "hot.h"

#include "real.h"

#include <stdatomic.h>
#include <stdint.h>

static _Atomic uint64_t peer_enabled[US_MAX_DEVICES]; /* bit p of [d]: d -> p */
static _Atomic int blocking_streams[US_MAX_DEVICES];
static _Atomic int legacy_used[US_MAX_DEVICES];
static _Atomic int blocking_streams_total; /* lets the common case skip the device lookup */

static bool valid(int device) { return device >= 0 && device < US_MAX_DEVICES; }

void us_device_note_peer(int device, int peer, bool enabled)
{
    if (!valid(device) || !valid(peer))
        return;
    uint64_t bit = UINT64_C(1) << peer;
    if (enabled)
        atomic_fetch_or(&peer_enabled[device], bit);
    else
        atomic_fetch_and(&peer_enabled[device], ~bit);
}

bool us_device_peer_enabled(int a, int b)
{
    if (!valid(a) || !valid(b))
        return false;
    return (atomic_load_explicit(&peer_enabled[a], memory_order_relaxed) >> b & 1) ||
           (atomic_load_explicit(&peer_enabled[b], memory_order_relaxed) >> a & 1);
}

void us_device_note_stream_created(int device, bool blocking)
{
    if (valid(device) && blocking) {
        atomic_fetch_add(&blocking_streams[device], 1);
        atomic_fetch_add(&blocking_streams_total, 1);
    }
}

void us_device_note_stream_destroyed(int device, bool blocking)
{
    if (!valid(device) || !blocking)
        return;
    if (atomic_fetch_sub(&blocking_streams[device], 1) <= 0)
        atomic_store(&blocking_streams[device], 0); /* a stream created before us */
    if (atomic_fetch_sub(&blocking_streams_total, 1) <= 0)
        atomic_store(&blocking_streams_total, 0);
}

US_HOT int us_device_blocking_streams(int device)
{
    return valid(device) ? atomic_load_explicit(&blocking_streams[device], memory_order_relaxed) : 0;
}

US_HOT bool us_device_any_blocking_streams(void)
{
    return atomic_load_explicit(&blocking_streams_total, memory_order_relaxed) > 0;
}

US_HOT bool us_device_note_legacy_use(int device)
{
    if (!valid(device) || atomic_load_explicit(&legacy_used[device], memory_order_relaxed))
        return false;
    return atomic_exchange(&legacy_used[device], 1) == 0;
}

bool us_device_legacy_used(int device)
{
    return valid(device) && atomic_load_explicit(&legacy_used[device], memory_order_relaxed);
}

void us_device_state_reset(void)
{
    for (int d = 0; d < US_MAX_DEVICES; d++) {
        atomic_store(&peer_enabled[d], 0);
        atomic_store(&blocking_streams[d], 0);
        atomic_store(&legacy_used[d], 0);
    }
    atomic_store(&blocking_streams_total, 0);
}
