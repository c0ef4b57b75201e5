/* driver.c - runs a fuzz target (fuzz_targets.c) without libFuzzer, for
 * machines without clang: first every file given (the corpus), then seeded
 * random inputs, some of them corpus files mutated, for a number of seconds.
 * Prints the seed: the same seed gives the same inputs (a failure aborts
 * with the sanitizer's or the target's message).
 * Usage: driver SECONDS SEED [CORPUS_FILE...] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng;
static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    uint8_t *buf = malloc(1 << 16);
    *size = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

/* bytes that matter to the parsers: digits, suffixes, separators, '%' */
static const char interesting[] = "0123456789kKmMgGtT.=#%pr \t\n-+xX,yesnotruefalse*@:";

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    double seconds = atof(argv[1]);
    rng = strtoull(argv[2], NULL, 0);
    printf("fuzz driver: seed %s, %s s, %d corpus files\n", argv[2], argv[1], argc - 3);
    uint8_t *corpus[256];
    size_t sizes[256];
    int n = 0;
    for (int i = 3; i < argc && n < 256; i++)
        if ((corpus[n] = slurp(argv[i], &sizes[n])) != NULL) {
            LLVMFuzzerTestOneInput(corpus[n], sizes[n]);
            n++;
        }
    uint8_t buf[4096];
    unsigned long runs = 0;
    time_t end = time(NULL) + (time_t)seconds;
    while (time(NULL) < end) {
        for (int k = 0; k < 1000; k++, runs++) {
            size_t len;
            if (n > 0 && next() % 2) { /* a mutated corpus file */
                int c = (int)(next() % (uint64_t)n);
                len = sizes[c] < sizeof buf ? sizes[c] : sizeof buf;
                memcpy(buf, corpus[c], len);
                for (int m = (int)(next() % 4); m >= 0 && len > 0; m--)
                    buf[next() % len] = next() % 2 ? (uint8_t)next() : (uint8_t)interesting[next() % (sizeof interesting - 1)];
                if (next() % 4 == 0 && len > 1)
                    len = 1 + next() % len;
            } else {
                len = next() % 200;
                for (size_t i = 0; i < len; i++)
                    buf[i] = next() % 3 ? (uint8_t)interesting[next() % (sizeof interesting - 1)] : (uint8_t)next();
            }
            LLVMFuzzerTestOneInput(buf, len);
        }
    }
    printf("fuzz driver: %lu runs, no failure\n", runs);
    for (int i = 0; i < n; i++)
        free(corpus[i]);
    return 0;
}
