/* Rule: a cudaMemcpyAsync from the device to pageable (malloc) memory returns
 * with the data in place, even behind a long kernel that writes the source
 * (measured: a pageable D2H always returned only when the data was in
 * place). Outcome: in_place or not_in_place. */
#include "conform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS ((size_t)4 << 20)

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    uint32_t *h = malloc(WORDS * sizeof *h);
    if (h == NULL)
        cf_ck(cudaErrorMemoryAllocation, "malloc", __FILE__, __LINE__);
    memset(h, 0, WORDS * sizeof *h);
    uint32_t *d = cf_words(0, WORDS);
    cudaStream_t s = cf_stream(0, false);
    cf_fill(s, d, WORDS, 51, 300);
    CF_CK(cudaMemcpyAsync(h, d, WORDS * sizeof *h, cudaMemcpyDeviceToHost, s));
    size_t right = 0;
    for (size_t i = 0; i < WORDS; i++)
        right += h[i] == cf_word(i, 51);
    fprintf(stderr, "%zu of %zu words in place at return\n", right, WORDS);
    cf_result("%s", right == WORDS ? "in_place" : "not_in_place");
    cf_sync_all();
    free(h);
    return 0;
}
