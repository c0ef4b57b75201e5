/* log.h - the shim's messages: levels, one destination, bounded output.
 *
 * Lines start with "unstall[pid]: ". Destination: option log (stderr or a
 * path). At most log_max_lines lines are printed; the line that hits the
 * limit says so. Formatting goes into a stack buffer (no malloc) and output
 * is one write(2) per line, so logging is safe from any thread. A thread-local
 * guard drops messages logged while a message is being written. Messages
 * logged while the configuration loads (its warnings) go to stderr at level
 * warn and above. Option verbose lets info messages through whatever
 * log_level says; option disable silences everything. A log file is opened
 * non-blocking (a FIFO without a reader: one warning, then stderr) and a line
 * that would block is dropped and counted, never waited for (the report at
 * exit waits up to half a second); SIGPIPE is held back around writes to a
 * pipe. */
#ifndef UNSTALL_LOG_H
#define UNSTALL_LOG_H

#include <stdarg.h>
#include <stdbool.h>

/* The order is option log_level's choices in options.def. */
enum us_log_level { US_LOG_ERROR, US_LOG_WARN, US_LOG_INFO, US_LOG_DEBUG };

/* What the log needs to know at each line. The log does not read the
 * configuration: its owner, config.c, provides us_log_settings(), which loads
 * the configuration on first use as us_config() does. It returns false, *out
 * untouched, on the thread that is loading the configuration: a warning of the
 * load cannot wait for the load it is part of, and goes to stderr at level
 * warn and above. */
struct us_log_settings {
    enum us_log_level level;  /* the threshold, option verbose applied */
    bool disable;             /* option disable: say nothing */
    unsigned long max_lines;  /* option log_max_lines; 0: no bound */
    const char *destination;  /* option log: "stderr", "" or a path template */
    const char *rank, *host;  /* for %r and %h in the destination (NULL rank: none) */
};
bool us_log_settings(struct us_log_settings *out);

void us_log(enum us_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void us_vlog(enum us_log_level level, const char *fmt, va_list ap);

/* Log once per process for a given flag (a static int the caller owns). */
#define us_log_once(flag, level, ...)                                                    \
    do {                                                                                  \
        if (__atomic_exchange_n((flag), 1, __ATOMIC_RELAXED) == 0)                       \
            us_log((level), __VA_ARGS__);                                                 \
    } while (0)

/* Write unlimited, unprefixed text (the report at exit). It does not count
 * toward log_max_lines. A sink gets it unchanged, at level US_LOG_INFO. */
void us_log_raw(const char *text);

/* At exit, after the report: if lines were dropped because the destination
 * would have blocked (a full pipe) or lost its reader, say how many, on the
 * destination or else on stderr. Never blocks. */
void us_log_at_exit(void);

/* Tests: capture every line (prefixed, without its newline) into a callback
 * instead of the destination; NULL restores the destination. Either way the
 * log starts afresh: the line count restarts and the destination is opened
 * again from the configuration at the next line. */
typedef void (*us_log_sink)(enum us_log_level level, const char *line, void *arg);
void us_log_set_sink(us_log_sink sink, void *arg);

/* Expand a path template: %p the pid, %r rank_text (us_config_rank; NULL:
 * "norank"), %h host_text (us_config_host), %% a '%'; anything else as
 * written. Returns false, out "", if it does not fit. */
#define US_PATH_NO_RANK "norank"
bool us_expand_path(const char *templ, const char *rank_text, const char *host_text, char *out,
                    unsigned out_size);

#endif
