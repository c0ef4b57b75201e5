/* scenario.c - the scenario programs' common code (scenario.h). */
#include "scenario.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SCN_MAX_TESTS 32
#define SCN_MAX_DEVICES 64
#define SCN_STAGE_BYTES (16 * SCN_MIB)

static const char *case_name = "?";
static char test_name[64] = "setup";
static const char *wanted[SCN_MAX_TESTS];
static int nwanted;
static int failures;

/* --- errors ------------------------------------------------------------------------------ */

void scn_ck(cudaError_t err, const char *what, const char *file, int line)
{
    if (err == cudaSuccess)
        return;
    printf("RESULT case=%s test=%s error=%s ok=0\n", case_name, test_name, cudaGetErrorName(err));
    fflush(stdout);
    fprintf(stderr, "scenario %s/%s: %s:%d: %s: %s (%s)\n", case_name, test_name, file, line, what,
            cudaGetErrorName(err), cudaGetErrorString(err));
    exit(1);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "scenario %s: ", case_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* --- the watchdog ------------------------------------------------------------------------ */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    double deadline_ms; /* 0: disarmed */
    char extra[256];
} dog = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *watchdog_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&dog.mu);
    for (;;) {
        double now = scn_now_ms();
        if (dog.deadline_ms > 0 && now >= dog.deadline_ms)
            break;
        double wait_ms = dog.deadline_ms > 0 ? dog.deadline_ms - now : 1000.0;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6 + wait_ms;
        ts.tv_sec = (time_t)(t / 1e3);
        ts.tv_nsec = (long)((t - (double)ts.tv_sec * 1e3) * 1e6);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&dog.cond, &dog.mu, &ts);
    }
    /* The program is stuck: say so on stdout in one write (the stuck thread
     * may hold stdio's lock) and leave without running exit handlers. */
    char line[512];
    int n = snprintf(line, sizeof line, "RESULT case=%s test=%s %s%sdeadlock=1 ok=0\n", case_name, test_name,
                     dog.extra, dog.extra[0] ? " " : "");
    if (n > 0 && write(STDOUT_FILENO, line, (size_t)n) < 0)
        _exit(4);
    static const char msg[] = "scenario: watchdog: the test did not finish in time (deadlock?)\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0)
        _exit(4);
    _exit(3);
    return NULL;
}

static double default_timeout_s(void)
{
    return scn_env_double("TIMEOUT_S", 120.0, 60.0);
}

void scn_test(const char *test, double timeout_s)
{
    if (timeout_s <= 0)
        timeout_s = default_timeout_s();
    pthread_mutex_lock(&dog.mu);
    snprintf(test_name, sizeof test_name, "%s", test);
    dog.extra[0] = '\0';
    dog.deadline_ms = scn_now_ms() + timeout_s * 1e3;
    pthread_cond_signal(&dog.cond);
    pthread_mutex_unlock(&dog.mu);
}

void scn_watchdog_extra(const char *text)
{
    pthread_mutex_lock(&dog.mu);
    snprintf(dog.extra, sizeof dog.extra, "%s", text);
    pthread_mutex_unlock(&dog.mu);
}

void scn_test_end(void)
{
    /* back to the default timeout, for what runs between tests */
    scn_test("between_tests", 0);
}

/* --- start and end --------------------------------------------------------------------------- */

static void add_wanted(char *list)
{
    for (char *tok = strtok(list, ", "); tok != NULL && nwanted < SCN_MAX_TESTS; tok = strtok(NULL, ", "))
        wanted[nwanted++] = tok;
}

void scn_begin(const char *case_id, int argc, char **argv)
{
    case_name = case_id;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++)
        add_wanted(argv[i]);
    const char *env = getenv("SCN_TESTS");
    if (nwanted == 0 && env != NULL && *env != '\0') {
        static char copy[1024];
        snprintf(copy, sizeof copy, "%s", env);
        add_wanted(copy);
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&dog.cond, &attr);
    pthread_condattr_destroy(&attr);
    scn_test("setup", 0);
    pthread_t t;
    if (pthread_create(&t, NULL, watchdog_main, NULL) != 0)
        die("cannot start the watchdog thread");
    pthread_detach(t);
    scn_note("case %s%s", case_id, scn_quick() ? " (SCN_QUICK=1)" : "");
}

bool scn_want(const char *test)
{
    if (nwanted == 0)
        return true;
    for (int i = 0; i < nwanted; i++)
        if (strcmp(wanted[i], test) == 0)
            return true;
    return false;
}

int scn_end(void)
{
    pthread_mutex_lock(&dog.mu);
    dog.deadline_ms = 0;
    pthread_mutex_unlock(&dog.mu);
    fflush(stdout);
    return failures == 0 ? 0 : 1;
}

void scn_result(const char *test, const char *fmt, ...)
{
    char rest[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    size_t len = strlen(rest);
    if (len >= 4 && strcmp(rest + len - 4, "ok=0") == 0)
        failures++;
    printf("RESULT case=%s test=%s %s\n", case_name, test, rest);
    fflush(stdout);
}

void scn_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

/* --- knobs ------------------------------------------------------------------------------------- */

bool scn_quick(void)
{
    const char *q = getenv("SCN_QUICK");
    return q != NULL && strcmp(q, "1") == 0;
}

static const char *knob(const char *name, char *var, size_t var_size)
{
    snprintf(var, var_size, "SCN_%s", name);
    const char *text = getenv(var);
    return text != NULL && *text != '\0' ? text : NULL;
}

size_t scn_env_size(const char *name, size_t def, size_t quick_def)
{
    char var[96];
    const char *text = knob(name, var, sizeof var);
    if (text == NULL)
        return scn_quick() ? quick_def : def;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (end == text || *end != '\0' || errno != 0 || !(v >= 0))
        die("%s=\"%s\": not a size (bytes, with an optional k, m or g)", var, text);
    return (size_t)(v * mult);
}

double scn_env_double(const char *name, double def, double quick_def)
{
    char var[96];
    const char *text = knob(name, var, sizeof var);
    if (text == NULL)
        return scn_quick() ? quick_def : def;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno != 0 || !isfinite(v))
        die("%s=\"%s\": not a number", var, text);
    return v;
}

long scn_env_long(const char *name, long def, long quick_def)
{
    char var[96];
    const char *text = knob(name, var, sizeof var);
    if (text == NULL)
        return scn_quick() ? quick_def : def;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0)
        die("%s=\"%s\": not an integer", var, text);
    return v;
}

/* --- time -------------------------------------------------------------------------------------- */

double scn_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void scn_sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1e3), (long)((ms - floor(ms / 1e3) * 1e3) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

double scn_poll_event(cudaEvent_t ev)
{
    for (;;) {
        cudaError_t err = cudaEventQuery(ev);
        if (err == cudaSuccess)
            return scn_now_ms();
        if (err != cudaErrorNotReady)
            SCN_CK(err);
        scn_sleep_ms(0.05);
    }
}

void scn_poll_events(int n, const cudaEvent_t *evs, double *done_ms)
{
    int left = n;
    for (int i = 0; i < n; i++)
        done_ms[i] = -1;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (done_ms[i] >= 0)
                continue;
            cudaError_t err = cudaEventQuery(evs[i]);
            if (err == cudaSuccess) {
                done_ms[i] = scn_now_ms();
                left--;
            } else if (err != cudaErrorNotReady) {
                SCN_CK(err);
            }
        }
        if (left > 0)
            scn_sleep_ms(0.05);
    }
}

double scn_gbps(size_t bytes, double ms)
{
    return ms > 0 ? (double)bytes / (ms * 1e6) : 0.0;
}

double scn_best_copy_ms(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, int reps)
{
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = scn_now_ms();
        SCN_CK(cudaMemcpyAsync(dst, src, n, kind, s));
        SCN_CK(cudaStreamSynchronize(s));
        double ms = scn_now_ms() - t0;
        if (r > 0 && ms < best)
            best = ms;
    }
    return best;
}

/* --- data ---------------------------------------------------------------------------------------- */

static inline uint64_t mix(uint64_t seed, uint64_t word)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + word * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline unsigned char pattern_byte(uint64_t seed, size_t at)
{
    return (unsigned char)(mix(seed, at / 8) >> (8 * (at % 8)));
}

void scn_fill_at(void *p, size_t n, uint64_t seed, size_t offset)
{
    unsigned char *b = p;
    size_t i = 0;
    for (; i < n && (offset + i) % 8 != 0; i++)
        b[i] = pattern_byte(seed, offset + i);
    for (; i + 8 <= n; i += 8) {
        uint64_t w = mix(seed, (offset + i) / 8); /* little endian: byte k is bits 8k.. */
        memcpy(b + i, &w, 8);
    }
    for (; i < n; i++)
        b[i] = pattern_byte(seed, offset + i);
}

bool scn_verify_at(const void *p, size_t n, uint64_t seed, size_t offset)
{
    const unsigned char *b = p;
    size_t i = 0;
    for (; i < n && (offset + i) % 8 != 0; i++)
        if (b[i] != pattern_byte(seed, offset + i))
            return false;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = mix(seed, (offset + i) / 8), got;
        memcpy(&got, b + i, 8);
        if (got != w)
            return false;
    }
    for (; i < n; i++)
        if (b[i] != pattern_byte(seed, offset + i))
            return false;
    return true;
}

/* One pinned buffer and one non-blocking stream per device, for setup and
 * verification copies; made on first use (pinned allocation synchronizes). */
static struct {
    void *pinned;
    cudaStream_t stream;
} stage[SCN_MAX_DEVICES];

static void stage_get(int device, void **pinned, cudaStream_t *stream)
{
    if (device < 0 || device >= SCN_MAX_DEVICES)
        die("device %d out of range", device);
    int cur;
    SCN_CK(cudaGetDevice(&cur));
    SCN_CK(cudaSetDevice(device));
    if (stage[device].pinned == NULL) {
        SCN_CK(cudaMallocHost(&stage[device].pinned, SCN_STAGE_BYTES));
        SCN_CK(cudaStreamCreateWithFlags(&stage[device].stream, cudaStreamNonBlocking));
    }
    *pinned = stage[device].pinned;
    *stream = stage[device].stream;
}

void scn_device_fill(int device, void *dptr, size_t n, uint64_t seed)
{
    void *pinned;
    cudaStream_t s;
    int cur;
    SCN_CK(cudaGetDevice(&cur));
    stage_get(device, &pinned, &s);
    for (size_t off = 0; off < n; off += SCN_STAGE_BYTES) {
        size_t len = n - off < SCN_STAGE_BYTES ? n - off : SCN_STAGE_BYTES;
        scn_fill_at(pinned, len, seed, off);
        SCN_CK(cudaMemcpyAsync((char *)dptr + off, pinned, len, cudaMemcpyHostToDevice, s));
        SCN_CK(cudaStreamSynchronize(s));
    }
    SCN_CK(cudaSetDevice(cur));
}

bool scn_device_verify(int device, const void *dptr, size_t n, uint64_t seed)
{
    void *pinned;
    cudaStream_t s;
    int cur;
    bool ok = true;
    SCN_CK(cudaGetDevice(&cur));
    stage_get(device, &pinned, &s);
    for (size_t off = 0; off < n && ok; off += SCN_STAGE_BYTES) {
        size_t len = n - off < SCN_STAGE_BYTES ? n - off : SCN_STAGE_BYTES;
        SCN_CK(cudaMemcpyAsync(pinned, (const char *)dptr + off, len, cudaMemcpyDeviceToHost, s));
        SCN_CK(cudaStreamSynchronize(s));
        ok = scn_verify_at(pinned, len, seed, off);
    }
    SCN_CK(cudaSetDevice(cur));
    return ok;
}

int scn_device_count(void)
{
    int n = 0;
    SCN_CK(cudaGetDeviceCount(&n));
    return n;
}

/* --- statistics ---------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double scn_quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}
