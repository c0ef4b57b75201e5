/* Rule: a cross-stream wait enqueued on the legacy stream (cudaStreamWaitEvent
 * of stream 0 for an event of a non-blocking stream) is legacy-stream work,
 * so later work of a blocking stream waits for it, and through it for the
 * event. What unstall's legacy_stream=ordered relies on: after each moved
 * operation the legacy stream waits for its event, so that later work of the
 * program's blocking streams still comes after it.
 * Argument per_thread: the later work is on the per-thread default stream
 * (blocking toward the legacy stream too). */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cudaStream_t w = cf_stream(0, false);
    cudaStream_t r = cf_arg("per_thread") ? cudaStreamPerThread : cf_stream(0, true);
    int *f = cf_flags(2);
    f[1] = -1;
    cudaEvent_t ev;
    CF_CK(cudaSetDevice(0));
    CF_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cf_set_flag_after(w, &f[0], 1, 200);
    CF_CK(cudaEventRecord(ev, w));
    CF_CK(cudaStreamWaitEvent(cudaStreamLegacy, ev, 0));
    cf_copy_flag(r, &f[0], &f[1]);
    cf_sync_all();
    cf_result("saw=%d", f[1]);
    return 0;
}
