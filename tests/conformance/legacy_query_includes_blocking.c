/* Rule: cudaStreamQuery(0) reports the earlier work of the device's blocking
 * streams as pending. Argument nonblocking: the work is on a non-blocking
 * stream, which it does not count. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    bool nonblocking = cf_arg("nonblocking");
    cudaStream_t s = cf_stream(0, !nonblocking);
    cf_sleep(s, 300);
    cudaError_t q = cudaStreamQuery(0);
    cf_result("query=%s", cudaGetErrorName(q));
    cf_sync_all();
    return 0;
}
