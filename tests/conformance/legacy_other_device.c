/* Rule: a kernel on device 1's legacy stream does not wait for device 0's
 * blocking streams (the legacy stream's ordering is per device). */
#include "conform.h"

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cf_need_devices(2);
    cudaStream_t blocking0 = cf_stream(0, true);
    cf_result("saw=%d", cf_reader_saw(0, blocking0, 1, 0));
    return 0;
}
