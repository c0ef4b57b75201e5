/* Rule: an event is recorded only on a stream of its own device (the device
 * current when it was created): cudaEventRecord on a stream of another device
 * fails (measured on a GPU). Outcome: the error name. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cf_need_devices(2);
    cudaEvent_t ev;
    CF_CK(cudaSetDevice(0));
    CF_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaStream_t s1 = cf_stream(1, false);
    cudaError_t err = cudaEventRecord(ev, s1);
    cudaGetLastError(); /* not sticky: clear it */
    cf_result("record=%s", cudaGetErrorName(err));
    return 0;
}
