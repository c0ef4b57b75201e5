/* probe.c - see probe.h. Compiled to nothing without US_PROBE. */
#include "probe.h"

#ifdef US_PROBE

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "state.h"

#define US_PROBE_STEP_NAME(name) #name,
static const char *const step_names[US_PROBE_STEP_COUNT] = { US_PROBE_STEPS(US_PROBE_STEP_NAME) };
#undef US_PROBE_STEP_NAME

struct probe_record {
    const char *api, *path;
    size_t bytes;
    int tid;
    uint64_t at[US_PROBE_STEP_COUNT]; /* 0: not reached */
};

/* the call in progress on this thread; depth > 1: a copy the shim's own
 * entry made inside it (the driver layer's), which stamps the outer one */
static _Thread_local struct probe_record current;
static _Thread_local unsigned depth;

static struct probe_record records[US_PROBE_RECORDS];
static atomic_uint taken; /* records claimed; past US_PROBE_RECORDS, calls are not kept */

void us_probe_enter(void)
{
    if (depth++ > 0)
        return;
    memset(current.at, 0, sizeof current.at);
    current.at[US_PROBE_entered] = us_now_ns();
}

void us_probe_stamp(enum us_probe_step step)
{
    if (depth > 0 && current.at[step] == 0)
        current.at[step] = us_now_ns();
}

void us_probe_leave(const char *api, const char *path, size_t bytes)
{
    if (depth == 0 || --depth > 0)
        return;
    current.at[US_PROBE_left] = us_now_ns();
    unsigned i = atomic_fetch_add_explicit(&taken, 1, memory_order_relaxed);
    if (i >= US_PROBE_RECORDS)
        return;
    current.api = api != NULL ? api : "?";
    current.path = path != NULL ? path : "?";
    current.bytes = bytes;
    current.tid = (int)syscall(SYS_gettid);
    records[i] = current;
}

/* At exit, after every copy: nothing here calls CUDA. */
__attribute__((destructor)) static void probe_write(void)
{
    unsigned n = atomic_load(&taken);
    if (n > US_PROBE_RECORDS)
        n = US_PROBE_RECORDS;
    const char *path = getenv("UNSTALL_PROBE_OUT");
    FILE *out = path != NULL && path[0] != '\0' ? fopen(path, "ae") : stderr;
    if (out == NULL)
        return;
    for (unsigned i = 0; i < n; i++) {
        const struct probe_record *r = &records[i];
        char copy_path[32]; /* "D2H pageable" -> "D2H_pageable": one token */
        snprintf(copy_path, sizeof copy_path, "%s", r->path);
        for (char *c = copy_path; *c != '\0'; c++)
            if (*c == ' ')
                *c = '_';
        fprintf(out, "UNSTALL_PROBE pid=%ld call=%u tid=%d api=%s path=%s bytes=%zu", (long)getpid(), i + 1, r->tid,
                r->api, copy_path, r->bytes);
        for (int s = 0; s < US_PROBE_STEP_COUNT; s++)
            if (r->at[s] != 0)
                fprintf(out, " %s=%.3f", step_names[s], (double)(r->at[s] - r->at[US_PROBE_entered]) / 1e3);
        fputc('\n', out);
    }
    if (out != stderr)
        fclose(out);
}

#else
typedef int us_probe_none; /* ISO C wants a translation unit to declare something */
#endif
