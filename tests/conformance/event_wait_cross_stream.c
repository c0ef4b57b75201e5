/* Rule: cudaStreamWaitEvent makes a stream wait for the work recorded before
 * the event on another stream (two non-blocking streams of one device).
 * Argument cross_device: the writer's stream and event are on device 0, the
 * waiting stream on device 1 (cudaStreamWaitEvent accepts an event of
 * another device; measured on a GPU). */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    int rdev = 0;
    if (cf_arg("cross_device")) {
        cf_need_devices(2);
        rdev = 1;
    }
    cudaStream_t w = cf_stream(0, false), r = cf_stream(rdev, false);
    int *f = cf_flags(2);
    f[1] = -1;
    cudaEvent_t ev;
    CF_CK(cudaSetDevice(0));
    CF_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cf_set_flag_after(w, &f[0], 1, 200);
    CF_CK(cudaEventRecord(ev, w));
    CF_CK(cudaSetDevice(rdev));
    CF_CK(cudaStreamWaitEvent(r, ev, 0));
    cf_copy_flag(r, &f[0], &f[1]);
    cf_sync_all();
    cf_result("saw=%d", f[1]);
    return 0;
}
