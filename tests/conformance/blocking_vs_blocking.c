/* Rule: two blocking streams of a device do not wait for each other (only
 * the legacy stream orders them). */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cudaStream_t a = cf_stream(0, true), b = cf_stream(0, true);
    cf_result("saw=%d", cf_reader_saw(0, a, 0, b));
    return 0;
}
