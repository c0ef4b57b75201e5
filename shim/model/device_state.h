/* device_state.h - per-device facts the shim learns from intercepted calls:
 * which device pairs have peer access enabled, how many blocking streams are
 * alive, whether the legacy default stream has been used. Plain atomics, no
 * locks: these are read on every classified copy. */
#ifndef UNSTALL_DEVICE_STATE_H
#define UNSTALL_DEVICE_STATE_H

#include <stdbool.h>

#define US_MAX_DEVICES 64

/* cudaDeviceEnablePeerAccess(peer) succeeded (or said already enabled) while
 * `device` was current; disable clears it. */
void us_device_note_peer(int device, int peer, bool enabled);
/* Peer access between a and b in either direction: the driver then copies
 * directly and the copy is not staged. */
bool us_device_peer_enabled(int a, int b);

void us_device_note_stream_created(int device, bool blocking);
void us_device_note_stream_destroyed(int device, bool blocking);
int us_device_blocking_streams(int device);
bool us_device_any_blocking_streams(void); /* on any device: one atomic read */

/* Returns true the first time the legacy stream is used on the device. */
bool us_device_note_legacy_use(int device);
bool us_device_legacy_used(int device);


void us_device_state_reset(void); /* tests */

#endif
