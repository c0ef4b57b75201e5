/* findings_collect.c - the findings gathered into one report, and the
 * report at exit (see findings_collect.h). The rows and their events are
 * taken in one snapshot under the rows' lock; symbolizing and formatting
 * happen after it. */
#include "findings_collect.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "findings_local.h"
#include "findings_rings.h"
#include "findings_rows.h"
#include "log.h"
#include "report.h"
#include "state.h"

static atomic_bool reported;

/* One instant on both clocks, taken at load: the timeline's events carry
 * CLOCK_MONOTONIC times, which the tool places on the wall clock with it. */
static uint64_t origin_mono_ns, origin_real_ns;

__attribute__((constructor)) static void take_origin(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    origin_mono_ns = us_now_ns();
    origin_real_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void read_text_file(const char *path, char *out, size_t size, bool nul_to_space)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, size - 1);
    close(fd);
    if (n <= 0)
        return;
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\0'))
        out[--n] = '\0';
    if (nul_to_space)
        for (ssize_t i = 0; i < n; i++)
            if (out[i] == '\0')
                out[i] = ' ';
}

static const char *mode_name(int mode)
{
    const char *name = us_config_choice_name(US_OPTION_ID_mode, mode);
    return name != NULL ? name : "?";
}

struct us_report *us_findings_collect(void)
{
    struct us_report *r = calloc(1, sizeof *r);
    uint32_t *index = calloc(US_FINDINGS_ROW_IDS, sizeof *index);
    if (r == NULL || index == NULL)
        goto fail;
    r->pid = (long)getpid();
    read_text_file("/proc/self/comm", r->program, sizeof r->program, false);
    if (r->program[0] == '\0')
        snprintf(r->program, sizeof r->program, "%s", program_invocation_short_name);
    read_text_file("/proc/self/cmdline", r->cmdline, sizeof r->cmdline, true);
    const char *rank = us_config_rank();
    snprintf(r->rank, sizeof r->rank, "%s", rank != NULL ? rank : "");
    r->rank_source = us_config_rank_source();
    snprintf(r->host, sizeof r->host, "%s", us_config_host());
    r->mode = mode_name(us_config()->mode);
    r->hooked = us_state_was_hooked();
    us_cuda_use_probe(r->hooked, &r->cuda);
    r->driver_layer = us_state_driver_layer_used();
    r->legacy_moved = us_state_legacy_moved_count();
    r->legacy_stream = us_config_choice_name(US_OPTION_ID_legacy_stream, us_config()->legacy_stream);
    r->origin_mono_ns = origin_mono_ns;
    r->origin_real_ns = origin_real_ns;
    r->now_mono_ns = us_now_ns();

    us_findings_lock();
    size_t n = us_findings_rows_held();
    size_t ev = us_findings_events_held();
    r->rows = calloc(n > 0 ? n : 1, sizeof *r->rows);
    r->events = calloc(ev > 0 ? ev : 1, sizeof *r->events);
    if (r->rows == NULL || r->events == NULL) {
        us_findings_unlock();
        goto fail;
    }
    r->row_count = us_findings_rows_copy(r->rows);
    us_findings_local_add_to(r->rows, r->row_count);
    r->event_count = us_findings_events_copy(r->events, ev, &r->events_dropped);
    us_findings_unlock();

    if (!us_findings_spans_copy(r))
        goto fail;

    us_report_sort(r->rows, r->row_count);
    for (size_t i = 0; i < r->row_count; i++)
        if (r->rows[i].id < US_FINDINGS_ROW_IDS)
            index[r->rows[i].id] = (uint32_t)i;
    for (size_t i = 0; i < r->event_count; i++)
        r->events[i].row = r->events[i].row < US_FINDINGS_ROW_IDS ? index[r->events[i].row] : 0;
    free(index);
    return r;

fail:
    free(index);
    us_report_free(r);
    return NULL;
}

/* The JSON report at option report's path; false when not written (logged
 * unless quiet: a snapshot that cannot be written says so once). */
static bool save_json(struct us_report *r, bool quiet)
{
    static int logged_snapshot;
    const struct us_config *cfg = us_config();
    char path[sizeof r->json_path], not_written[512];
    char *json = NULL;
    const char *why = NULL;
    enum us_report_save_result saved = US_REPORT_FAILED;
    if (!us_expand_path(cfg->report, us_config_rank(), us_config_host(), path, sizeof path))
        why = "the expanded path is too long";
    else if ((json = us_report_json(r)) == NULL)
        why = "out of memory";
    else if ((saved = us_report_save(path, json, us_report_content_of(r), r->origin_real_ns, not_written,
                                     sizeof not_written)) == US_REPORT_FAILED)
        why = strerror(errno);
    free(json);
    if (saved == US_REPORT_SAVED) {
        snprintf(r->json_path, sizeof r->json_path, "%s", path);
        return true;
    }
    if (quiet) {
        us_log_once(&logged_snapshot, US_LOG_WARN, "report: snapshot not written to \"%s\": %s", path,
                    why != NULL ? why : not_written);
        return false;
    }
    if (why == NULL)
        us_log(US_LOG_WARN, "report: not written to \"%s\": %s", path, not_written);
    else
        us_log(US_LOG_WARN, "report: cannot write \"%s\" (%s)", cfg->report, why);
    return false;
}

void us_findings_report_ended(int signal)
{
    const struct us_config *cfg = us_config();
    if (cfg->mode == US_MODE_OFF || atomic_exchange(&reported, true))
        return;
    struct us_report *r = us_findings_collect();
    if (r == NULL) {
        us_log(US_LOG_WARN, "report: out of memory; no report");
        return;
    }
    r->end = signal != 0 ? US_REPORT_END_SIGNAL : US_REPORT_END_EXIT;
    r->end_signal = signal;
    if (cfg->report[0] != '\0')
        (void)save_json(r, false);
    char *text = us_report_text(r, cfg->report_top);
    if (text != NULL)
        us_log_raw(text);
    else
        us_log(US_LOG_WARN, "report: out of memory; no report");
    free(text);
    us_report_free(r);
}

void us_findings_report(void)
{
    us_findings_report_ended(0);
}

bool us_findings_snapshot(void)
{
    const struct us_config *cfg = us_config();
    if (cfg->mode == US_MODE_OFF || cfg->report[0] == '\0' || atomic_load(&reported))
        return false;
    struct us_report *r = us_findings_collect();
    if (r == NULL)
        return false;
    r->end = US_REPORT_END_SNAPSHOT;
    bool saved = !atomic_load(&reported) && save_json(r, true);
    us_report_free(r);
    return saved;
}

void us_findings_report_rearm(void) { atomic_store(&reported, false); }
