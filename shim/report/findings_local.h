/* findings_local.h - a thread's findings at rows it met before, counted in
 * the thread's own memory, without the rows' lock.
 *
 * A program copies from the same few places, in loops, and nearly every copy
 * has a finding or two (a pageable copy's rule, legacy_stream): each took the
 * rows' lock, which every thread shares, and looked its row up in the hash
 * table. Now a thread remembers the last rows it met (one per slot of a
 * small table of its own: (rule, site hash) or (rule, unlocated API) -> row)
 * and sums a finding at one of them in that slot: plain loads and stores in
 * its own memory, no lock and no atomic read-modify-write. Per call the
 * instructions barely moved (callgrind on the simulated runtime, a 4 KiB
 * pass-through H2D: the shim's own 2080 -> 2040); what went is
 * the shared lock and the table's cache lines.
 *
 * The sums reach the rows three ways, each under us_findings_lock: the
 * report adds every thread's to its copy of the rows (us_findings_local_
 * add_to); a slot taken over by another row adds its sums to its row first;
 * a thread that ends adds all of its own. A report taken while threads still
 * record may count a finding's count without its bytes, never a finding
 * twice. */
#ifndef UNSTALL_FINDINGS_LOCAL_H
#define UNSTALL_FINDINGS_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "finding.h"
#include "findings_rows.h"
#include "report.h"

/* The calling thread's slot for (rule, site hash), or with unlocated_api not
 * NULL for (rule, that API)'s unlocated row, when it learnt that row since
 * the last reset; else NULL. No lock. */
struct us_findings_local;
struct us_findings_local *us_findings_local_find(enum us_rule_id rule, uint64_t hash, const char *unlocated_api);

/* Counts f in the slot (the calling thread's own). No lock. */
void us_findings_local_add(struct us_findings_local *slot, const struct us_finding *f);

/* The id of the slot's row (for the timeline's event). */
uint32_t us_findings_local_row_id(const struct us_findings_local *slot);

/* The calling thread remembers row for (rule, hash) or (rule, unlocated_api),
 * after a finding was added to the row itself: its later findings there are
 * counted in the thread's slot, never a row's first (which warn mode
 * announces). Called with us_findings_lock held. Does nothing when memory is
 * short. */
void us_findings_local_learn(struct us_findings_row *row, enum us_rule_id rule, uint64_t hash,
                             const char *unlocated_api);

/* Adds every thread's sums to the copies of their rows in rows[0..n) (as
 * us_findings_rows_copy made them). Called with us_findings_lock held. */
void us_findings_local_add_to(struct us_report_row *rows, size_t n);

/* Tests (us_findings_reset): every thread forgets what it learnt and its
 * sums. Called with us_findings_lock held, while no other thread records. */
void us_findings_local_reset(void);

#endif
