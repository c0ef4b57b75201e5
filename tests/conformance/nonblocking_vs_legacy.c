/* Rule: a non-blocking stream (cudaStreamNonBlocking) and the legacy default
 * stream do not wait for each other, either way. Arguments: legacy_first
 * (writer on the legacy stream) or nonblocking_first. */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cudaStream_t nb = cf_stream(0, false);
    if (cf_arg("legacy_first"))
        cf_result("saw=%d", cf_reader_saw(0, 0, 0, nb));
    else
        cf_result("saw=%d", cf_reader_saw(0, nb, 0, 0));
    return 0;
}
