/* Rule: a host function (cudaLaunchHostFunc) runs in stream order: after the
 * stream's earlier work, and before its later work starts. Outcome:
 * after_earlier=0|1 (the host function saw the flag a 200 ms kernel before it
 * sets) and before_later=0|1 (a kernel after it saw the flag the host function
 * sets after sleeping 100 ms). */
#include "conform.h"

#include <time.h>

static int *flags;

static void CUDART_CB host_fn(void *arg)
{
    (void)arg;
    flags[1] = *(volatile int *)&flags[0];
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    __atomic_store_n(&flags[2], 1, __ATOMIC_SEQ_CST);
}

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    flags = cf_flags(4);
    flags[1] = flags[3] = -1;
    cudaStream_t s = cf_stream(0, false);
    cf_set_flag_after(s, &flags[0], 1, 200);
    CF_CK(cudaLaunchHostFunc(s, host_fn, NULL));
    cf_copy_flag(s, &flags[2], &flags[3]);
    CF_CK(cudaStreamSynchronize(s));
    cf_result("after_earlier=%d before_later=%d", flags[1], flags[3]);
    return 0;
}
