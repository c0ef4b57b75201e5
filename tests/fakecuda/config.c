/* config.c - the FAKECUDA_* environment, read in one place. Every numeric
 * option is one row of FC_OPTIONS; a bad value prints one warning and keeps
 * the default. FAKECUDA_PEER_MATRIX is parsed here too; the fault variables
 * belong to control.c. */
#include "fc.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* X(NAME, field, type, default, min, max) - type: INT, DBL or SIZE */
#define FC_OPTIONS(X)                                                         \
    X(DEVICES, devices, INT, 2, 1, FC_MAX_DEVICES)                            \
    X(TIME_SCALE, time_scale, DBL, 1.0, 0.0, 1e6)                             \
    X(BW_PINNED, bw_pinned, DBL, 50.0, 1e-6, 1e9)                             \
    X(BW_PAGEABLE, bw_pageable, DBL, 10.0, 1e-6, 1e9)                         \
    X(BW_D2D, bw_d2d, DBL, 1000.0, 1e-6, 1e9)                                 \
    X(BW_PEER, bw_peer, DBL, 300.0, 1e-6, 1e9)                                \
    X(BW_STAGED, bw_staged, DBL, 35.0, 1e-6, 1e9)                             \
    X(LATENCY_US, latency_us, DBL, 5.0, 0.0, 1e9)                             \
    X(PAGEABLE_H2D_ASYNC_MAX, pageable_h2d_async_max, SIZE, 1 << 20, 0, (double)(1ULL << 40)) \
    X(TIMESLICE_US, timeslice_us, DBL, 2000.0, 0.0, 1e9)                     \
    X(STAGED_HOLD, staged_hold, INT, 1, 0, 1)                                 \
    X(HOST_ALLOC_US_PER_MIB, host_alloc_us_per_mib, DBL, 0.0, 0.0, 1e9)      \
    X(HOST_REGISTER_US_PER_MIB, host_register_us_per_mib, DBL, 0.0, 0.0, 1e9) \
    X(P2P_ATOMICS, p2p_atomics, INT, 1, 0, 1)                                 \
    X(P2P_RANK, p2p_rank, INT, 0, 0, 1000)                                    \
    X(CTX_REUSE, ctx_reuse, INT, 0, 0, 1)

static _Atomic(const struct fc_config *) current;

const struct fc_config *fc_cfg(void)
{
    return atomic_load(&current);
}

static void warn(const char *name, const char *value, const char *why)
{
    fprintf(stderr, "fakecuda: ignoring FAKECUDA_%s=\"%s\": %s; keeping the default\n", name, value, why);
}

/* Parses a number with an optional K, M or G suffix (powers of 1024, SIZE
 * only). Returns false, with *why set, when the text is not one. */
static bool parse_number(const char *text, bool size_suffix, double *out, const char **why)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno != 0 || !isfinite(v)) {
        *why = "not a number";
        return false;
    }
    if (size_suffix && *end != '\0') {
        static const char suffixes[] = "KMG";
        const char *at = strchr(suffixes, *end);
        if (at == NULL || end[1] != '\0') {
            *why = "unknown suffix (K, M or G)";
            return false;
        }
        v *= (double)(1ULL << (10 * (at - suffixes + 1)));
        end++;
    }
    if (*end != '\0') {
        *why = "trailing characters";
        return false;
    }
    *out = v;
    return true;
}

enum fc_opt_type { FC_OPT_INT, FC_OPT_DBL, FC_OPT_SIZE };

struct fc_option {
    const char *name; /* after FAKECUDA_ */
    size_t offset;    /* in struct fc_config */
    enum fc_opt_type type;
    double def, min, max;
};

static const struct fc_option options[] = {
#define FC_ROW(NAME, field, type, def, min, max) \
    {#NAME, offsetof(struct fc_config, field), FC_OPT_##type, (double)(def), (double)(min), (double)(max)},
    FC_OPTIONS(FC_ROW)
#undef FC_ROW
};

/* The value of one option: its default, or the environment's if valid. */
static double read_option(const struct fc_option *o)
{
    char var[64];
    snprintf(var, sizeof var, "FAKECUDA_%s", o->name);
    const char *text = getenv(var);
    if (text == NULL || *text == '\0')
        return o->def;
    double v;
    const char *why;
    if (!parse_number(text, o->type == FC_OPT_SIZE, &v, &why))
        warn(o->name, text, why);
    else if (v < o->min || v > o->max)
        warn(o->name, text, "out of range");
    else if (o->type != FC_OPT_DBL && v != floor(v))
        warn(o->name, text, "not an integer");
    else
        return v;
    return o->def;
}

/* "011,101,110": row i says which peers device i can access. A cell is 0
 * (not capable), 1 (capable), r (capable, but cudaDeviceEnablePeerAccess
 * refuses) or h (capable, but enabling never returns: a machine that locks
 * up, as a user reported). */
static void read_peer_matrix(struct fc_config *c)
{
    for (int i = 0; i < FC_MAX_DEVICES; i++)
        for (int j = 0; j < FC_MAX_DEVICES; j++)
            c->peer_capable[i][j] = i != j;
    memset(c->peer_enable, 0, sizeof c->peer_enable); /* FC_PEER_ENABLE_OK */
    const char *text = getenv("FAKECUDA_PEER_MATRIX");
    if (text == NULL || *text == '\0')
        return;
    static const char cells[] = "01rh";
    static const char *const why = "expected one row of 0/1/r/h per device, rows separated by ','";
    bool m[FC_MAX_DEVICES][FC_MAX_DEVICES] = {{false}};
    enum fc_peer_enable e[FC_MAX_DEVICES][FC_MAX_DEVICES] = {{FC_PEER_ENABLE_OK}};
    const char *p = text;
    for (int i = 0; i < c->devices; i++) {
        for (int j = 0; j < c->devices; j++, p++) {
            if (*p == '\0' || strchr(cells, *p) == NULL) {
                warn("PEER_MATRIX", text, why);
                return;
            }
            m[i][j] = *p != '0' && i != j;
            e[i][j] = *p == 'r' ? FC_PEER_ENABLE_REFUSED : *p == 'h' ? FC_PEER_ENABLE_HANGS : FC_PEER_ENABLE_OK;
        }
        if (*p != (i + 1 < c->devices ? ',' : '\0')) {
            warn("PEER_MATRIX", text, why);
            return;
        }
        p++;
    }
    memcpy(c->peer_capable, m, sizeof m);
    memcpy(c->peer_enable, e, sizeof e);
}

void fc_config_load(int devices)
{
    struct fc_config *c = calloc(1, sizeof *c);
    if (c == NULL) {
        fputs("fakecuda: out of memory reading the configuration\n", stderr);
        abort();
    }
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        const struct fc_option *o = &options[i];
        double v = read_option(o);
        char *field = (char *)c + o->offset;
        switch (o->type) {
        case FC_OPT_INT: *(int *)field = (int)v; break;
        case FC_OPT_DBL: *(double *)field = v; break;
        case FC_OPT_SIZE: *(size_t *)field = (size_t)v; break;
        }
    }
    if (devices > 0)
        c->devices = devices;
    read_peer_matrix(c);
    /* the previous copy stays allocated (readers may hold it), reachable
     * from the new one: a reload is not a leak */
    c->previous = atomic_exchange(&current, c);
}
