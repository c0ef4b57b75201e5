/* Rule: work issued after a copy on the legacy stream between two devices,
 * on the blocking stream of the device that is NOT current, waits for the
 * copy (cudaMemcpyPeer's documentation: "serialized with respect to all
 * pending and future asynchronous work" of the current, source and
 * destination devices; the same for a D2D cudaMemcpy across devices).
 * No peer access. Arguments: memcpy | peer | async0, cur0 | cur1.
 *
 * The copy d1 <- d0 is held back by a 300 ms kernel on the current device's
 * legacy stream; then a kernel on the other device's blocking stream
 * overwrites that device's side at once: the source (device 0: the copy must
 * have read it before) or the destination (device 1: the copy must not land
 * after it). Outcome: ordered or unordered. */
#include "conform.h"

#include <stdio.h>

#define WORDS ((size_t)1 << 20)

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cf_need_devices(2);
    int current = cf_arg("cur1") ? 1 : 0, other = 1 - current;
    size_t bytes = WORDS * sizeof(uint32_t);
    uint32_t *d[2] = {cf_words(0, WORDS), cf_words(1, WORDS)};
    cudaStream_t s[2] = {cf_stream(0, true), cf_stream(1, true)};
    const uint32_t data = 21, later = 22;
    CF_CK(cudaSetDevice(0));
    cf_fill(s[0], d[0], WORDS, data, 0);
    cf_sync_all();

    CF_CK(cudaSetDevice(current));
    cf_sleep(0, 300);
    if (cf_arg("peer"))
        CF_CK(cudaMemcpyPeer(d[1], 1, d[0], 0, bytes));
    else if (cf_arg("async0"))
        CF_CK(cudaMemcpyAsync(d[1], d[0], bytes, cudaMemcpyDeviceToDevice, 0));
    else
        CF_CK(cudaMemcpy(d[1], d[0], bytes, cudaMemcpyDeviceToDevice));
    CF_CK(cudaSetDevice(other));
    cf_fill(s[other], d[other], WORDS, later, 0);

    size_t right = cf_words_right(d[1], WORDS, other == 0 ? data : later);
    fprintf(stderr, "%zu of %zu words right\n", right, WORDS);
    cf_result("%s", right == WORDS ? "ordered" : "unordered");
    return 0;
}
