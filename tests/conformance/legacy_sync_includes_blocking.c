/* Rule: cudaStreamSynchronize(0) returns only after the earlier work of the
 * device's blocking streams (not only the legacy stream's own). Argument
 * nonblocking: the work is on a non-blocking stream, which it does not wait
 * for. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    bool nonblocking = cf_arg("nonblocking");
    cudaStream_t s = cf_stream(0, !nonblocking);
    int *f = cf_flags(1);
    cf_set_flag_after(s, &f[0], 1, 300);
    CF_CK(cudaStreamSynchronize(0));
    int flag = *(volatile int *)&f[0];
    cf_result("flag_at_return=%d", flag);
    cf_sync_all();
    return 0;
}
