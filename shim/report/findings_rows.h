/* findings_rows.h - findings aggregated per (rule, call site).
 *
 * One row per (rule, site) up to US_FINDINGS_SITES_MAX rows, then one "other
 * sites" row per rule. The rows, and the event ring (findings_rings.h), are
 * behind one mutex, us_findings_lock(): an event names its row by id, so
 * the report takes both in one snapshot. It is the finding path's lock, never
 * taken on the pass-through path. */
#ifndef UNSTALL_FINDINGS_ROWS_H
#define UNSTALL_FINDINGS_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "callsite.h"
#include "finding.h"
#include "report.h"
#include "rules.h"

#define US_FINDINGS_SITES_MAX 4096 /* distinct (rule, site) rows; then "other sites" */

struct us_findings_row_key {
    uint64_t hash;
    uint32_t rule;
    uint32_t zero; /* no padding with unknown bytes in the key */
};

struct us_findings_row {
    struct us_findings_row_key key;
    UT_hash_handle hh;
    struct us_report_row r;
    unsigned allow_gen; /* the allow-list generation 'allowed' is valid for; 0: none */
    bool allowed;
};

void us_findings_lock(void);
void us_findings_unlock(void);

/* The row of (rule, site), made if new; the rule's "other sites" row when
 * the table is full or memory is short. Called with the lock held. */
struct us_findings_row *us_findings_row_get(enum us_rule_id rule, uint64_t hash, const struct us_site *site,
                                            const char *api);

/* The row of findings counted without a call site (short explicit waits:
 * option sync_site_min_us), one per (rule, api) for up to
 * US_FINDINGS_UNLOCATED_APIS APIs a rule, then the rule's first. Called with
 * the lock held. */
#define US_FINDINGS_UNLOCATED_APIS 8
struct us_findings_row *us_findings_row_unlocated(enum us_rule_id rule, const char *api);

/* Add one finding to its row. True if it is the row's first finding (a row
 * made by strict mode has none yet). Called with the lock held. */
bool us_findings_row_add(struct us_findings_row *row, const struct us_finding *f);

/* The rows in use, "other sites" rows with findings included, and a copy of
 * them into out (that many). Called with the lock held. */
size_t us_findings_rows_held(void);
size_t us_findings_rows_copy(struct us_report_row *out);

/* Tests: forget every row. Called with the lock held. */
void us_findings_rows_reset(void);

#endif
