/* Rule: a copy between two devices on the per-thread default stream
 * (cudaStreamPerThread) does not wait for another stream's work: the
 * per-thread stream is a blocking stream of the current device only, which
 * orders with the legacy stream, not with other blocking streams nor with
 * another device. No peer access. Arguments: cur0 | cur1.
 *
 * A kernel on device 0's blocking stream writes the source after 300 ms; the
 * copy reads it at once. Outcome: unordered (d1 holds the source as it was
 * before the kernel, every word), ordered, or mixed. */
#include "conform.h"

#include <stdio.h>

#define WORDS ((size_t)1 << 20)

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cf_need_devices(2);
    int current = cf_arg("cur1") ? 1 : 0;
    size_t bytes = WORDS * sizeof(uint32_t);
    uint32_t *d0 = cf_words(0, WORDS), *d1 = cf_words(1, WORDS);
    cudaStream_t s0 = cf_stream(0, true);
    const uint32_t old = 31, fresh = 32;
    CF_CK(cudaSetDevice(0));
    cf_fill(s0, d0, WORDS, old, 0);
    cf_sync_all();

    CF_CK(cudaSetDevice(0));
    cf_fill(s0, d0, WORDS, fresh, 300);
    CF_CK(cudaSetDevice(current));
    CF_CK(cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, cudaStreamPerThread));
    CF_CK(cudaStreamSynchronize(cudaStreamPerThread));

    size_t as_before = cf_words_right(d1, WORDS, old);
    size_t as_after = cf_words_right(d1, WORDS, fresh);
    fprintf(stderr, "%zu words as before the kernel, %zu as after\n", as_before, as_after);
    cf_result("%s", as_before == WORDS ? "unordered" : as_after == WORDS ? "ordered" : "mixed");
    return 0;
}
