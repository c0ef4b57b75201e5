/* ending_prog.c - a program that copies until a signal ends it, for the
 * report's endings (tests/endings/test_endings.py, on the simulated
 * runtime). Each round: a pageable H2D of a random size behind a short
 * kernel-like host function, then a pageable D2H back, the bytes checked
 * (exit 3 on a wrong byte). Prints "ready" once its first round is checked,
 * then "round N" per round.
 *
 * Usage: ending_prog MODE [SEED]
 *   loop     copies until a signal ends it
 *   handler  installs a SIGTERM handler after its first CUDA call (sigaction)
 *            that asks the loop to stop; exits 0 ("handled")
 *   reraise  installs, before any CUDA call, a SIGINT handler that does what
 *            Python does for an uncaught KeyboardInterrupt: restores the
 *            default action (signal) and raises SIGINT again
 *   ignore   ignores SIGHUP (signal SIG_IGN) before any CUDA call
 *   fail     exits 1 after a few rounds (a rank that fails) */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void ask_stop(int sig)
{
    (void)sig;
    stop = 1;
}

static void reraise(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig);
}

static void ck(cudaError_t err, const char *what)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "ending_prog: %s: %s\n", what, cudaGetErrorString(err));
        exit(2);
    }
}

static void pause_ms(void *arg)
{
    usleep((useconds_t)(size_t)arg * 1000u);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "loop";
    unsigned seed = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 1;
    srand(seed);
    if (strcmp(mode, "reraise") == 0)
        signal(SIGINT, reraise);
    if (strcmp(mode, "ignore") == 0)
        signal(SIGHUP, SIG_IGN);
    size_t most = (size_t)24 << 20;
    unsigned char *src = malloc(most), *back = malloc(most);
    void *dev;
    cudaStream_t s;
    ck(cudaMalloc(&dev, most), "cudaMalloc");
    ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (strcmp(mode, "handler") == 0) {
        struct sigaction act;
        memset(&act, 0, sizeof act);
        act.sa_handler = ask_stop;
        sigemptyset(&act.sa_mask);
        sigaction(SIGTERM, &act, NULL);
    }
    for (unsigned round = 0; !stop; round++) {
        size_t n = ((size_t)rand() % most) + 1;
        unsigned char base = (unsigned char)rand();
        for (size_t i = 0; i < n; i++)
            src[i] = (unsigned char)(base + i * 7u);
        ck(cudaLaunchHostFunc(s, pause_ms, (void *)(size_t)(rand() % 20)), "cudaLaunchHostFunc");
        ck(cudaMemcpyAsync(dev, src, n, cudaMemcpyHostToDevice, s), "H2D");
        memset(src, 0, n); /* the source is the caller's again */
        memset(back, 0xff, n);
        ck(cudaMemcpyAsync(back, dev, n, cudaMemcpyDeviceToHost, s), "D2H");
        ck(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        for (size_t i = 0; i < n; i++)
            if (back[i] != (unsigned char)(base + i * 7u)) {
                fprintf(stderr, "ending_prog: round %u: byte %zu wrong\n", round, i);
                exit(3);
            }
        printf(round == 0 ? "ready\n" : "round %u\n", round);
        fflush(stdout);
        if (strcmp(mode, "fail") == 0 && round == 5) {
            fprintf(stderr, "ending_prog: failing on purpose\n");
            exit(1);
        }
    }
    printf("handled\n");
    cudaStreamDestroy(s);
    cudaFree(dev);
    free(src);
    free(back);
    return 0;
}
