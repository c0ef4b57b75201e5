/* Rule: cudaEventElapsedTime on a timing pair whose end is recorded after a
 * long kernel answers cudaErrorNotReady until the kernel is done (docs), and
 * that answer leaves the thread's last error as it was (measured: the
 * busy_engine_d2d probe reads its pair with this one call, no query first);
 * after a synchronize it succeeds. Outcome: elapsed=<error> last=<error>
 * after=<error>. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cudaStream_t s = cf_stream(0, false);
    int *f = cf_flags(1);
    cudaEvent_t start, end;
    CF_CK(cudaEventCreateWithFlags(&start, cudaEventDefault));
    CF_CK(cudaEventCreateWithFlags(&end, cudaEventDefault));
    (void)cudaGetLastError();
    CF_CK(cudaEventRecord(start, s));
    cf_set_flag_after(s, &f[0], 1, 300);
    CF_CK(cudaEventRecord(end, s));
    float ms = 0;
    cudaError_t elapsed = cudaEventElapsedTime(&ms, start, end);
    cudaError_t last = cudaGetLastError();
    CF_CK(cudaStreamSynchronize(s));
    cudaError_t after = cudaEventElapsedTime(&ms, start, end);
    cf_result("elapsed=%s last=%s after=%s", cudaGetErrorName(elapsed), cudaGetErrorName(last),
              cudaGetErrorName(after));
    return 0;
}
