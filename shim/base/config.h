/* config.h - the effective configuration, read once from options.def's table.
 *
 * Sources, each overriding the one before: the defaults in options.def, the
 * config file (UNSTALL_CONFIG, a path), the environment (UNSTALL_<NAME>).
 * A bad value prints one warning naming the key and keeps the value it had;
 * an unknown UNSTALL_* variable or file key is warned about, naming the close
 * match. Nothing here ever stops the program. No other module reads getenv. */
#ifndef UNSTALL_CONFIG_H
#define UNSTALL_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define US_CONFIG_STRING_MAX 256

enum us_mode { US_MODE_OFF, US_MODE_REPORT, US_MODE_WARN, US_MODE_STRICT };
enum us_severity { US_SEVERITY_LOW, US_SEVERITY_MEDIUM, US_SEVERITY_HIGH };
enum us_strict_action { US_STRICT_ERROR, US_STRICT_ABORT };
enum us_legacy_stream { US_LEGACY_KEEP, US_LEGACY_ORDERED, US_LEGACY_PER_THREAD }; /* option legacy_stream */

/* One field per option; an ENUM is an int, the index of its value among the
 * choices, so the choices in options.def list the enums above in order. */
struct us_config {
#define US_OPTION_FIELD_BOOL(name) bool name;
#define US_OPTION_FIELD_SIZE(name) size_t name;
#define US_OPTION_FIELD_UINT(name) unsigned name;
#define US_OPTION_FIELD_ENUM(name) int name;
#define US_OPTION_FIELD_STRING(name) char name[US_CONFIG_STRING_MAX];
#define US_OPTION(name, type, def, range, help) US_OPTION_FIELD_##type(name)
#include "options.def"
#undef US_OPTION
};

enum us_option_type { US_OPT_BOOL, US_OPT_SIZE, US_OPT_UINT, US_OPT_ENUM, US_OPT_STRING };
enum us_option_source { US_SRC_DEFAULT, US_SRC_FILE, US_SRC_ENV };

/* One row of the table, for parsers, the verbose dump and gen-docs. */
struct us_option_info {
    const char *name;
    enum us_option_type type;
    const char *default_text;
    const char *range; /* "min..max", "a|b|c" or "" */
    const char *help;
    size_t offset; /* of the field in struct us_config */
};

extern const struct us_option_info us_options[];
extern const size_t us_option_count;

/* Each option's index in us_options: US_OPTION_ID_<name>. */
enum us_option_id {
#define US_OPTION(name, type, def, range, help) US_OPTION_ID_##name,
#include "options.def"
#undef US_OPTION
};

/* The name of an ENUM option's value: us_config_choice_name(US_OPTION_ID_mode,
 * US_MODE_WARN) is "warn", read off the option's choices in options.def, so
 * that a name is written once. NULL for a value out of range or an option
 * that is no ENUM. */
const char *us_config_choice_name(enum us_option_id option, int value);

/* The process's configuration, loaded on first call (thread-safe). With
 * option verbose, the first caller after the load logs every option's value
 * and source at level info. Once both are done a call is one load: every
 * hook asks, so it is inline (us_config_slow does the rest). */
extern struct us_config us_config_loaded; /* written before us_config_ready */
extern atomic_bool us_config_ready;
const struct us_config *us_config_slow(void);
static inline const struct us_config *us_config(void)
{
    if (__builtin_expect(atomic_load_explicit(&us_config_ready, memory_order_acquire), 1))
        return &us_config_loaded;
    return us_config_slow();
}

/* The process's rank for %r in paths and the report: the first of RANK,
 * SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK and, last,
 * LOCAL_RANK that holds a decimal number; NULL if none does. */
const char *us_config_rank(void);

/* The variable the rank came from ("SLURM_PROCID"), NULL without a rank. */
const char *us_config_rank_source(void);

/* The host name for %h in paths and the report (gethostname), with any
 * character other than letters, digits, '.', '-' and '_' made '_'. */
#define US_CONFIG_HOST_MAX 64
const char *us_config_host(void);

/* Where each option's value came from (for the verbose dump). */
enum us_option_source us_config_source(size_t option_index);

/* Load from explicit sources into *out (tests, and us_config itself).
 * environ_vars: NULL-terminated "KEY=VALUE" strings (like environ), may be NULL.
 * file_text: contents of a config file, may be NULL. Warnings go to the log. */
void us_config_load(struct us_config *out, enum us_option_source *sources,
                    char *const *environ_vars, const char *file_text, const char *file_name);

/* Pure value parsers: true and *out set on success, false and *out untouched otherwise. */
bool us_parse_bool(const char *text, bool *out);
bool us_parse_size(const char *text, size_t *out);              /* 0, 4096, 64k, 8M, 1g, 1t */
bool us_parse_uint(const char *text, unsigned *out);
bool us_parse_enum(const char *text, const char *choices, int *out);
bool us_parse_range(const char *range, size_t *min, size_t *max); /* "64k..1g" */

/* Replace the process configuration (tests). Loads it first, so that a later
 * first call to us_config() cannot overwrite what was set. */
void us_config_set(const struct us_config *cfg);

#endif
