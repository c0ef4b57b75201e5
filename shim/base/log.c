/* log.c - the shim's messages (see log.h).
 *
 * The log runs inside intercepted CUDA calls on any thread, so it takes no
 * lock on the way of a line (one only to open the destination, once), formats
 * into a stack buffer, never calls malloc, and writes each line with one
 * write(2). The line limit is a single atomic counter: lines past it are
 * dropped without being formatted.
 *
 * A log file the shim opens itself is opened non-blocking, so that neither
 * the open (a FIFO without a reader) nor a write (a full pipe) can hold the
 * program, inside a CUDA call or at exit: what would block is dropped and
 * counted, and the count is said once the log can speak again (or at exit,
 * on stderr). A write to a pipe or socket whose reader has gone blocks
 * SIGPIPE around it, so the shim's line never kills the program. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define US_LOG_LINE_MAX 1024 /* one line: prefix, message, "..." and newline */
#define US_LOG_PATH_MAX 4096
#define US_LOG_UNRESOLVED (-1)
#define US_LOG_EXIT_WAIT_MS 500 /* the report at exit waits at most this for a slow reader */

/* Lines counted toward log_max_lines, the limit line included. */
static atomic_ulong us_log_lines;
/* The destination's fd, opened at the first line after the load. */
static atomic_int us_log_fd = US_LOG_UNRESOLVED;
static pthread_mutex_t us_log_open_lock = PTHREAD_MUTEX_INITIALIZER;
/* The destination is a pipe or socket: a write can raise SIGPIPE. */
static atomic_bool us_log_fd_is_pipe;
/* Lines dropped because the destination would have blocked or has no reader,
 * not yet said. */
static atomic_ulong us_log_dropped;
static us_log_sink _Atomic us_log_sink_fn;
static void *_Atomic us_log_sink_arg;
/* Set while this thread writes a line: a message logged from inside (a sink
 * that logs, a hook reached from write) is dropped instead of recursing. */
static _Thread_local bool us_log_busy;

static const char *us_level_word(enum us_log_level level)
{
    switch (level) {
    case US_LOG_ERROR: return "error: ";
    case US_LOG_WARN: return "warning: ";
    default: return "";
    }
}

/* write(2), with SIGPIPE held back where the destination is a pipe: a
 * reader that went away gives EPIPE, not the death of the program. A SIGPIPE
 * that was pending before is left pending; ours is taken off. */
static ssize_t us_write_once(int fd, const char *text, size_t len)
{
    if (!atomic_load_explicit(&us_log_fd_is_pipe, memory_order_relaxed) && fd != STDERR_FILENO)
        return write(fd, text, len);
    sigset_t pipe_only, old, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    ssize_t n = write(fd, text, len);
    int err = errno;
    if (n < 0 && err == EPIPE && !was_pending) {
        const struct timespec none = { 0, 0 };
        while (sigtimedwait(&pipe_only, NULL, &none) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return n;
}

static unsigned long us_count_lines(const char *text, size_t len)
{
    unsigned long lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    return lines > 0 ? lines : 1;
}

/* All of text, or what fits without blocking: the rest is counted as
 * dropped. wait_ms: how long a full pipe may be waited for (0 inside the
 * program's calls; a little for the report at exit). True if all went. */
static bool us_write_all(int fd, const char *text, size_t len, int wait_ms)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (len > 0) {
        ssize_t n = us_write_once(fd, text, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_ms > 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            long spent = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
            struct pollfd p = { .fd = fd, .events = POLLOUT };
            if (spent < wait_ms && poll(&p, 1, (int)(wait_ms - spent)) > 0)
                continue;
        }
        if (n <= 0) {
            /* would block, no reader, or failing: nowhere to say so now */
            atomic_fetch_add_explicit(&us_log_dropped, us_count_lines(text, len), memory_order_relaxed);
            return false;
        }
        text += n;
        len -= (size_t)n;
    }
    return true;
}

/* "unstall[pid]: <message>\n" into line, the level word after the prefix for
 * warnings and errors. The pid is asked each time: a forked child has its own.
 * A message that does not fit ends with "...". Returns the length, newline
 * included. */
static size_t us_format_line(char line[US_LOG_LINE_MAX], enum us_log_level level, const char *fmt,
                             va_list ap)
{
    int p = snprintf(line, US_LOG_LINE_MAX, "unstall[%ld]: %s", (long)getpid(), us_level_word(level));
    size_t n = p > 0 ? (size_t)p : 0;          /* the prefix is short: it always fits */
    size_t room = US_LOG_LINE_MAX - 1 - n;     /* one byte kept for the newline */
    int m = vsnprintf(line + n, room, fmt, ap);
    size_t len;
    if (m < 0) {
        len = n;
    } else if ((size_t)m >= room) {
        len = US_LOG_LINE_MAX - 2;
        memcpy(line + len - 3, "...", 3);
    } else {
        len = n + (size_t)m;
        if (len > n && line[len - 1] == '\n')
            len--; /* a caller's own newline would leave a blank line */
    }
    line[len++] = '\n';
    line[len] = '\0';
    return len;
}

static size_t us_format(char line[US_LOG_LINE_MAX], enum us_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static size_t us_format(char line[US_LOG_LINE_MAX], enum us_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t len = us_format_line(line, level, fmt, ap);
    va_end(ap);
    return len;
}

/* Open the configured destination, or say why not and use stderr. Called with
 * us_log_open_lock held, once per process (or per us_log_set_sink). */
static bool us_is_pipe(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

static int us_open_destination(const struct us_log_settings *cfg)
{
    if (cfg->destination[0] == '\0' || strcasecmp(cfg->destination, "stderr") == 0)
        return STDERR_FILENO;
    char path[US_LOG_PATH_MAX];
    const char *why;
    int fd = -1;
    if (!us_expand_path(cfg->destination, cfg->rank, cfg->host, path, sizeof path))
        why = "the expanded path is too long";
    else if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644)) < 0)
        why = errno == ENXIO ? "a FIFO with no reader" : strerror(errno);
    if (fd >= 0) {
        /* kept non-blocking: a write that would block is dropped, not waited for */
        atomic_store(&us_log_fd_is_pipe, us_is_pipe(fd));
        return fd;
    }
    char line[US_LOG_LINE_MAX];
    size_t len = us_format(line, US_LOG_WARN, "cannot open log file \"%s\" (%s); logging to stderr",
                           cfg->destination, why);
    us_write_all(STDERR_FILENO, line, len, 0);
    return STDERR_FILENO;
}

/* Say how many lines were dropped, if any, before the next line goes. */
static void us_say_dropped(int fd, int wait_ms)
{
    unsigned long dropped = atomic_exchange_explicit(&us_log_dropped, 0, memory_order_relaxed);
    if (dropped == 0)
        return;
    char line[US_LOG_LINE_MAX];
    size_t len = us_format(line, US_LOG_WARN, "%lu log line%s dropped: the log destination would have blocked "
                           "or has no reader", dropped, dropped == 1 ? "" : "s");
    if (!us_write_all(fd, line, len, wait_ms)) {
        /* this line did not go either: the count stays for the next try */
        atomic_fetch_add_explicit(&us_log_dropped, dropped, memory_order_relaxed);
        atomic_fetch_sub_explicit(&us_log_dropped, 1, memory_order_relaxed);
    }
}

/* Write a formatted line or text to the destination, the pending note first. */
static void us_emit(int fd, const char *text, size_t len, int wait_ms)
{
    if (atomic_load_explicit(&us_log_dropped, memory_order_relaxed) != 0)
        us_say_dropped(fd, wait_ms);
    us_write_all(fd, text, len, wait_ms);
}

static int us_destination(const struct us_log_settings *cfg)
{
    int fd = atomic_load_explicit(&us_log_fd, memory_order_acquire);
    if (fd != US_LOG_UNRESOLVED)
        return fd;
    pthread_mutex_lock(&us_log_open_lock);
    fd = atomic_load_explicit(&us_log_fd, memory_order_relaxed);
    if (fd == US_LOG_UNRESOLVED) {
        fd = us_open_destination(cfg);
        atomic_store_explicit(&us_log_fd, fd, memory_order_release);
    }
    pthread_mutex_unlock(&us_log_open_lock);
    return fd;
}

static us_log_sink us_current_sink(void **arg)
{
    us_log_sink sink = atomic_load_explicit(&us_log_sink_fn, memory_order_acquire);
    *arg = atomic_load_explicit(&us_log_sink_arg, memory_order_relaxed);
    return sink;
}

/* stderr while the configuration loads (cfg NULL), else the destination */
static int us_fd(const struct us_log_settings *cfg)
{
    return cfg == NULL ? STDERR_FILENO : us_destination(cfg);
}

/* The configuration decides level, limit and destination; but a warning from
 * its own load cannot wait for that load: NULL then (stderr, warn and above). */
static const struct us_log_settings *us_log_config(struct us_log_settings *settings)
{
    return us_log_settings(settings) ? settings : NULL;
}

void us_vlog(enum us_log_level level, const char *fmt, va_list ap)
{
    if (us_log_busy)
        return;
    /* before the guard is set, so that a load started here can warn */
    struct us_log_settings settings;
    const struct us_log_settings *cfg = us_log_config(&settings);
    enum us_log_level threshold = cfg == NULL ? US_LOG_WARN : cfg->level;
    if (level > threshold || (cfg != NULL && cfg->disable))
        return;

    /* The limit applies once it is known; lines during the load still count. */
    unsigned long max = cfg == NULL ? 0 : cfg->max_lines;
    if (max != 0 && atomic_load_explicit(&us_log_lines, memory_order_relaxed) > max)
        return; /* past the limit: stop counting too, so the counter never wraps */
    unsigned long number = atomic_fetch_add_explicit(&us_log_lines, 1, memory_order_relaxed) + 1;
    if (max != 0 && number > max + 1)
        return;

    us_log_busy = true;
    char line[US_LOG_LINE_MAX];
    size_t len;
    if (max != 0 && number == max + 1) {
        /* no level word: the log speaks about itself */
        len = us_format(line, US_LOG_INFO,
                        "log limit of %lu lines reached; further messages dropped (option log_max_lines)", max);
        level = US_LOG_WARN;
    } else {
        len = us_format_line(line, level, fmt, ap);
    }
    void *arg;
    us_log_sink sink = us_current_sink(&arg);
    if (sink != NULL) {
        line[len - 1] = '\0'; /* the sink gets the line without its newline */
        sink(level, line, arg);
    } else {
        us_emit(us_fd(cfg), line, len, 0);
    }
    us_log_busy = false;
}

void us_log(enum us_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    us_vlog(level, fmt, ap);
    va_end(ap);
}

void us_log_raw(const char *text)
{
    if (us_log_busy || text == NULL)
        return;
    struct us_log_settings settings;
    const struct us_log_settings *cfg = us_log_config(&settings);
    if (cfg != NULL && cfg->disable)
        return;
    us_log_busy = true;
    void *arg;
    us_log_sink sink = us_current_sink(&arg);
    if (sink != NULL)
        sink(US_LOG_INFO, text, arg);
    else
        us_emit(us_fd(cfg), text, strlen(text), US_LOG_EXIT_WAIT_MS);
    us_log_busy = false;
}

void us_log_at_exit(void)
{
    if (us_log_busy || atomic_load_explicit(&us_log_dropped, memory_order_relaxed) == 0)
        return;
    us_log_busy = true;
    int fd = atomic_load_explicit(&us_log_fd, memory_order_acquire);
    if (fd != US_LOG_UNRESOLVED && fd != STDERR_FILENO)
        us_say_dropped(fd, 0);
    us_say_dropped(STDERR_FILENO, 0); /* the destination could not take it: the program's stderr */
    us_log_busy = false;
}

void us_log_set_sink(us_log_sink sink, void *arg)
{
    pthread_mutex_lock(&us_log_open_lock);
    atomic_store_explicit(&us_log_sink_arg, arg, memory_order_relaxed);
    atomic_store_explicit(&us_log_sink_fn, sink, memory_order_release);
    int fd = atomic_exchange(&us_log_fd, US_LOG_UNRESOLVED);
    if (fd > STDERR_FILENO)
        close(fd);
    atomic_store(&us_log_lines, 0);
    atomic_store(&us_log_dropped, 0);
    atomic_store(&us_log_fd_is_pipe, false);
    pthread_mutex_unlock(&us_log_open_lock);
}

bool us_expand_path(const char *templ, const char *rank_text, const char *host_text, char *out,
                    unsigned out_size)
{
    if (templ == NULL || out == NULL || out_size == 0)
        return false;
    char pid_text[24];
    snprintf(pid_text, sizeof pid_text, "%ld", (long)getpid());
    /* a process without a rank (a launcher's own) must never take a rank's
     * file: "norank" is no number, so no rank's %r expands to it */
    if (rank_text == NULL)
        rank_text = US_PATH_NO_RANK;
    if (host_text == NULL)
        host_text = "unknown-host";
    size_t o = 0;
    for (const char *t = templ; *t != '\0'; t++) {
        char single[2] = { *t, '\0' };
        const char *piece = single; /* as written, a lone '%' included */
        if (t[0] == '%' && (t[1] == 'p' || t[1] == 'r' || t[1] == 'h' || t[1] == '%')) {
            piece = t[1] == 'p' ? pid_text : t[1] == 'r' ? rank_text : t[1] == 'h' ? host_text : "%";
            t++;
        }
        size_t len = strlen(piece);
        if (o + len >= out_size) {
            out[0] = '\0';
            return false;
        }
        memcpy(out + o, piece, len);
        o += len;
    }
    out[o] = '\0';
    return true;
}
