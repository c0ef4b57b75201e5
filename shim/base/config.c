/* config.c - the one place that reads the environment (see config.h).
 *
 * Order, each source overriding the one before: the defaults in options.def,
 * the file named by UNSTALL_CONFIG, the UNSTALL_<NAME> variables. Every value
 * goes through the same strict parser as the defaults; a value that fails
 * prints one warning naming where it came from and what is kept. The parsers
 * are pure functions so that tests can drive them directly. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

extern char **environ;

const struct us_option_info us_options[] = {
#define US_OPTION(name, type, def, range, help)                                            \
    { #name, US_OPT_##type, def, range, help, offsetof(struct us_config, name) },
#include "options.def"
#undef US_OPTION
};
const size_t us_option_count = sizeof us_options / sizeof us_options[0];

/* UNSTALL_* variables that the project uses but that are not options: they
 * are never reported as unknown. Add here any such variable, and only here. */
static const char *const us_known_vars[] = {
    "UNSTALL_CONFIG",    /* the config file; read by us_config() */
    "UNSTALL_LIB",       /* tools/unstall: the libunstall.so to preload */
    "UNSTALL_PRELOADED", /* reserved for a launcher to mark the program it starts */
    "UNSTALL_PROBE_OUT", /* a probe build's (make PROBE=1) file for its step times: probe.h */
};

/* Options that existed and were removed: setting one says why, once per
 * place it is set, and changes nothing. Keep a row for a few releases. */
static const struct {
    const char *name;
    const char *why;
} us_removed_options[] = {
    {"d2h_deferred", "a pageable D2H returned before the data was in place, so correctly ordered code "
                     "(a D2H into a buffer, then an H2D from it on the same stream) sent stale bytes; "
                     "pageable D2H copies keep the native promise now (docs/pipelines.md)"},
};

#define US_ENV_PREFIX "UNSTALL_"
#define US_ENV_PREFIX_LEN (sizeof US_ENV_PREFIX - 1)
#define US_CONFIG_FILE_MAX (1u << 20) /* a config file is a few KiB; refuse megabytes */
#define US_SHOWN_MAX 64               /* characters of a bad value quoted in a warning */
#define US_NAME_MAX 64                /* longest name compared for a close match */

/* --- parsers ---------------------------------------------------------------- */

/* ASCII only: the C locale's tolower would depend on setlocale of the program. */
static int us_lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }
static int us_upper(int c) { return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c; }
static bool us_is_digit(int c) { return c >= '0' && c <= '9'; }

static bool us_equal_nocase(const char *a, size_t a_len, const char *b)
{
    size_t i = 0;
    for (; i < a_len && b[i] != '\0'; i++)
        if (us_lower((unsigned char)a[i]) != us_lower((unsigned char)b[i]))
            return false;
    return i == a_len && b[i] == '\0';
}

bool us_parse_bool(const char *text, bool *out)
{
    static const char *const yes[] = { "1", "true", "yes", "on" };
    static const char *const no[] = { "0", "false", "no", "off" };
    if (text == NULL)
        return false;
    size_t len = strlen(text);
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (us_equal_nocase(text, len, yes[i])) {
            *out = true;
            return true;
        }
        if (us_equal_nocase(text, len, no[i])) {
            *out = false;
            return true;
        }
    }
    return false;
}

/* Decimal digits only: strtoul would take a sign, leading blanks and hex. */
static bool us_parse_digits(const char **p, unsigned long long *out)
{
    const char *s = *p;
    unsigned long long v = 0;
    if (!us_is_digit((unsigned char)*s))
        return false;
    for (; us_is_digit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (ULLONG_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return true;
}

bool us_parse_size(const char *text, size_t *out)
{
    if (text == NULL)
        return false;
    const char *p = text;
    unsigned long long v;
    if (!us_parse_digits(&p, &v))
        return false;
    unsigned shift = 0;
    switch (us_lower((unsigned char)*p)) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: break;
    }
    if (shift != 0) {
        p++;
        if (us_lower((unsigned char)p[0]) == 'i' && us_lower((unsigned char)p[1]) == 'b')
            p += 2; /* 8MiB */
        else if (us_lower((unsigned char)p[0]) == 'b')
            p++; /* 8mb: the same powers of 1024, as everywhere in this project */
    } else if (us_lower((unsigned char)*p) == 'b') {
        p++; /* 4096b */
    }
    if (*p != '\0')
        return false;
    if (v > (unsigned long long)SIZE_MAX >> shift)
        return false;
    *out = (size_t)(v << shift);
    return true;
}

bool us_parse_uint(const char *text, unsigned *out)
{
    if (text == NULL)
        return false;
    const char *p = text;
    unsigned long long v;
    if (!us_parse_digits(&p, &v) || *p != '\0' || v > UINT_MAX)
        return false;
    *out = (unsigned)v;
    return true;
}

bool us_parse_enum(const char *text, const char *choices, int *out)
{
    if (text == NULL || choices == NULL || *text == '\0')
        return false;
    size_t text_len = strlen(text);
    int index = 0;
    for (const char *c = choices;; index++) {
        const char *bar = strchr(c, '|');
        size_t len = bar != NULL ? (size_t)(bar - c) : strlen(c);
        if (len == text_len) {
            size_t i = 0;
            while (i < len && us_lower((unsigned char)c[i]) == us_lower((unsigned char)text[i]))
                i++;
            if (i == len) {
                *out = index;
                return true;
            }
        }
        if (bar == NULL)
            return false;
        c = bar + 1;
    }
}

bool us_parse_range(const char *range, size_t *min, size_t *max)
{
    if (range == NULL)
        return false;
    const char *dots = strstr(range, "..");
    char low[32];
    size_t low_len = dots != NULL ? (size_t)(dots - range) : 0;
    if (dots == NULL || low_len == 0 || low_len >= sizeof low)
        return false;
    memcpy(low, range, low_len);
    low[low_len] = '\0';
    size_t lo, hi;
    if (!us_parse_size(low, &lo) || !us_parse_size(dots + 2, &hi) || lo > hi)
        return false;
    *min = lo;
    *max = hi;
    return true;
}

/* --- values as text, for warnings and the verbose dump ------------------------ */

static void *us_field(struct us_config *cfg, size_t index)
{
    return (char *)cfg + us_options[index].offset;
}

static const void *us_field_const(const struct us_config *cfg, size_t index)
{
    return (const char *)cfg + us_options[index].offset;
}

/* The shortest exact form: 8388608 is "8m", 8388609 stays as it is. */
static void us_format_size(size_t v, char *out, size_t out_size)
{
    static const char units[] = "kmgt";
    int unit = -1;
    while (v != 0 && unit < 3 && (v & 1023) == 0) {
        v >>= 10;
        unit++;
    }
    if (unit < 0)
        snprintf(out, out_size, "%zu", v);
    else
        snprintf(out, out_size, "%zu%c", v, units[unit]);
}

/* Copy choice number index of "a|b|c" into out. */
static void us_format_choice(const char *choices, int index, char *out, size_t out_size)
{
    const char *c = choices;
    for (int i = 0; i < index && c != NULL; i++) {
        c = strchr(c, '|');
        if (c != NULL)
            c++;
    }
    if (c == NULL) {
        snprintf(out, out_size, "%d", index);
        return;
    }
    const char *bar = strchr(c, '|');
    int len = bar != NULL ? (int)(bar - c) : (int)strlen(c);
    snprintf(out, out_size, "%.*s", len, c);
}

/* Printable, one line and short: a name or value can hold anything an
 * environment variable or a file line can. "..." when cut; quote: values
 * are quoted (so that an empty one shows), names are not. */
static void us_format_text(const char *text, size_t len, bool quote, char *out, size_t out_size)
{
    size_t o = 0;
    if (quote)
        out[o++] = '"';
    for (size_t i = 0; i < len && i < US_SHOWN_MAX && o + 5 < out_size; i++) {
        unsigned char c = (unsigned char)text[i];
        out[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (len > US_SHOWN_MAX && o + 5 < out_size) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    if (quote)
        out[o++] = '"';
    out[o] = '\0';
}

static void us_format_shown(const char *text, size_t len, char *out, size_t out_size)
{
    us_format_text(text, len, true, out, out_size);
}

static void us_format_value(const struct us_config *cfg, size_t index, char *out, size_t out_size)
{
    const struct us_option_info *opt = &us_options[index];
    const void *field = us_field_const(cfg, index);
    switch (opt->type) {
    case US_OPT_BOOL: snprintf(out, out_size, "%d", *(const bool *)field ? 1 : 0); break;
    case US_OPT_SIZE: us_format_size(*(const size_t *)field, out, out_size); break;
    case US_OPT_UINT: snprintf(out, out_size, "%u", *(const unsigned *)field); break;
    case US_OPT_ENUM: us_format_choice(opt->range, *(const int *)field, out, out_size); break;
    case US_OPT_STRING: {
        const char *s = field;
        us_format_shown(s, strlen(s), out, out_size);
        break;
    }
    }
}

static const char *us_source_name(enum us_option_source source)
{
    switch (source) {
    case US_SRC_DEFAULT: return "default";
    case US_SRC_FILE: return "config file";
    case US_SRC_ENV: return "environment";
    }
    return "?";
}

/* --- warnings, bounded by log_max_lines ---------------------------------------- */

/* One load's warnings. A config file of garbage can give a warning per line:
 * they are bounded by log_max_lines like any line of the log, the last line
 * saying how many more there were. The bound is the loaded value itself, so
 * a load runs twice: quietly, to learn the bound and the number of warnings,
 * then for real. */
struct us_load {
    bool quiet;              /* the first pass: count, say nothing */
    unsigned long warnings;  /* counted by the quiet pass */
    unsigned long max;       /* log_max_lines as loaded; 0: no bound */
    unsigned long shown, suppressed;
};

static void us_load_warn(struct us_load *load, enum us_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void us_load_warn(struct us_load *load, enum us_log_level level, const char *fmt, ...)
{
    if (load->quiet) {
        load->warnings++;
        return;
    }
    /* over the bound: the first max - 1 warnings, then the summary line */
    if (load->max != 0 && load->warnings > load->max && load->shown + 1 >= load->max) {
        load->suppressed++;
        return;
    }
    load->shown++;
    va_list ap;
    va_start(ap, fmt);
    us_vlog(level, fmt, ap);
    va_end(ap);
}

/* --- applying one value ------------------------------------------------------- */

enum us_parse_result { US_PARSE_OK, US_PARSE_BAD, US_PARSE_OUT_OF_RANGE };

/* Parse text into the option's field; the field changes only if the whole
 * value is good (the parsers set their output only on success). */
static enum us_parse_result us_parse_option(size_t index, const char *text, size_t len,
                                            struct us_config *cfg)
{
    const struct us_option_info *opt = &us_options[index];
    void *field = us_field(cfg, index);
    char buf[US_CONFIG_STRING_MAX];
    /* no value of any type is this long, and the copy needs a terminator */
    if (len >= sizeof buf)
        return US_PARSE_BAD;
    memcpy(buf, text, len);
    buf[len] = '\0';

    size_t min = 0, max = SIZE_MAX;
    /* a range the table cannot state is a table bug (test_config checks): no bound */
    if ((opt->type == US_OPT_SIZE || opt->type == US_OPT_UINT) && !us_parse_range(opt->range, &min, &max)) {
        min = 0;
        max = SIZE_MAX;
    }
    switch (opt->type) {
    case US_OPT_BOOL:
        return us_parse_bool(buf, field) ? US_PARSE_OK : US_PARSE_BAD;
    case US_OPT_SIZE: {
        size_t v;
        if (!us_parse_size(buf, &v))
            return US_PARSE_BAD;
        if (v < min || v > max)
            return US_PARSE_OUT_OF_RANGE;
        *(size_t *)field = v;
        return US_PARSE_OK;
    }
    case US_OPT_UINT: {
        unsigned v;
        if (!us_parse_uint(buf, &v))
            return US_PARSE_BAD;
        if (v < min || v > max)
            return US_PARSE_OUT_OF_RANGE;
        *(unsigned *)field = v;
        return US_PARSE_OK;
    }
    case US_OPT_ENUM:
        return us_parse_enum(buf, opt->range, field) ? US_PARSE_OK : US_PARSE_BAD;
    case US_OPT_STRING:
        memcpy(field, buf, len + 1);
        return US_PARSE_OK;
    }
    return US_PARSE_BAD;
}

/* Why a value was refused, in the warning's words. */
static void us_describe_refusal(const struct us_option_info *opt, enum us_parse_result result, char *out,
                                size_t out_size)
{
    if (result == US_PARSE_OUT_OF_RANGE) {
        snprintf(out, out_size, "out of range %s", opt->range);
        return;
    }
    switch (opt->type) {
    case US_OPT_BOOL: snprintf(out, out_size, "not a boolean (expected 1/0, true/false, yes/no, on/off)"); break;
    case US_OPT_SIZE: snprintf(out, out_size, "not a size (expected e.g. 8m, 64k)"); break;
    case US_OPT_UINT: snprintf(out, out_size, "not an unsigned decimal number"); break;
    case US_OPT_ENUM: snprintf(out, out_size, "not one of %s", opt->range); break;
    case US_OPT_STRING: snprintf(out, out_size, "longer than %d characters", US_CONFIG_STRING_MAX - 1); break;
    }
}

/* Where a value came from, for warnings: "UNSTALL_SLOTS" or "file:12: slots". */
struct us_origin {
    enum us_option_source source;
    const char *file_name;
    unsigned line;
};

/* The environment's name of an option: slots -> UNSTALL_SLOTS. */
static void us_env_name(const char *option, char *out, size_t out_size)
{
    size_t n = (size_t)snprintf(out, out_size, "%s", US_ENV_PREFIX);
    for (const char *c = option; *c != '\0' && n + 1 < out_size; c++)
        out[n++] = (char)us_upper((unsigned char)*c);
    out[n] = '\0';
}

static void us_apply(struct us_load *load, struct us_config *out, enum us_option_source *sources, size_t index,
                     const char *text, size_t len, const struct us_origin *origin)
{
    const struct us_option_info *opt = &us_options[index];
    enum us_parse_result result = us_parse_option(index, text, len, out);
    if (result == US_PARSE_OK) {
        if (sources != NULL)
            sources[index] = origin->source;
        return;
    }
    char shown[US_SHOWN_MAX + 8], kept[US_SHOWN_MAX + 8], why[160];
    us_format_shown(text, len, shown, sizeof shown);
    us_format_value(out, index, kept, sizeof kept);
    us_describe_refusal(opt, result, why, sizeof why);
    if (origin->source == US_SRC_ENV) {
        char key[US_NAME_MAX + US_ENV_PREFIX_LEN];
        us_env_name(opt->name, key, sizeof key);
        us_load_warn(load, US_LOG_WARN, "%s=%s: %s; keeping %s", key, shown, why, kept);
    } else {
        us_load_warn(load, US_LOG_WARN, "%s:%u: %s=%s: %s; keeping %s", origin->file_name, origin->line, opt->name,
               shown, why, kept);
    }
}

/* --- names: lookup and close matches ------------------------------------------- */

/* Levenshtein distance, case-folded; -1 when a name is too long to compare. */
static int us_distance(const char *a, size_t a_len, const char *b, size_t b_len)
{
    int row[US_NAME_MAX + 1];
    if (a_len > US_NAME_MAX || b_len > US_NAME_MAX)
        return -1;
    for (size_t j = 0; j <= b_len; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= a_len; i++) {
        int diagonal = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= b_len; j++) {
            int cost = us_lower((unsigned char)a[i - 1]) != us_lower((unsigned char)b[j - 1]);
            int best = diagonal + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diagonal = row[j];
            row[j] = best;
        }
    }
    return row[b_len];
}

/* The option a mistyped name most likely meant, or -1. Close enough: one edit
 * in a short name, a third of a long one, so that "foo" does not suggest "fix". */
static int us_close_match(const char *name, size_t len)
{
    int best = -1, best_distance = INT_MAX;
    for (size_t i = 0; i < us_option_count; i++) {
        size_t opt_len = strlen(us_options[i].name);
        int d = us_distance(name, len, us_options[i].name, opt_len);
        int limit = (int)opt_len / 3 > 1 ? (int)opt_len / 3 : 1;
        if (d >= 0 && d <= limit && d < best_distance && (size_t)d < opt_len) {
            best = (int)i;
            best_distance = d;
        }
    }
    return best;
}

/* upper: the environment spells names in upper case, the file in lower case */
static int us_find_option(const char *name, size_t len, bool upper)
{
    for (size_t i = 0; i < us_option_count; i++) {
        const char *o = us_options[i].name;
        size_t k = 0;
        while (k < len && o[k] != '\0' && name[k] == (upper ? us_upper((unsigned char)o[k]) : o[k]))
            k++;
        if (k == len && o[k] == '\0')
            return (int)i;
    }
    return -1;
}

static bool us_is_known_var(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof us_known_vars / sizeof us_known_vars[0]; i++)
        if (strlen(us_known_vars[i]) == len && memcmp(us_known_vars[i], name, len) == 0)
            return true;
    return false;
}

/* The removal note of a removed option's name (file spelling, or the
 * environment's upper case), or NULL. */
static const char *us_removed_why(const char *name, size_t len, const char **removed_name)
{
    for (size_t i = 0; i < sizeof us_removed_options / sizeof us_removed_options[0]; i++)
        if (us_equal_nocase(name, len, us_removed_options[i].name)) {
            *removed_name = us_removed_options[i].name;
            return us_removed_options[i].why;
        }
    return NULL;
}

/* --- the sources ---------------------------------------------------------------- */

static void us_load_environment(struct us_load *load, struct us_config *out, enum us_option_source *sources,
                                char *const *environ_vars)
{
    const struct us_origin origin = { US_SRC_ENV, NULL, 0 };
    for (char *const *v = environ_vars; *v != NULL; v++) {
        const char *var = *v;
        const char *eq = strchr(var, '=');
        if (eq == NULL || strncmp(var, US_ENV_PREFIX, US_ENV_PREFIX_LEN) != 0)
            continue;
        const char *name = var + US_ENV_PREFIX_LEN;
        size_t name_len = (size_t)(eq - name);
        int index = us_find_option(name, name_len, true);
        if (index >= 0) {
            us_apply(load, out, sources, (size_t)index, eq + 1, strlen(eq + 1), &origin);
            continue;
        }
        if (us_is_known_var(var, (size_t)(eq - var)))
            continue;
        char shown[US_SHOWN_MAX + 8];
        us_format_text(var, (size_t)(eq - var), false, shown, sizeof shown);
        const char *removed, *why = us_removed_why(name, name_len, &removed);
        if (why != NULL) {
            us_load_warn(load, US_LOG_WARN, "%s: %s was removed: %s; ignored", shown, removed, why);
            continue;
        }
        int match = us_close_match(name, name_len);
        if (match < 0) {
            us_load_warn(load, US_LOG_WARN, "%s: unknown variable, ignored", shown);
        } else {
            char suggestion[US_NAME_MAX + US_ENV_PREFIX_LEN];
            us_env_name(us_options[match].name, suggestion, sizeof suggestion);
            us_load_warn(load, US_LOG_WARN, "%s: unknown variable, ignored; did you mean %s?", shown, suggestion);
        }
    }
}

static bool us_is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Lines of "key = value", "# comment" and blanks; a '#' after a blank ends
 * the value, so that "chunk_bytes = 8m  # big" reads 8m. */
static void us_load_file(struct us_load *load, struct us_config *out, enum us_option_source *sources, const char *text,
                         const char *file_name)
{
    struct us_origin origin = { US_SRC_FILE, file_name != NULL ? file_name : "config file", 0 };
    const char *line = text;
    while (*line != '\0') {
        const char *end = strchr(line, '\n');
        const char *next = end != NULL ? end + 1 : line + strlen(line);
        if (end == NULL)
            end = next;
        origin.line++;

        const char *p = line;
        while (p < end && us_is_blank(*p))
            p++;
        const char *e = end;
        while (e > p && us_is_blank(e[-1]))
            e--;
        line = next;
        if (p == e || *p == '#')
            continue;

        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *key_end = eq != NULL ? eq : p;
        while (key_end > p && us_is_blank(key_end[-1]))
            key_end--;
        if (eq == NULL || key_end == p) {
            char shown[US_SHOWN_MAX + 8];
            us_format_shown(p, (size_t)(e - p), shown, sizeof shown);
            us_load_warn(load, US_LOG_WARN, "%s:%u: %s: expected key = value; line ignored", origin.file_name,
                   origin.line, shown);
            continue;
        }
        const char *value = eq + 1;
        while (value < e && us_is_blank(*value))
            value++;
        const char *value_end = value;
        while (value_end < e && !(*value_end == '#' && value_end > value && us_is_blank(value_end[-1])))
            value_end++;
        while (value_end > value && us_is_blank(value_end[-1]))
            value_end--;

        size_t key_len = (size_t)(key_end - p);
        int index = us_find_option(p, key_len, false);
        if (index >= 0) {
            us_apply(load, out, sources, (size_t)index, value, (size_t)(value_end - value), &origin);
            continue;
        }
        /* "UNSTALL_SLOTS = 4" in a file: suggest the file's spelling */
        const char *name = p;
        size_t name_len = key_len;
        if (name_len > US_ENV_PREFIX_LEN && us_equal_nocase(name, US_ENV_PREFIX_LEN, US_ENV_PREFIX)) {
            name += US_ENV_PREFIX_LEN;
            name_len -= US_ENV_PREFIX_LEN;
        }
        char shown[US_SHOWN_MAX + 8];
        us_format_shown(p, key_len, shown, sizeof shown);
        const char *removed, *why = us_removed_why(name, name_len, &removed);
        if (why != NULL) {
            us_load_warn(load, US_LOG_WARN, "%s:%u: %s was removed: %s; ignored", origin.file_name, origin.line,
                         removed, why);
            continue;
        }
        int match = us_close_match(name, name_len);
        if (match < 0)
            us_load_warn(load, US_LOG_WARN, "%s:%u: unknown key %s, ignored", origin.file_name, origin.line, shown);
        else
            us_load_warn(load, US_LOG_WARN, "%s:%u: unknown key %s, ignored; did you mean %s?", origin.file_name,
                   origin.line, shown, us_options[match].name);
    }
}

static void us_config_load_pass(struct us_load *load, struct us_config *out, enum us_option_source *sources,
                                char *const *environ_vars, const char *file_text, const char *file_name)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < us_option_count; i++) {
        const char *def = us_options[i].default_text;
        /* a table bug, caught by test_config; say so rather than guess */
        if (us_parse_option(i, def, strlen(def), out) != US_PARSE_OK)
            us_load_warn(load, US_LOG_ERROR, "options.def: option %s: bad default \"%s\"", us_options[i].name, def);
        if (sources != NULL)
            sources[i] = US_SRC_DEFAULT;
    }
    if (file_text != NULL)
        us_load_file(load, out, sources, file_text, file_name);
    if (environ_vars != NULL)
        us_load_environment(load, out, sources, environ_vars);
}

void us_config_load(struct us_config *out, enum us_option_source *sources,
                    char *const *environ_vars, const char *file_text, const char *file_name)
{
    struct us_load load = { .quiet = true };
    us_config_load_pass(&load, out, NULL, environ_vars, file_text, file_name);
    load.quiet = false;
    load.max = out->log_max_lines;
    us_config_load_pass(&load, out, sources, environ_vars, file_text, file_name);
    if (load.suppressed > 0)
        us_log(US_LOG_WARN, "%lu more configuration warning%s suppressed (option log_max_lines)", load.suppressed,
               load.suppressed == 1 ? "" : "s");
}

/* --- the names of an ENUM option's values ------------------------------------------ */

/* Each option's range, copied so that it can be split in place: the choices
 * of an ENUM become NUL-terminated names, split once. */
#define US_OPTION(name, type, def, range, help) static char us_choices_##name[] = range;
#include "options.def"
#undef US_OPTION
static char *const us_choice_text[] = {
#define US_OPTION(name, type, def, range, help) us_choices_##name,
#include "options.def"
#undef US_OPTION
};
static pthread_once_t us_choices_once = PTHREAD_ONCE_INIT;

static void us_split_choices(void)
{
    for (size_t i = 0; i < us_option_count; i++)
        if (us_options[i].type == US_OPT_ENUM)
            for (char *c = us_choice_text[i]; *c != '\0'; c++)
                if (*c == '|')
                    *c = '\0';
}

const char *us_config_choice_name(enum us_option_id option, int value)
{
    if ((size_t)option >= us_option_count || us_options[option].type != US_OPT_ENUM || value < 0)
        return NULL;
    pthread_once(&us_choices_once, us_split_choices);
    /* the range's length bounds the walk: the split copy has as many bytes */
    const char *c = us_choice_text[option], *end = c + strlen(us_options[option].range);
    for (int i = 0; i < value && c < end; i++)
        c += strlen(c) + 1;
    return c < end ? c : NULL;
}

/* --- the process's configuration ------------------------------------------------- */

struct us_config us_config_loaded;
atomic_bool us_config_ready;
static enum us_option_source us_process_sources[sizeof us_options / sizeof us_options[0]];
static char us_process_file[US_CONFIG_STRING_MAX]; /* the UNSTALL_CONFIG read, for the dump */
static pthread_once_t us_config_once = PTHREAD_ONCE_INIT;
static _Thread_local bool us_config_loading_here;
static atomic_bool us_config_dump_pending;

/* The whole file, NUL-terminated, or NULL with one warning. */
static char *us_read_file(const char *path)
{
    const char *why = NULL;
    char *text = NULL;
    int err = 0;
    struct stat st;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only a regular
     * file is read, and that one in blocking mode again */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        err = errno;
        goto fail_open;
    }
    if (fstat(fd, &st) != 0) {
        err = errno;
        goto fail_read;
    }
    if (!S_ISREG(st.st_mode)) {
        why = "not a regular file";
        goto fail_read;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        err = errno;
        goto fail_read;
    }
    if ((unsigned long long)st.st_size > US_CONFIG_FILE_MAX) {
        why = "larger than 1 MiB";
        goto fail_read;
    }
    text = malloc((size_t)st.st_size + 1);
    if (text == NULL) {
        err = ENOMEM;
        goto fail_read;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err = errno;
            goto fail_free;
        }
        if (n == 0)
            break; /* shrank while read: take what there is */
        got += (size_t)n;
    }
    text[got] = '\0';
    close(fd);
    return text;

fail_free:
    free(text);
fail_read:
    close(fd);
fail_open:
    us_log(US_LOG_WARN, "UNSTALL_CONFIG=%s: cannot read it (%s); using the defaults and the environment",
           path, why != NULL ? why : strerror(err));
    return NULL;
}

static void us_load_process_config(void)
{
    us_config_loading_here = true;
    const char *path = getenv("UNSTALL_CONFIG");
    char *text = NULL;
    if (path != NULL && *path != '\0') {
        snprintf(us_process_file, sizeof us_process_file, "%s", path);
        text = us_read_file(path);
    }
    us_config_load(&us_config_loaded, us_process_sources, environ, text, path);
    free(text);
    if (us_config_loaded.verbose)
        atomic_store(&us_config_dump_pending, true);
    us_config_loading_here = false;
}

/* Every option's effective value and its source. Runs after the load, so the
 * lines reach the configured destination. */
static void us_config_dump(void)
{
    us_log(US_LOG_INFO, "configuration (file: %s):", us_process_file[0] != '\0' ? us_process_file : "none");
    for (size_t i = 0; i < us_option_count; i++) {
        char value[US_SHOWN_MAX + 8];
        us_format_value(&us_config_loaded, i, value, sizeof value);
        us_log(US_LOG_INFO, "  %-16s = %-10s (%s)", us_options[i].name, value,
               us_source_name(us_process_sources[i]));
    }
}

const struct us_config *us_config_slow(void)
{
    pthread_once(&us_config_once, us_load_process_config);
    if (__builtin_expect(atomic_load_explicit(&us_config_dump_pending, memory_order_relaxed), 0) &&
        atomic_exchange(&us_config_dump_pending, false))
        us_config_dump();
    /* from now on callers take the inline path; the dump (verbose) is
     * printed by the one caller that took it, before its first hook acts */
    if (!atomic_load_explicit(&us_config_dump_pending, memory_order_relaxed) && !us_config_loading_here)
        atomic_store_explicit(&us_config_ready, true, memory_order_release);
    return &us_config_loaded;
}

/* The log's view of the configuration (log.h): the log does not include
 * config.h, so that the configuration can warn through it. */
bool us_log_settings(struct us_log_settings *out)
{
    if (us_config_loading_here)
        return false;
    const struct us_config *cfg = us_config();
    enum us_log_level level = (enum us_log_level)cfg->log_level;
    if (cfg->verbose && level < US_LOG_INFO)
        level = US_LOG_INFO;
    *out = (struct us_log_settings){
        .level = level,
        .disable = cfg->disable,
        .max_lines = cfg->log_max_lines,
        .destination = cfg->log,
        .rank = us_config_rank(),
        .host = us_config_host(),
    };
    return true;
}

enum us_option_source us_config_source(size_t option_index)
{
    pthread_once(&us_config_once, us_load_process_config);
    return option_index < us_option_count ? us_process_sources[option_index] : US_SRC_DEFAULT;
}

void us_config_set(const struct us_config *cfg)
{
    pthread_once(&us_config_once, us_load_process_config);
    us_config_loaded = *cfg;
}

/* --- rank and host, for %r and %h in paths ---------------------------------------- */

/* Launchers name the process's place in the job in these variables; the
 * first that holds a decimal number wins. Global ranks come first, in the
 * order a nested launch sets them (torchrun's RANK inside an srun or mpirun
 * step is the worker's own); LOCAL_RANK, which repeats on every node, is the
 * last resort (add %h to the path where several nodes share a file system). */
static const char *const us_rank_vars[] = {
    "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "LOCAL_RANK",
};

static char us_rank_text[16];
static const char *us_rank_var;
static pthread_once_t us_rank_once = PTHREAD_ONCE_INIT;

/* Only a number: the text goes into file names. */
static void us_read_rank(void)
{
    for (size_t i = 0; i < sizeof us_rank_vars / sizeof us_rank_vars[0]; i++) {
        const char *v = getenv(us_rank_vars[i]);
        unsigned rank;
        if (v != NULL && us_parse_uint(v, &rank)) {
            snprintf(us_rank_text, sizeof us_rank_text, "%u", rank);
            us_rank_var = us_rank_vars[i];
            return;
        }
    }
}

const char *us_config_rank(void)
{
    pthread_once(&us_rank_once, us_read_rank);
    return us_rank_text[0] != '\0' ? us_rank_text : NULL;
}

const char *us_config_rank_source(void)
{
    pthread_once(&us_rank_once, us_read_rank);
    return us_rank_var;
}

static char us_host_text[US_CONFIG_HOST_MAX];
static pthread_once_t us_host_once = PTHREAD_ONCE_INIT;

/* The name goes into file names: letters, digits, '.', '-' and '_' are kept,
 * anything else (a '/' above all) becomes '_'. */
static void us_read_host(void)
{
    char name[256];
    if (gethostname(name, sizeof name) != 0 || name[0] == '\0')
        snprintf(name, sizeof name, "unknown-host");
    name[sizeof name - 1] = '\0';
    size_t n = 0;
    for (const char *c = name; *c != '\0' && n + 1 < sizeof us_host_text; c++) {
        bool safe = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || us_is_digit((unsigned char)*c) ||
                    *c == '.' || *c == '-' || *c == '_';
        us_host_text[n++] = safe ? *c : '_';
    }
    us_host_text[n] = '\0';
    if (strcmp(us_host_text, ".") == 0 || strcmp(us_host_text, "..") == 0)
        us_host_text[0] = '_';
}

const char *us_config_host(void)
{
    pthread_once(&us_host_once, us_read_host);
    return us_host_text;
}
