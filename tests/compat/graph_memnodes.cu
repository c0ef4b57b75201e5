/* graph_memnodes.cu - a CUDA graph captured in global mode, as NVIDIA's
 * graphMemoryNodes sample builds one: a second stream joins through events,
 * memory is allocated and freed in the graph (cudaMallocAsync/cudaFreeAsync),
 * a pageable H2D on the first stream, a kernel, a pageable D2H on the second,
 * and the joined stream and the events are destroyed before
 * cudaStreamEndCapture. The graph is replayed three times; each replay's
 * bytes are checked. (Under an earlier unstall, whose own calls were not
 * capture-safe, the capture ended with cudaErrorStreamCaptureInvalidated.) */
#include "compat.h"

int main(void)
{
    compat_name = "graph_memnodes";
    const size_t n = (size_t)1 << 20;
    unsigned char *h_in = (unsigned char *)malloc(n), *h_out = (unsigned char *)malloc(n);
    if (h_in == NULL || h_out == NULL)
        compat_fail("malloc");
    compat_fill(h_in, n, 7);
    cudaStream_t s1, s2;
    cudaEvent_t forked, joined;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CK(cudaEventCreate(&forked));
    CK(cudaEventCreate(&joined));
    unsigned char *d_a, *d_b;
    CK(cudaMallocAsync((void **)&d_a, n, s1));
    CK(cudaMallocAsync((void **)&d_b, n, s1));
    CK(cudaMemcpyAsync(d_a, h_in, n, cudaMemcpyHostToDevice, s1));
    compat_add<<<64, 256, 0, s1>>>(d_b, d_a, n, 1);
    CK(cudaGetLastError());
    CK(cudaEventRecord(forked, s1));
    CK(cudaStreamWaitEvent(s2, forked, 0));
    CK(cudaMemcpyAsync(h_out, d_b, n, cudaMemcpyDeviceToHost, s2));
    CK(cudaEventRecord(joined, s2));
    CK(cudaStreamWaitEvent(s1, joined, 0));
    CK(cudaFreeAsync(d_a, s1));
    CK(cudaFreeAsync(d_b, s1));
    CK(cudaStreamDestroy(s2));
    CK(cudaEventDestroy(forked));
    CK(cudaEventDestroy(joined));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamEndCapture(s1, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    unsigned char *want = (unsigned char *)malloc(n);
    if (want == NULL)
        compat_fail("malloc");
    for (size_t i = 0; i < n; i++)
        want[i] = (unsigned char)(h_in[i] + 1);
    for (int rep = 0; rep < 3; rep++) {
        memset(h_out, 0, n);
        CK(cudaGraphLaunch(exec, s1));
        CK(cudaStreamSynchronize(s1));
        if (memcmp(h_out, want, n) != 0)
            compat_fail("a replay's D2H does not hold the kernel's result");
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    CK(cudaStreamDestroy(s1));
    return compat_pass();
}
