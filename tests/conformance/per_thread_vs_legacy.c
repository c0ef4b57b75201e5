/* Rule: the per-thread default stream (cudaStreamPerThread) is a blocking
 * stream: it and the legacy stream wait for each other's earlier work.
 * Arguments: legacy_first or per_thread_first. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    if (cf_arg("legacy_first"))
        cf_result("saw=%d", cf_reader_saw(0, 0, 0, cudaStreamPerThread));
    else
        cf_result("saw=%d", cf_reader_saw(0, cudaStreamPerThread, 0, 0));
    return 0;
}
