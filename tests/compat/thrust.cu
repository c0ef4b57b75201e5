/* thrust.cu - Thrust as programs use it: device vectors built from host
 * vectors (pageable), a sort, a reduction, a transform, and the results
 * copied back into host vectors; checked against the same done on the host. */
#include "compat.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

struct times3 {
    __host__ __device__ int operator()(int x) const { return 3 * x; }
};

int main(void)
{
    compat_name = "thrust";
    for (size_t n : {(size_t)1, (size_t)1000, (size_t)1 << 20, (size_t)1 << 24}) {
        std::vector<int> host(n);
        for (size_t i = 0; i < n; i++)
            host[i] = (int)((i * 2654435761u) % 1000003u) - 500000;
        thrust::device_vector<int> dev(host.begin(), host.end());
        thrust::sort(dev.begin(), dev.end());
        long long sum = thrust::reduce(dev.begin(), dev.end(), 0LL, thrust::plus<long long>());
        thrust::device_vector<int> tripled(n);
        thrust::transform(dev.begin(), dev.end(), tripled.begin(), times3());
        std::vector<int> sorted(n), back(n);
        thrust::copy(dev.begin(), dev.end(), sorted.begin());
        thrust::copy(tripled.begin(), tripled.end(), back.begin());
        std::vector<int> want = host;
        std::sort(want.begin(), want.end());
        long long want_sum = std::accumulate(host.begin(), host.end(), 0LL);
        if (sorted != want)
            compat_fail("thrust::sort's result copied back differs");
        if (sum != want_sum)
            compat_fail("thrust::reduce differs");
        for (size_t i = 0; i < n; i++)
            if (back[i] != 3 * want[i])
                compat_fail("thrust::transform's result copied back differs");
        int first = dev[0]; /* one element through operator[]: a 4-byte D2H */
        if (first != want[0])
            compat_fail("device_vector element read differs");
    }
    return compat_pass();
}
