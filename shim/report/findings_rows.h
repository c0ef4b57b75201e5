/* findings_rows.h - findings aggregated per (rule, call site).
 *
 * One row per (rule, site) up to US_FINDINGS_SITES_MAX rows, then one "other
 * sites" row per rule. The rows are behind one mutex, us_findings_lock(),
 * which the report holds while it copies them and the event ring
 * (findings_rings.h): an event names its row by id, and no row is made
 * meanwhile. A thread takes it at a (rule, site) it has not met: at one it
 * met, it counts the finding in its own memory (findings_local.h). */
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
#define US_FINDINGS_UNLOCATED_APIS 8
/* Row ids: the sites' rows, the "other sites" rows, the unlocated rows. */
#define US_FINDINGS_ROW_IDS (US_FINDINGS_SITES_MAX + US_RULE_COUNT + US_RULE_COUNT * US_FINDINGS_UNLOCATED_APIS)

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
