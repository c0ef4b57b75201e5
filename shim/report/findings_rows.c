/* findings_rows.c - findings aggregated per (rule, call site) (see
 * findings_rows.h). Bounded: SITES_MAX rows, then one "other sites" row per
 * rule, so a program with endless new sites cannot grow the table. */
#include "findings_rows.h"
#include "hot.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SITES_MAX US_FINDINGS_SITES_MAX

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct us_findings_row *rows;                     /* by key, in creation order */
static uint32_t row_count;
static struct us_findings_row other_rows[US_RULE_COUNT]; /* past SITES_MAX, per rule */
static struct us_findings_row unlocated_rows[US_RULE_COUNT][US_FINDINGS_UNLOCATED_APIS];
/* The first rows live here rather than on the heap: a new row was the one
 * page the first finding of a run still faulted in (a new heap page), and
 * the shim's data is mapped in at its start (base/prefault.h). */
#define FIRST_ROWS 32
_Static_assert(FIRST_ROWS <= SITES_MAX, "the first rows are rows of the table");
static struct us_findings_row first_rows[FIRST_ROWS];

US_HOT void us_findings_lock(void) { pthread_mutex_lock(&lock); }

US_HOT void us_findings_unlock(void) { pthread_mutex_unlock(&lock); }

US_HOT struct us_findings_row *us_findings_row_get(enum us_rule_id rule, uint64_t hash, const struct us_site *site,
                                            const char *api)
{
    struct us_findings_row_key key = { .hash = hash, .rule = (uint32_t)rule };
    /* the call site's hash is a hash already: uthash's own over the key
     * was most of a finding's record (~120 of its ~450 instructions) */
    unsigned hashv = (unsigned)(hash ^ (hash >> 32)) ^ ((uint32_t)rule * 0x9e3779b9u);
    struct us_findings_row *row;
    HASH_FIND_BYHASHVALUE(hh, rows, &key, sizeof key, hashv, row);
    if (row != NULL)
        return row;
    if (row_count < FIRST_ROWS)
        row = &first_rows[row_count];
    else if (row_count < SITES_MAX)
        row = calloc(1, sizeof *row);
    if (row != NULL) {
        row->key = key;
        row->r.id = row_count++;
        row->r.site = *site;
        HASH_ADD_BYHASHVALUE(hh, rows, key, sizeof key, hashv, row);
    } else {
        row = &other_rows[rule];
        row->r.id = SITES_MAX + (uint32_t)rule;
        row->r.other = true;
    }
    row->r.rule = rule;
    if (row->r.api == NULL)
        row->r.api = api;
    return row;
}

US_HOT struct us_findings_row *us_findings_row_unlocated(enum us_rule_id rule, const char *api)
{
    struct us_findings_row *row = unlocated_rows[rule];
    for (int i = 0; i < US_FINDINGS_UNLOCATED_APIS; i++)
        if (row[i].r.api == api || row[i].r.api == NULL) {
            row += i;
            break;
        }
    if (row->r.api == NULL) {
        row->r.id = SITES_MAX + US_RULE_COUNT + (uint32_t)(rule * US_FINDINGS_UNLOCATED_APIS + (row - unlocated_rows[rule]));
        row->r.rule = rule;
        row->r.api = api;
        row->r.unlocated = true;
    }
    return row;
}

US_HOT bool us_findings_row_add(struct us_findings_row *row, const struct us_finding *f)
{
    struct us_report_row *r = &row->r;
    bool first = r->count == 0;
    r->count++;
    r->bytes += f->bytes;
    r->total_ns += f->held_ns;
    if (f->held_ns > r->max_ns)
        r->max_ns = f->held_ns;
    if (f->fixed)
        r->fixed++;
    else
        r->observed++;
    if (first)
        r->first_ns = f->start_ns;
    r->last_ns = f->start_ns;
    r->stream_kinds |= 1u << f->stream_kind;
    r->devices |= us_finding_device_bits(f);
    return first;
}

static bool other_in_use(const struct us_findings_row *row) { return row->r.count > 0 || row->r.forbidden > 0; }

size_t us_findings_rows_held(void)
{
    size_t n = row_count;
    for (int i = 0; i < US_RULE_COUNT; i++) {
        n += other_in_use(&other_rows[i]);
        for (int k = 0; k < US_FINDINGS_UNLOCATED_APIS; k++)
            n += unlocated_rows[i][k].r.count > 0;
    }
    return n;
}

size_t us_findings_rows_copy(struct us_report_row *out)
{
    size_t n = 0;
    struct us_findings_row *row, *tmp;
    HASH_ITER(hh, rows, row, tmp)
        out[n++] = row->r;
    for (int i = 0; i < US_RULE_COUNT; i++) {
        if (other_in_use(&other_rows[i]))
            out[n++] = other_rows[i].r;
        for (int k = 0; k < US_FINDINGS_UNLOCATED_APIS; k++)
            if (unlocated_rows[i][k].r.count > 0)
                out[n++] = unlocated_rows[i][k].r;
    }
    return n;
}

void us_findings_rows_reset(void)
{
    struct us_findings_row *row, *tmp;
    HASH_ITER(hh, rows, row, tmp) {
        HASH_DEL(rows, row);
        if ((uintptr_t)row - (uintptr_t)first_rows >= sizeof first_rows) /* from calloc */
            free(row);
    }
    row_count = 0;
    memset(first_rows, 0, sizeof first_rows);
    memset(other_rows, 0, sizeof other_rows);
    memset(unlocated_rows, 0, sizeof unlocated_rows);
}
