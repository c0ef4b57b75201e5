/* Rule: work on a blocking stream (cudaStreamCreate) waits for the earlier
 * work of its device's legacy default stream. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cudaStream_t blocking = cf_stream(0, true);
    cf_result("saw=%d", cf_reader_saw(0, 0, 0, blocking));
    return 0;
}
