/* Rule: a cudaMemcpy of 0 bytes does nothing, not even order: it puts no
 * work on the legacy stream, so a blocking stream's later work does not wait
 * for another blocking stream's earlier work through it (found by the
 * random-copy stress on an H200: natively, a per-thread-stream copy after a
 * 0-byte cudaMemcpy read a buffer a kernel on a blocking stream had not yet
 * written). Arguments: bytes0 (the 0-byte copy), bytes4 (a 4-byte copy, the
 * control: it orders, as legacy_after_blocking and blocking_after_legacy say).
 * Outcome: saw=1 when the reader on the second blocking stream ran after the
 * writer on the first. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    size_t bytes = cf_arg("bytes4") ? 4 : 0;
    cudaStream_t writer = cf_stream(0, true), reader = cf_stream(0, true);
    uint32_t *a = cf_words(0, 4), *b = cf_words(0, 4);
    int *f = cf_flags(2);
    f[1] = -1;
    cf_set_flag_after(writer, &f[0], 1, 200);
    CF_CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    cf_copy_flag(reader, &f[0], &f[1]);
    cf_sync_all();
    cf_result("saw=%d", f[1]);
    return 0;
}
