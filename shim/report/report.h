/* report.h - the report at exit, as text (for the log) and as JSON (option
 * report), rendered from a snapshot of the findings (findings_collect.c collects it).
 *
 * Rendering is pure: it reads the snapshot, symbolizes the sites (callsite.h)
 * and returns malloc'd text; it calls no CUDA function. The JSON schema is
 * documented in docs/findings.md and read by tools/unstall-report. */
#ifndef UNSTALL_REPORT_H
#define UNSTALL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "callsite.h"
#include "copy.h"
#include "cuda_use.h"
#include "rules.h"

#define US_REPORT_VERSION 1

/* One (rule, call site), aggregated. */
struct us_report_row {
    uint32_t id;          /* creation order; events name their row by it */
    enum us_rule_id rule;
    const char *api;      /* of the first finding at the site */
    bool other;           /* the row of sites past the site cap, per rule */
    bool unlocated;       /* the row of short waits counted without a site, per (rule, api) */
    uint64_t count, bytes, total_ns, max_ns;
    uint64_t fixed, observed; /* findings the shim rewrote / only saw */
    uint64_t forbidden;   /* calls strict mode failed (not counted above) */
    uint64_t first_ns, last_ns; /* us_now_ns() of the first and last finding */
    unsigned stream_kinds; /* bit (1 << enum us_stream_kind) per kind seen */
    uint64_t devices;     /* bit per device id 0..63 seen */
    struct us_site site;
};

/* One finding, for the timeline. */
struct us_report_event {
    uint32_t row;         /* in a snapshot: index into rows; while recording: row id */
    enum us_rule_id rule;
    bool fixed;
    enum us_stream_kind stream_kind;
    int tid;
    int src_device, dst_device;
    uintptr_t stream;
    uintptr_t context; /* the issuing context where the rule depends on it, else 0 */
    uint64_t start_ns, held_ns, bytes;
};

/* One pipeline span (us_findings_span). */
struct us_report_span {
    const char *name;     /* a string that lives as long as the process (us_findings_span) */
    int device;
    int tid;
    uint64_t start_ns, end_ns, bytes;
};

/* How the process's report came to be written (docs/findings.md, "how a
 * process ended"). */
enum us_report_end_how {
    US_REPORT_END_EXIT,     /* the process exited (the report at exit) */
    US_REPORT_END_SIGNAL,   /* a termination signal ended it (endings.h) */
    US_REPORT_END_SNAPSHOT, /* it was running: a snapshot (option report_interval_s) */
};

struct us_report {
    long pid;
    enum us_report_end_how end;
    int end_signal;       /* US_REPORT_END_SIGNAL: the signal */
    char program[64];     /* /proc/self/comm */
    char cmdline[256];    /* the command line, arguments joined, shortened */
    char rank[16];        /* "" when no rank variable is set (us_config_rank) */
    const char *rank_source; /* the variable it came from, NULL without a rank */
    char host[64];        /* us_config_host() */
    const char *mode;     /* "report", "warn", "strict" */
    bool hooked;          /* any CUDA runtime call reached the shim */
    struct us_cuda_use_info cuda; /* how CUDA was used, when not hooked */
    bool driver_layer;    /* a call was handled at the driver layer (shim/entry_driver) */
    unsigned long long legacy_moved; /* calls legacy_stream moved off the legacy stream */
    const char *legacy_stream;       /* the option's choice ("keep", "ordered", "per_thread") */
    uint64_t origin_mono_ns, origin_real_ns; /* one instant on both clocks */
    uint64_t now_mono_ns; /* when the report was taken */
    struct us_report_row *rows; /* sorted: most time held first */
    size_t row_count;
    struct us_report_event *events; /* oldest first */
    size_t event_count;
    uint64_t events_dropped; /* events not copied: older ones overwritten in the ring, or being written then */
    struct us_report_span *spans;
    size_t span_count;
    uint64_t spans_dropped;
    char json_path[4096]; /* where the JSON went, "" when not written */
};

/* What the driver layer sees and cannot see, said once in the report when
 * it was used (text, and the JSON's "driver_layer"). */
extern const char us_report_driver_layer_reach[];

/* Sort rows as the report shows them: total time held, then count, then rule. */
void us_report_sort(struct us_report_row *rows, size_t count);

/* The text report, every line "unstall[pid]: ..." and newline-terminated:
 * a header, time held per rule, the top rows with their sites, the fixes of
 * the rules seen. NULL when memory is short. */
char *us_report_text(const struct us_report *r, unsigned top);

/* The JSON report (docs/findings.md). NULL when memory is short. */
char *us_report_json(const struct us_report *r);

/* What a report holds, in the order in which one may replace another. */
enum us_report_content {
    US_REPORT_SAW_NOTHING,  /* no CUDA runtime call reached the shim */
    US_REPORT_NO_FINDINGS,  /* CUDA calls, no finding */
    US_REPORT_HAS_FINDINGS,
};
enum us_report_content us_report_content_of(const struct us_report *r);

enum us_report_save_result {
    US_REPORT_SAVED,
    US_REPORT_NOT_REGULAR, /* path is a link, FIFO, device, directory or socket: left alone */
    US_REPORT_KEPT_OTHER,  /* path holds a report with more in it, written while this process ran */
    US_REPORT_FAILED,      /* errno says why */
};

/* Save text as the report at path. Only a regular file or a new one is
 * written, atomically (a new temporary file beside it, then rename); anything
 * else at path is left alone. A report with less in it (content) does not
 * replace one with more that was written after started_real_ns (the process's
 * start, CLOCK_REALTIME): the launcher's own process under a rank's name. An
 * older report, from an earlier run, is always replaced. Except when saved,
 * why says what happened in words for the log (NOT_REGULAR, KEPT_OTHER). */
enum us_report_save_result us_report_save(const char *path, const char *text, enum us_report_content content,
                                          uint64_t started_real_ns, char *why, size_t why_size);

/* Byte and time amounts for people: "64.0 MiB", "512 B"; "12.3 ms", "1.23 s". */
char *us_report_bytes(uint64_t bytes, char *out, size_t size);
char *us_report_time(uint64_t ns, char *out, size_t size);

/* "SIGTERM", or "signal N" where the C library has no name for it. */
const char *us_report_signal_name(int sig, char *out, size_t size);

/* "exit", "signal", "snapshot" */
const char *us_report_end_name(enum us_report_end_how how);

/* "legacy", "per-thread", "user" */
const char *us_report_stream_kind_name(enum us_stream_kind kind);

void us_report_free(struct us_report *r);

#endif
