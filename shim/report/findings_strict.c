/* findings_strict.c - strict mode and its allow-list (see findings_strict.h).
 * The allow-list is parsed again only when option allow changes; a row
 * remembers whether it is allowed for the list's generation, so a site is
 * matched (and symbolized) once, outside the rows' lock. */
#include "findings_strict.h"
#include "hot.h"

#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "findings_rows.h"
#include "log.h"

#define ALLOW_MAX 64 /* allow-list entries */

struct allow_entry {
    int rule; /* -1: every rule ("*") */
    char pattern[US_CONFIG_STRING_MAX]; /* "": the whole rule */
};

static pthread_mutex_t allow_lock = PTHREAD_MUTEX_INITIALIZER;
static char allow_text[US_CONFIG_STRING_MAX];
static struct allow_entry allow_list[ALLOW_MAX];
static int allow_count;
static unsigned allow_gen; /* 0: never parsed */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* "rule_id", "rule_id@pattern", "*@pattern" (and "*"), comma separated. An
 * unknown rule id is warned about and skipped. Called with allow_lock held. */
static void allow_parse(const char *text)
{
    char copy[US_CONFIG_STRING_MAX];
    snprintf(copy, sizeof copy, "%s", text);
    allow_count = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        if (*tok == '\0')
            continue;
        char *pattern = strchr(tok, '@');
        if (pattern != NULL) {
            *pattern++ = '\0';
            pattern = trim(pattern);
            tok = trim(tok);
        }
        int rule = strcmp(tok, "*") == 0 ? -1 : us_rule_find(tok);
        if (rule < 0 && strcmp(tok, "*") != 0) {
            us_log(US_LOG_WARN, "allow: unknown rule \"%s\" ignored (the rule ids are in docs/rules.md)", tok);
            continue;
        }
        if (allow_count == ALLOW_MAX) {
            us_log(US_LOG_WARN, "allow: more than %d entries; the rest are ignored", ALLOW_MAX);
            break;
        }
        struct allow_entry *e = &allow_list[allow_count++];
        e->rule = rule;
        snprintf(e->pattern, sizeof e->pattern, "%s", pattern != NULL ? pattern : "");
    }
}

/* The allow-list's generation for the configured text, parsed again only
 * when the text changed (tests change it; a process sets it once). */
static unsigned allow_refresh(const struct us_config *cfg)
{
    pthread_mutex_lock(&allow_lock);
    if (allow_gen == 0 || strcmp(allow_text, cfg->allow) != 0) {
        snprintf(allow_text, sizeof allow_text, "%s", cfg->allow);
        allow_parse(allow_text);
        allow_gen++;
    }
    unsigned gen = allow_gen;
    pthread_mutex_unlock(&allow_lock);
    return gen;
}

static bool match(const char *pattern, const char *text) { return fnmatch(pattern, text, 0) == 0; }

/* Whether a pattern names the site: any Python "path:line" (also as
 * "file:line"), or any native "module!function" (also with the raw symbol). */
static bool site_matches(const char *pattern, const struct us_site *site, int depth)
{
    for (int i = 0; i < site->py_depth && i < US_SITE_PY_FRAMES; i++) {
        const char *file = site->py_file[i];
        const char *base = strrchr(file, '/');
        if (match(pattern, file) || (base != NULL && match(pattern, base + 1)))
            return true;
    }
    for (int i = 0; i < site->depth && i < depth; i++) {
        struct us_frame fr;
        char key[512];
        us_callsite_symbolize(site->frames[i], &fr);
        if (match(pattern, us_callsite_frame_key(&fr, key, sizeof key)))
            return true;
        if (fr.symbol[0] != '\0' && strcmp(fr.symbol, fr.function) != 0) {
            snprintf(key, sizeof key, "%s!%s", fr.module, fr.symbol);
            if (match(pattern, key))
                return true;
        }
    }
    return false;
}

static bool allow_match(enum us_rule_id rule, const struct us_site *site, int depth)
{
    struct allow_entry list[ALLOW_MAX];
    pthread_mutex_lock(&allow_lock);
    int count = allow_count;
    memcpy(list, allow_list, (size_t)count * sizeof list[0]);
    pthread_mutex_unlock(&allow_lock);
    for (int i = 0; i < count; i++) {
        if (list[i].rule >= 0 && list[i].rule != (int)rule)
            continue;
        if (list[i].pattern[0] == '\0' || site_matches(list[i].pattern, site, depth))
            return true;
    }
    return false;
}

/* A pattern that names this site, for the message: the innermost Python
 * line, else the innermost native function, else its module. */
static char *suggest_pattern(const struct us_site *site, char *out, size_t size)
{
    if (site->py_depth > 0) {
        const char *base = strrchr(site->py_file[0], '/');
        snprintf(out, size, "*%s", base != NULL ? base : site->py_file[0]);
        return out;
    }
    for (int i = 0; i < site->depth; i++) {
        struct us_frame fr;
        us_callsite_symbolize(site->frames[i], &fr);
        if (fr.function[0] != '\0' || i == site->depth - 1)
            return us_callsite_frame_key(&fr, out, size);
    }
    snprintf(out, size, "*");
    return out;
}

/* Strict mode's failed calls, for a harness in the program that asks
 * (us_findings_forbidden_total): how many, and the latest one's line. */
static pthread_mutex_t forbidden_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t forbidden_total;   /* under forbidden_lock */
static char forbidden_latest[768]; /* under forbidden_lock */

/* "rule (severity) in api at site": what strict mode failed, as its message
 * and us_findings_forbidden_total say it. */
static void forbidden_line(enum us_rule_id rule, const struct us_site *site, const char *api, char *out, size_t size)
{
    const struct us_rule_info *info = &us_rules[rule];
    char where[640];
    us_callsite_line(site, 3, where, sizeof where);
    snprintf(out, size, "%s (%s severity) in %s at %s", info->id, us_severity_name(info->severity),
             api != NULL ? api : "?", where);
}

static void strict_message(enum us_rule_id rule, const char *line, const struct us_site *site, bool abort_now)
{
    const struct us_rule_info *info = &us_rules[rule];
    char pattern[320];
    suggest_pattern(site, pattern, sizeof pattern);
    us_log(US_LOG_ERROR, "strict mode: %s", line);
    us_log(US_LOG_ERROR, "  %s: %s", info->what, info->why);
    us_log(US_LOG_ERROR, "  fix: %s", info->fix);
    if (abort_now)
        us_log(US_LOG_ERROR, "  to allow it: UNSTALL_ALLOW=%s (everywhere) or UNSTALL_ALLOW='%s@%s' (this site); "
               "aborting (strict_action=abort)", info->id, info->id, pattern);
    else
        us_log(US_LOG_ERROR, "  to allow it: UNSTALL_ALLOW=%s (everywhere) or UNSTALL_ALLOW='%s@%s' (this site); "
               "the call returns cudaErrorNotPermitted without doing it (once per site)", info->id, info->id, pattern);
}

US_HOT bool us_findings_may_forbid(enum us_rule_id rule)
{
    const struct us_config *cfg = us_config();
    return cfg->mode == US_MODE_STRICT && (unsigned)rule < US_RULE_COUNT &&
           (int)us_rules[rule].severity >= cfg->strict_severity;
}

bool us_findings_forbidden(enum us_rule_id rule, const struct us_site *site, const char *api)
{
    if (site == NULL || !us_findings_may_forbid(rule))
        return false;
    const struct us_config *cfg = us_config();
    unsigned gen = allow_refresh(cfg);
    uint64_t hash = us_callsite_hash(site);

    us_findings_lock();
    struct us_findings_row *row = us_findings_row_get(rule, hash, site, api);
    bool known = !row->r.other && row->allow_gen == gen;
    bool allowed = row->allowed;
    us_findings_unlock();

    if (!known) {
        allowed = allow_match(rule, site, (int)cfg->callsite_depth);
        if (!row->r.other) {
            us_findings_lock();
            row->allow_gen = gen;
            row->allowed = allowed;
            us_findings_unlock();
        }
    }
    if (allowed)
        return false;
    char line[sizeof forbidden_latest];
    forbidden_line(rule, site, api, line, sizeof line); /* symbolizes: outside the locks */
    us_findings_lock();
    bool first = row->r.forbidden++ == 0;
    us_findings_unlock();
    pthread_mutex_lock(&forbidden_lock);
    forbidden_total++;
    memcpy(forbidden_latest, line, sizeof line);
    pthread_mutex_unlock(&forbidden_lock);
    if (cfg->strict_action == US_STRICT_ABORT) {
        strict_message(rule, line, site, true);
        abort();
    }
    if (first)
        strict_message(rule, line, site, false);
    return true;
}

uint64_t us_findings_forbidden_total(char *latest, size_t size)
{
    pthread_mutex_lock(&forbidden_lock);
    uint64_t total = forbidden_total;
    if (latest != NULL && size > 0)
        snprintf(latest, size, "%s", forbidden_latest);
    pthread_mutex_unlock(&forbidden_lock);
    return total;
}

void us_findings_forbidden_reset(void)
{
    pthread_mutex_lock(&forbidden_lock);
    forbidden_total = 0;
    forbidden_latest[0] = '\0';
    pthread_mutex_unlock(&forbidden_lock);
}
