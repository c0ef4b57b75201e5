/* Rule: an event never recorded is complete: cudaEventQuery and
 * cudaEventSynchronize succeed at once, and cudaStreamWaitEvent on it makes
 * the stream wait for nothing (a kernel after the wait runs before a 200 ms
 * kernel on another stream ends). */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cudaEvent_t ev;
    CF_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaError_t query = cudaEventQuery(ev);
    cudaError_t sync = cudaEventSynchronize(ev);
    cudaStream_t a = cf_stream(0, false), b = cf_stream(0, false);
    int *f = cf_flags(2);
    f[1] = -1;
    cf_set_flag_after(a, &f[0], 1, 200);
    CF_CK(cudaStreamWaitEvent(b, ev, 0));
    cf_copy_flag(b, &f[0], &f[1]);
    cf_sync_all();
    cf_result("query=%s sync=%s waiter_saw=%d", cudaGetErrorName(query), cudaGetErrorName(sync), f[1]);
    return 0;
}
