/* Rule: an event recorded after a long kernel is not complete until the
 * kernel is (cudaEventQuery: cudaErrorNotReady); cudaEventSynchronize returns
 * after it, and the event is then complete. Outcome: before=<query>
 * flag_after_sync=0|1 after=<query>. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cudaStream_t s = cf_stream(0, false);
    int *f = cf_flags(1);
    cudaEvent_t ev;
    CF_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cf_set_flag_after(s, &f[0], 1, 300);
    CF_CK(cudaEventRecord(ev, s));
    cudaError_t before = cudaEventQuery(ev);
    CF_CK(cudaEventSynchronize(ev));
    int flag = *(volatile int *)&f[0];
    cudaError_t after = cudaEventQuery(ev);
    cf_result("before=%s flag_after_sync=%d after=%s", cudaGetErrorName(before), flag, cudaGetErrorName(after));
    return 0;
}
