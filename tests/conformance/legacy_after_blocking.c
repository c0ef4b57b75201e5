/* Rule: work on the legacy default stream waits for the earlier work of the
 * device's blocking streams (cudaStreamCreate). */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cudaStream_t blocking = cf_stream(0, true);
    cf_result("saw=%d", cf_reader_saw(0, blocking, 0, 0));
    return 0;
}
