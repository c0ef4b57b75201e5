/* test_log.c - the log: prefix and level words, level filter, line limit,
 * truncation, recursion guard, destination file and its fallback, paths. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "summary.h"

#include "config.h"
#include "log.h"

/* --- captured lines ----------------------------------------------------------------- */

#define MAX_LINES 64
static char lines[MAX_LINES][1100];
static enum us_log_level levels[MAX_LINES];
static int line_count;

static void capture(enum us_log_level level, const char *line, void *arg)
{
    (void)arg;
    if (line_count < MAX_LINES) {
        snprintf(lines[line_count], sizeof lines[0], "%s", line);
        levels[line_count] = level;
    }
    line_count++;
}

static struct us_config defaults;
static struct us_config cfg; /* what a test sets, through use_config() */

static void use_config(void) { us_config_set(&cfg); }

static int setup(void **state)
{
    (void)state;
    us_config_load(&defaults, NULL, NULL, NULL, NULL);
    cfg = defaults;
    use_config();
    line_count = 0;
    us_log_set_sink(capture, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    us_config_set(&defaults);
    us_log_set_sink(NULL, NULL);
    return 0;
}

/* "unstall[<pid>]: " + rest */
static void assert_line(int i, const char *rest)
{
    char expected[1200];
    snprintf(expected, sizeof expected, "unstall[%ld]: %s", (long)getpid(), rest);
    assert_true(i < line_count);
    assert_string_equal(lines[i], expected);
}

/* --- prefix, levels ------------------------------------------------------------------- */

static void test_log_prefix_and_level_words(void **state)
{
    (void)state;
    cfg.log_level = US_LOG_DEBUG;
    use_config();
    us_log(US_LOG_ERROR, "bad %s", "thing");
    us_log(US_LOG_WARN, "odd %d", 42);
    us_log(US_LOG_INFO, "fyi");
    us_log(US_LOG_DEBUG, "detail");
    assert_int_equal(line_count, 4);
    assert_line(0, "error: bad thing");
    assert_line(1, "warning: odd 42");
    assert_line(2, "fyi");
    assert_line(3, "detail");
    assert_int_equal(levels[0], US_LOG_ERROR);
    assert_int_equal(levels[1], US_LOG_WARN);
    assert_int_equal(levels[2], US_LOG_INFO);
    assert_int_equal(levels[3], US_LOG_DEBUG);
}

static void log_all_levels(void)
{
    us_log(US_LOG_ERROR, "e");
    us_log(US_LOG_WARN, "w");
    us_log(US_LOG_INFO, "i");
    us_log(US_LOG_DEBUG, "d");
}

static void test_log_level_filter(void **state)
{
    (void)state;
    log_all_levels(); /* default: warn */
    assert_int_equal(line_count, 2);
    assert_line(0, "error: e");
    assert_line(1, "warning: w");

    line_count = 0;
    cfg.log_level = US_LOG_ERROR;
    use_config();
    log_all_levels();
    assert_int_equal(line_count, 1);
    assert_line(0, "error: e");

    line_count = 0;
    cfg.log_level = US_LOG_INFO;
    use_config();
    log_all_levels();
    assert_int_equal(line_count, 3);
    assert_line(2, "i");
}

/* verbose lets info through whatever log_level says, not debug */
static void test_log_verbose_shows_info(void **state)
{
    (void)state;
    cfg.log_level = US_LOG_ERROR;
    cfg.verbose = true;
    use_config();
    log_all_levels();
    assert_int_equal(line_count, 3);
    assert_line(0, "error: e");
    assert_line(1, "warning: w");
    assert_line(2, "i");
}

static void test_log_disable_silences(void **state)
{
    (void)state;
    cfg.disable = true;
    use_config();
    log_all_levels();
    us_log_raw("report\n");
    assert_int_equal(line_count, 0);
}

/* --- the line limit --------------------------------------------------------------------- */

static void test_log_limit_then_nothing(void **state)
{
    (void)state;
    cfg.log_max_lines = 3;
    use_config();
    for (int i = 0; i < 10; i++) {
        us_log(US_LOG_WARN, "line %d", i);
        us_log(US_LOG_DEBUG, "filtered lines do not count");
    }
    assert_int_equal(line_count, 4);
    assert_line(0, "warning: line 0");
    assert_line(2, "warning: line 2");
    assert_line(3, "log limit of 3 lines reached; further messages dropped (option log_max_lines)");
    assert_int_equal(levels[3], US_LOG_WARN);
    us_log(US_LOG_ERROR, "still nothing");
    assert_int_equal(line_count, 4);
    /* the report is not a log line: unbounded */
    us_log_raw("report text\n");
    assert_int_equal(line_count, 5);
    assert_string_equal(lines[4], "report text\n");
    assert_int_equal(levels[4], US_LOG_INFO);
}

static void test_log_limit_zero_is_unlimited(void **state)
{
    (void)state;
    cfg.log_max_lines = 0;
    use_config();
    for (int i = 0; i < 2500; i++)
        us_log(US_LOG_WARN, "line %d", i);
    assert_int_equal(line_count, 2500);
}

/* Setting a sink starts the count afresh (tests depend on it). */
static void test_log_set_sink_restarts_count(void **state)
{
    (void)state;
    cfg.log_max_lines = 1;
    use_config();
    us_log(US_LOG_WARN, "a");
    us_log(US_LOG_WARN, "b");
    us_log(US_LOG_WARN, "c");
    assert_int_equal(line_count, 2);
    us_log_set_sink(capture, NULL);
    us_log(US_LOG_WARN, "d");
    assert_int_equal(line_count, 3);
    assert_line(2, "warning: d");
}

static atomic_int threaded_lines, threaded_limit_lines;

static void count_sink(enum us_log_level level, const char *line, void *arg)
{
    (void)level;
    (void)arg;
    atomic_fetch_add(&threaded_lines, 1);
    if (strstr(line, "log limit of 100 lines reached") != NULL)
        atomic_fetch_add(&threaded_limit_lines, 1);
}

static void *log_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 500; i++)
        us_log(US_LOG_WARN, "from a thread %d", i);
    return NULL;
}

/* The limit holds across threads: exactly max lines and one limit line. */
static void test_log_limit_across_threads(void **state)
{
    (void)state;
    cfg.log_max_lines = 100;
    use_config();
    us_log_set_sink(count_sink, NULL);
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, log_many, NULL), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&threaded_lines), 101);
    assert_int_equal(atomic_load(&threaded_limit_lines), 1);
}

/* --- one line ------------------------------------------------------------------------------ */

static void test_log_long_message_truncated(void **state)
{
    (void)state;
    static char big[3000];
    memset(big, 'x', sizeof big - 1);
    us_log(US_LOG_WARN, "%s", big);
    assert_int_equal(line_count, 1);
    size_t len = strlen(lines[0]);
    assert_int_equal(len, 1022); /* 1024-byte buffer: newline and terminator */
    assert_memory_equal(lines[0] + len - 4, "x...", 4);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "unstall[%ld]: warning: xxx", (long)getpid());
    assert_memory_equal(lines[0], prefix, strlen(prefix));
}

static void test_log_trailing_newline_dropped(void **state)
{
    (void)state;
    us_log(US_LOG_WARN, "ends with a newline\n");
    assert_int_equal(line_count, 1);
    assert_line(0, "warning: ends with a newline");
}

static void logging_sink(enum us_log_level level, const char *line, void *arg)
{
    capture(level, line, arg);
    us_log(US_LOG_ERROR, "from inside the sink"); /* must be dropped, not recurse */
}

static void test_log_recursion_dropped(void **state)
{
    (void)state;
    us_log_set_sink(logging_sink, NULL);
    us_log(US_LOG_WARN, "outer");
    us_log(US_LOG_WARN, "second");
    assert_int_equal(line_count, 2);
    assert_line(0, "warning: outer");
    assert_line(1, "warning: second");
}

static void test_log_once(void **state)
{
    (void)state;
    static int flag;
    for (int i = 0; i < 3; i++)
        us_log_once(&flag, US_LOG_WARN, "once %d", i);
    assert_int_equal(line_count, 1);
    assert_line(0, "warning: once 0");
}

/* --- destination ------------------------------------------------------------------------------ */

static size_t read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    return (size_t)n;
}

static void test_log_to_file(void **state)
{
    (void)state;
    char path[128], log_templ[128];
    snprintf(log_templ, sizeof log_templ, "/tmp/test_log.%%p.%%r.log");
    snprintf(path, sizeof path, "/tmp/test_log.%ld.%s.log", (long)getpid(),
             us_config_rank() != NULL ? us_config_rank() : "norank");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "earlier\n", 8), 8);
    close(fd);

    snprintf(cfg.log, sizeof cfg.log, "%s", log_templ);
    use_config();
    us_log_set_sink(NULL, NULL); /* to the destination, opened afresh */
    us_log(US_LOG_WARN, "first");
    us_log(US_LOG_INFO, "filtered");
    us_log(US_LOG_ERROR, "second");
    us_log_raw("raw text\n");
    us_log_set_sink(NULL, NULL); /* closes it */

    char text[1024], expected[1024];
    read_file(path, text, sizeof text);
    unlink(path);
    long pid = (long)getpid();
    snprintf(expected, sizeof expected,
             "earlier\nunstall[%ld]: warning: first\nunstall[%ld]: error: second\nraw text\n", pid, pid);
    assert_string_equal(text, expected); /* appended, one line each */
}

/* A destination that cannot be opened: one warning, then stderr. */
static void test_log_unopenable_falls_back_to_stderr(void **state)
{
    (void)state;
    char err_path[64];
    snprintf(err_path, sizeof err_path, "/tmp/test_log.%ld.stderr", (long)getpid());
    int err_fd = open(err_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    assert_true(err_fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(err_fd, STDERR_FILENO);

    snprintf(cfg.log, sizeof cfg.log, "/nonexistent-dir/unstall.log");
    use_config();
    us_log_set_sink(NULL, NULL);
    us_log(US_LOG_WARN, "one");
    us_log(US_LOG_WARN, "two");

    dup2(saved, STDERR_FILENO);
    close(saved);
    close(err_fd);
    char text[2048], expected[2048];
    read_file(err_path, text, sizeof text);
    unlink(err_path);
    long pid = (long)getpid();
    snprintf(expected, sizeof expected,
             "unstall[%ld]: warning: cannot open log file \"/nonexistent-dir/unstall.log\" (No such file or "
             "directory); logging to stderr\nunstall[%ld]: warning: one\nunstall[%ld]: warning: two\n",
             pid, pid, pid);
    assert_string_equal(text, expected);
}

/* --- FIFOs: nothing blocks, nothing kills ---------------------------------------------- */

/* stderr into a file while body runs; its text into out */
static void with_stderr_captured(void (*body)(const char *fifo), const char *fifo, char *out, size_t size)
{
    char err_path[64];
    snprintf(err_path, sizeof err_path, "/tmp/test_log.%ld.stderr", (long)getpid());
    int err_fd = open(err_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    assert_true(err_fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(err_fd, STDERR_FILENO);
    alarm(20); /* a blocked open or write fails the test instead of hanging it */
    body(fifo);
    alarm(0);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(err_fd);
    read_file(err_path, out, size);
    unlink(err_path);
}

static void make_fifo(char *path, size_t size)
{
    snprintf(path, size, "/tmp/test_log.%ld.fifo", (long)getpid());
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
}

static void log_to(const char *path)
{
    snprintf(cfg.log, sizeof cfg.log, "%s", path);
    use_config();
    us_log_set_sink(NULL, NULL);
}

static void log_two_lines(const char *fifo)
{
    log_to(fifo);
    us_log(US_LOG_WARN, "one");
    us_log(US_LOG_WARN, "two");
    us_log_set_sink(NULL, NULL);
}

static void test_log_fifo_without_reader(void **state)
{
    (void)state;
    char fifo[64], text[2048], expected[2048];
    make_fifo(fifo, sizeof fifo);
    with_stderr_captured(log_two_lines, fifo, text, sizeof text);
    unlink(fifo);
    long pid = (long)getpid();
    snprintf(expected, sizeof expected,
             "unstall[%ld]: warning: cannot open log file \"%s\" (a FIFO with no reader); logging to stderr\n"
             "unstall[%ld]: warning: one\nunstall[%ld]: warning: two\n", pid, fifo, pid, pid);
    assert_string_equal(text, expected);
}

static int fifo_reader = -1;

static void log_into_full_pipe(const char *fifo)
{
    log_to(fifo);
    us_log(US_LOG_WARN, "lost 1");
    us_log(US_LOG_WARN, "lost 2");
    us_log_raw("lost report\nof two lines\n");
    char drain[65536];
    while (read(fifo_reader, drain, sizeof drain) > 0)
        ;
    us_log(US_LOG_WARN, "after");
    us_log_set_sink(NULL, NULL);
}

static void test_log_full_pipe_drops_and_counts(void **state)
{
    (void)state;
    char fifo[64], text[2048], expected[2048];
    make_fifo(fifo, sizeof fifo);
    fifo_reader = open(fifo, O_RDONLY | O_NONBLOCK);
    assert_true(fifo_reader >= 0);
    int filler = open(fifo, O_WRONLY | O_NONBLOCK);
    assert_true(filler >= 0);
    char block[4096];
    memset(block, 'x', sizeof block);
    while (write(filler, block, sizeof block) > 0)
        ;
    close(filler);
    with_stderr_captured(log_into_full_pipe, fifo, text, sizeof text);
    assert_string_equal(text, "");
    ssize_t n = read(fifo_reader, text, sizeof text - 1);
    assert_true(n > 0);
    text[n] = '\0';
    close(fifo_reader);
    unlink(fifo);
    long pid = (long)getpid();
    snprintf(expected, sizeof expected,
             "unstall[%ld]: warning: 4 log lines dropped: the log destination would have blocked or has no reader\n"
             "unstall[%ld]: warning: after\n", pid, pid);
    assert_string_equal(text, expected);
}

static void log_after_reader_left(const char *fifo)
{
    log_to(fifo);
    us_log(US_LOG_WARN, "read");
    close(fifo_reader);
    us_log(US_LOG_WARN, "nobody reads this"); /* EPIPE: SIGPIPE would end this test */
    us_log_at_exit();
    us_log_set_sink(NULL, NULL);
}

static void test_log_reader_gone_no_sigpipe(void **state)
{
    (void)state;
    char fifo[64], text[2048], expected[2048];
    make_fifo(fifo, sizeof fifo);
    fifo_reader = open(fifo, O_RDONLY | O_NONBLOCK);
    assert_true(fifo_reader >= 0);
    with_stderr_captured(log_after_reader_left, fifo, text, sizeof text);
    unlink(fifo);
    sigset_t pending;
    sigpending(&pending);
    assert_false(sigismember(&pending, SIGPIPE));
    snprintf(expected, sizeof expected,
             "unstall[%ld]: warning: 1 log line dropped: the log destination would have blocked or has no reader\n",
             (long)getpid());
    assert_string_equal(text, expected);
}

/* --- paths -------------------------------------------------------------------------------------- */

static void test_log_expand_path(void **state)
{
    (void)state;
    char out[128], expected[128];
    long pid = (long)getpid();

    assert_true(us_expand_path("unstall-%p-%r.json", "3", "node1", out, sizeof out));
    snprintf(expected, sizeof expected, "unstall-%ld-3.json", pid);
    assert_string_equal(out, expected);

    /* no rank: never a rank's name (torchrun's own process once took rank 0's) */
    assert_true(us_expand_path("/tmp/%r/%p/%p", NULL, "node1", out, sizeof out));
    snprintf(expected, sizeof expected, "/tmp/norank/%ld/%ld", pid, pid);
    assert_string_equal(out, expected);

    /* %h: the host */
    assert_true(us_expand_path("/nfs/%h-%r.json", "12", "gpu-node-07", out, sizeof out));
    assert_string_equal(out, "/nfs/gpu-node-07-12.json");

    assert_true(us_expand_path("100%% %x %", "1", "h", out, sizeof out));
    assert_string_equal(out, "100% %x %"); /* %% is %, anything else as written */

    assert_true(us_expand_path("", "1", "h", out, sizeof out));
    assert_string_equal(out, "");

    assert_true(us_expand_path("abc", NULL, "h", out, 4)); /* exactly fits */
    assert_string_equal(out, "abc");
    assert_false(us_expand_path("abcd", NULL, "h", out, 4));
    assert_string_equal(out, "");
    assert_false(us_expand_path("r%r", "12345", "h", out, 6));
    assert_false(us_expand_path("%h", "1", "host", out, 4));
    assert_false(us_expand_path(NULL, NULL, "h", out, sizeof out));
    assert_false(us_expand_path("x", NULL, "h", out, 0));
}

static void clear_unstall_environment(void)
{
    for (;;) {
        char name[256] = "";
        for (char **e = environ; *e != NULL; e++) {
            const char *eq = strchr(*e, '=');
            if (strncmp(*e, "UNSTALL_", 8) == 0 && eq != NULL && (size_t)(eq - *e) < sizeof name) {
                snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
                break;
            }
        }
        if (name[0] == '\0')
            return;
        unsetenv(name);
    }
}

int main(void)
{
    clear_unstall_environment();
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_log_prefix_and_level_words),
        T(test_log_level_filter),
        T(test_log_verbose_shows_info),
        T(test_log_disable_silences),
        T(test_log_limit_then_nothing),
        T(test_log_limit_zero_is_unlimited),
        T(test_log_set_sink_restarts_count),
        T(test_log_limit_across_threads),
        T(test_log_fifo_without_reader),
        T(test_log_full_pipe_drops_and_counts),
        T(test_log_reader_gone_no_sigpipe),
        T(test_log_long_message_truncated),
        T(test_log_trailing_newline_dropped),
        T(test_log_recursion_dropped),
        T(test_log_once),
        T(test_log_to_file),
        T(test_log_unopenable_falls_back_to_stderr),
        T(test_log_expand_path),
    };
#undef T
    return US_RUN_TESTS("test_log", tests, NULL, NULL);
}
