/* test_config.c - option parsers, the options table, the sources and their
 * order, and the warnings a bad value or an unknown name prints.
 *
 * Warnings are captured through the log's sink. The process configuration
 * (us_config) loads once per process, so the tests of it run in a forked
 * child that reports what it saw through a pipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "summary.h"

#include "config.h"
#include "log.h"

/* --- captured log lines ------------------------------------------------------ */

#define MAX_LINES 64
static char lines[MAX_LINES][1100];
static int line_count;

static void capture(enum us_log_level level, const char *line, void *arg)
{
    (void)level;
    (void)arg;
    if (line_count < MAX_LINES)
        snprintf(lines[line_count], sizeof lines[0], "%s", line);
    line_count++;
}

static int setup(void **state)
{
    (void)state;
    line_count = 0;
    us_log_set_sink(capture, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    us_log_set_sink(NULL, NULL);
    return 0;
}

/* The only captured line, which must be a warning ending with text. */
static void assert_one_warning(const char *expected_tail)
{
    char expected[1200];
    snprintf(expected, sizeof expected, "unstall[%ld]: warning: %s", (long)getpid(), expected_tail);
    assert_int_equal(line_count, 1);
    assert_string_equal(lines[0], expected);
}

static size_t option_index(const char *name)
{
    for (size_t i = 0; i < us_option_count; i++)
        if (strcmp(us_options[i].name, name) == 0)
            return i;
    fail_msg("no option %s", name);
    return 0;
}

/* Load from an environment (NULL-terminated list) and a file text. */
static void load(struct us_config *cfg, enum us_option_source *sources, char *const *env, const char *file)
{
    us_config_load(cfg, sources, env, file, file != NULL ? "t.conf" : NULL);
}

#define MiB ((size_t)1 << 20)

/* --- parsers ---------------------------------------------------------------------- */

static void test_config_parse_bool(void **state)
{
    (void)state;
    static const char *const yes[] = { "1", "true", "TRUE", "yes", "Yes", "on", "ON" };
    static const char *const no[] = { "0", "false", "False", "no", "NO", "off", "Off" };
    static const char *const bad[] = { "", "2", "tru", "yes ", " 1", "01", "y", "enable", "onn" };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        bool b = false;
        assert_true(us_parse_bool(yes[i], &b));
        assert_true(b);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        bool b = true;
        assert_true(us_parse_bool(no[i], &b));
        assert_false(b);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool t = true, f = false;
        assert_false(us_parse_bool(bad[i], &t));
        assert_false(us_parse_bool(bad[i], &f));
        assert_true(t); /* untouched */
        assert_false(f);
    }
    bool b = true;
    assert_false(us_parse_bool(NULL, &b));
}

static void test_config_parse_size_accepts(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t value;
    } good[] = {
        { "0", 0 },
        { "4096", 4096 },
        { "4096b", 4096 },
        { "64k", 64 << 10 },
        { "64K", 64 << 10 },
        { "8m", 8 * MiB },
        { "8M", 8 * MiB },
        { "8MiB", 8 * MiB },
        { "8mib", 8 * MiB },
        { "8mb", 8 * MiB },
        { "8MB", 8 * MiB },
        { "1g", (size_t)1 << 30 },
        { "1t", (size_t)1 << 40 },
        { "1T", (size_t)1 << 40 },
        { "16777215t", (((size_t)1 << 24) - 1) << 40 },
        { "18446744073709551615", SIZE_MAX },
        { "007", 7 },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t v = 12345;
        assert_true(us_parse_size(good[i].text, &v));
        assert_int_equal(v, good[i].value);
    }
}

static void test_config_parse_size_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",        "-1",     "+1",     " 8m",  "8m ",  "8x",   "8 m",  "m",
        "8kk",     "8ib",    "8bi",    "8mbb", "0x10", "1.5m", "1e6",  "8mi",
        "99999999999999999999t",         /* digits overflow */
        "18446744073709551616",          /* 2^64 */
        "16777216t",                     /* 2^64 through the suffix */
        "17179869184g",                  /* 2^64 through the suffix */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 12345;
        if (us_parse_size(bad[i], &v))
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(v, 12345); /* untouched */
    }
    size_t v = 1;
    assert_false(us_parse_size(NULL, &v));
}

static void test_config_parse_uint(void **state)
{
    (void)state;
    unsigned v = 7;
    assert_true(us_parse_uint("0", &v));
    assert_int_equal(v, 0);
    assert_true(us_parse_uint("4", &v));
    assert_int_equal(v, 4);
    assert_true(us_parse_uint("4294967295", &v));
    assert_int_equal(v, 4294967295u);
    static const char *const bad[] = { "", "4294967296", "99999999999999999999", "-1", "+1",
                                       "1k", " 1", "1 ", "0x1", "1.0" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        if (us_parse_uint(bad[i], &v))
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(v, 7);
    }
    assert_false(us_parse_uint(NULL, &v));
}

static void test_config_parse_enum(void **state)
{
    (void)state;
    const char *choices = "off|report|warn|strict";
    int v = -1;
    assert_true(us_parse_enum("off", choices, &v));
    assert_int_equal(v, 0);
    assert_true(us_parse_enum("report", choices, &v));
    assert_int_equal(v, 1);
    assert_true(us_parse_enum("STRICT", choices, &v));
    assert_int_equal(v, 3);
    assert_true(us_parse_enum("only", "only", &v));
    assert_int_equal(v, 0);
    static const char *const bad[] = { "", "of", "offf", "report|warn", "|", "warn ", "strict|" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = -1;
        if (us_parse_enum(bad[i], choices, &v))
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(v, -1);
    }
    assert_false(us_parse_enum(NULL, choices, &v));
    assert_false(us_parse_enum("off", NULL, &v));
}

static void test_config_parse_range(void **state)
{
    (void)state;
    size_t lo = 1, hi = 1;
    assert_true(us_parse_range("64k..1g", &lo, &hi));
    assert_int_equal(lo, 64 << 10);
    assert_int_equal(hi, (size_t)1 << 30);
    assert_true(us_parse_range("0..100000000", &lo, &hi));
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 100000000);
    assert_true(us_parse_range("2..2", &lo, &hi));
    static const char *const bad[] = { "", "64k", "..1g", "64k..", "a..b", "1g..64k", "1...2", "off|on" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lo = hi = 9;
        if (us_parse_range(bad[i], &lo, &hi))
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(lo, 9);
        assert_int_equal(hi, 9);
    }
}

/* --- the table ----------------------------------------------------------------------- */

/* Every default goes through its own parser and lies in its own range, so
 * that a typo in options.def fails here rather than at a user's start. */
static void test_config_defaults_round_trip(void **state)
{
    (void)state;
    assert_true(us_option_count > 0);
    for (size_t i = 0; i < us_option_count; i++) {
        const struct us_option_info *o = &us_options[i];
        size_t lo, hi, sz;
        unsigned u;
        int e;
        bool b;
        assert_true(strlen(o->name) > 0 && strlen(o->help) > 0);
        switch (o->type) {
        case US_OPT_BOOL:
            assert_true(us_parse_bool(o->default_text, &b));
            assert_string_equal(o->range, "");
            break;
        case US_OPT_SIZE:
            assert_true(us_parse_range(o->range, &lo, &hi));
            assert_true(us_parse_size(o->default_text, &sz));
            assert_in_range(sz, lo, hi);
            break;
        case US_OPT_UINT:
            assert_true(us_parse_range(o->range, &lo, &hi));
            assert_true(hi <= UINT32_MAX);
            assert_true(us_parse_uint(o->default_text, &u));
            assert_in_range(u, lo, hi);
            break;
        case US_OPT_ENUM:
            assert_true(us_parse_enum(o->default_text, o->range, &e));
            break;
        case US_OPT_STRING:
            assert_true(strlen(o->default_text) < US_CONFIG_STRING_MAX);
            assert_string_equal(o->range, "");
            break;
        }
        /* names: lower case and '_', so UNSTALL_<NAME> is unambiguous */
        for (const char *c = o->name; *c != '\0'; c++)
            assert_true((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_');
        for (size_t j = i + 1; j < us_option_count; j++)
            assert_string_not_equal(o->name, us_options[j].name);
    }
}

/* Defaults alone: no warning, every source default, the values of the table. */
static void test_config_defaults_load(void **state)
{
    (void)state;
    struct us_config cfg;
    enum us_option_source src[64];
    assert_true(us_option_count <= 64);
    load(&cfg, src, NULL, NULL);
    assert_int_equal(line_count, 0);
    for (size_t i = 0; i < us_option_count; i++)
        assert_int_equal(src[i], US_SRC_DEFAULT);
    assert_false(cfg.disable);
    assert_int_equal(cfg.mode, US_MODE_REPORT);
    assert_true(cfg.fix);
    assert_int_equal(cfg.chunk_bytes, 8 * MiB);
    assert_int_equal(cfg.peer_min_bytes, 256 << 10);
    assert_int_equal(cfg.slots, 4);
    assert_int_equal(cfg.strict_severity, US_SEVERITY_MEDIUM);
    assert_int_equal(cfg.strict_action, US_STRICT_ERROR);
    assert_int_equal(cfg.log_level, US_LOG_WARN);
    assert_string_equal(cfg.log, "stderr");
    assert_string_equal(cfg.allow, "");
    assert_int_equal(cfg.log_max_lines, 1000);
}

/* The ENUM choices list the C enums in their order. */
static void test_config_enum_choices_match_enums(void **state)
{
    (void)state;
    int v;
    const char *mode = us_options[option_index("mode")].range;
    assert_true(us_parse_enum("off", mode, &v) && v == US_MODE_OFF);
    assert_true(us_parse_enum("report", mode, &v) && v == US_MODE_REPORT);
    assert_true(us_parse_enum("warn", mode, &v) && v == US_MODE_WARN);
    assert_true(us_parse_enum("strict", mode, &v) && v == US_MODE_STRICT);
    const char *sev = us_options[option_index("strict_severity")].range;
    assert_true(us_parse_enum("low", sev, &v) && v == US_SEVERITY_LOW);
    assert_true(us_parse_enum("high", sev, &v) && v == US_SEVERITY_HIGH);
    const char *act = us_options[option_index("strict_action")].range;
    assert_true(us_parse_enum("error", act, &v) && v == US_STRICT_ERROR);
    assert_true(us_parse_enum("abort", act, &v) && v == US_STRICT_ABORT);
    const char *lvl = us_options[option_index("log_level")].range;
    assert_true(us_parse_enum("error", lvl, &v) && v == US_LOG_ERROR);
    assert_true(us_parse_enum("warn", lvl, &v) && v == US_LOG_WARN);
    assert_true(us_parse_enum("info", lvl, &v) && v == US_LOG_INFO);
    assert_true(us_parse_enum("debug", lvl, &v) && v == US_LOG_DEBUG);
}

/* The names of an ENUM's values are read off the table (the report's mode,
 * the rules' severities): each value's name, nothing past the last. */
static void test_config_choice_names_come_from_the_table(void **state)
{
    (void)state;
    assert_int_equal(option_index("mode"), US_OPTION_ID_mode);
    assert_string_equal(us_config_choice_name(US_OPTION_ID_mode, US_MODE_OFF), "off");
    assert_string_equal(us_config_choice_name(US_OPTION_ID_mode, US_MODE_WARN), "warn");
    assert_string_equal(us_config_choice_name(US_OPTION_ID_mode, US_MODE_STRICT), "strict");
    assert_null(us_config_choice_name(US_OPTION_ID_mode, US_MODE_STRICT + 1));
    assert_null(us_config_choice_name(US_OPTION_ID_mode, -1));
    assert_string_equal(us_config_choice_name(US_OPTION_ID_strict_severity, US_SEVERITY_MEDIUM), "medium");
    assert_string_equal(us_config_choice_name(US_OPTION_ID_log_level, US_LOG_DEBUG), "debug");
    assert_null(us_config_choice_name(US_OPTION_ID_log_max_lines, 0)); /* no ENUM */
    /* the table itself is left as it was */
    assert_string_equal(us_options[US_OPTION_ID_mode].range, "off|report|warn|strict");
}

/* --- sources and their order -------------------------------------------------------- */

static void test_config_file_overrides_default(void **state)
{
    (void)state;
    struct us_config cfg;
    enum us_option_source src[64];
    load(&cfg, src, NULL, "chunk_bytes = 16m\nmode = strict\nfix = off\n");
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.chunk_bytes, 16 * MiB);
    assert_int_equal(src[option_index("chunk_bytes")], US_SRC_FILE);
    assert_int_equal(cfg.mode, US_MODE_STRICT);
    assert_false(cfg.fix);
    assert_int_equal(cfg.slots, 4);
    assert_int_equal(src[option_index("slots")], US_SRC_DEFAULT);
}

static void test_config_env_overrides_file(void **state)
{
    (void)state;
    struct us_config cfg;
    enum us_option_source src[64];
    char *env[] = { "PATH=/bin", "UNSTALL_CHUNK_BYTES=32m", "UNSTALL_LOG=/tmp/u-%p.log", NULL };
    load(&cfg, src, env, "chunk_bytes = 16m\nslots = 8\n");
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.chunk_bytes, 32 * MiB);
    assert_int_equal(src[option_index("chunk_bytes")], US_SRC_ENV);
    assert_int_equal(cfg.slots, 8);
    assert_int_equal(src[option_index("slots")], US_SRC_FILE);
    assert_string_equal(cfg.log, "/tmp/u-%p.log");
    assert_int_equal(src[option_index("log")], US_SRC_ENV);
}

/* A bad value in the environment keeps what the file said, with one warning. */
static void test_config_bad_env_keeps_file_value(void **state)
{
    (void)state;
    struct us_config cfg;
    enum us_option_source src[64];
    char *env[] = { "UNSTALL_CHUNK_BYTES=8x", NULL };
    load(&cfg, src, env, "chunk_bytes = 16m\n");
    assert_int_equal(cfg.chunk_bytes, 16 * MiB);
    assert_int_equal(src[option_index("chunk_bytes")], US_SRC_FILE);
    assert_one_warning("UNSTALL_CHUNK_BYTES=\"8x\": not a size (expected e.g. 8m, 64k); keeping 16m");
}

static void test_config_bad_env_keeps_default(void **state)
{
    (void)state;
    struct us_config cfg;
    enum us_option_source src[64];
    char *env[] = { "UNSTALL_CHUNK_BYTES=8x", NULL };
    load(&cfg, src, env, NULL);
    assert_int_equal(cfg.chunk_bytes, 8 * MiB);
    assert_int_equal(src[option_index("chunk_bytes")], US_SRC_DEFAULT);
    assert_one_warning("UNSTALL_CHUNK_BYTES=\"8x\": not a size (expected e.g. 8m, 64k); keeping 8m");
}

/* One bad value per variable; each warning names its own key and kept value. */
static void test_config_bad_values_each_type(void **state)
{
    (void)state;
    static const struct {
        const char *var;
        const char *warning;
    } cases[] = {
        { "UNSTALL_CHUNK_BYTES=2g", "UNSTALL_CHUNK_BYTES=\"2g\": out of range 64k..1g; keeping 8m" },
        { "UNSTALL_CHUNK_BYTES=32k", "UNSTALL_CHUNK_BYTES=\"32k\": out of range 64k..1g; keeping 8m" },
        { "UNSTALL_CHUNK_BYTES=", "UNSTALL_CHUNK_BYTES=\"\": not a size (expected e.g. 8m, 64k); keeping 8m" },
        { "UNSTALL_PINNED_MAX=-1", "UNSTALL_PINNED_MAX=\"-1\": not a size (expected e.g. 8m, 64k); keeping 1g" },
        { "UNSTALL_SLOTS=1", "UNSTALL_SLOTS=\"1\": out of range 2..64; keeping 4" },
        { "UNSTALL_SLOTS=65", "UNSTALL_SLOTS=\"65\": out of range 2..64; keeping 4" },
        { "UNSTALL_SLOTS=-4", "UNSTALL_SLOTS=\"-4\": not an unsigned decimal number; keeping 4" },
        { "UNSTALL_FIX=maybe",
          "UNSTALL_FIX=\"maybe\": not a boolean (expected 1/0, true/false, yes/no, on/off); keeping 1" },
        { "UNSTALL_MODE=loud", "UNSTALL_MODE=\"loud\": not one of off|report|warn|strict; keeping report" },
        { "UNSTALL_MODE=a\nb", "UNSTALL_MODE=\"a?b\": not one of off|report|warn|strict; keeping report" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct us_config cfg;
        char *env[] = { (char *)cases[i].var, NULL };
        line_count = 0;
        load(&cfg, NULL, env, NULL);
        assert_one_warning(cases[i].warning);
        assert_int_equal(cfg.chunk_bytes, 8 * MiB);
        assert_int_equal(cfg.slots, 4);
        assert_true(cfg.fix);
        assert_int_equal(cfg.mode, US_MODE_REPORT);
        assert_int_equal(cfg.pinned_max, (size_t)1 << 30);
    }
}

/* The ends of a range are in it; case does not matter in values. */
static void test_config_range_ends_accepted(void **state)
{
    (void)state;
    struct us_config cfg;
    char *low[] = { "UNSTALL_CHUNK_BYTES=64K", "UNSTALL_SLOTS=2", "UNSTALL_MODE=Strict", "UNSTALL_FIX=OFF", NULL };
    load(&cfg, NULL, low, NULL);
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.chunk_bytes, 64 << 10);
    assert_int_equal(cfg.slots, 2);
    assert_int_equal(cfg.mode, US_MODE_STRICT);
    assert_false(cfg.fix);
    char *high[] = { "UNSTALL_CHUNK_BYTES=1GiB", "UNSTALL_SLOTS=64", "UNSTALL_LOG_MAX_LINES=0", NULL };
    load(&cfg, NULL, high, NULL);
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.chunk_bytes, (size_t)1 << 30);
    assert_int_equal(cfg.slots, 64);
    assert_int_equal(cfg.log_max_lines, 0);
}

static void test_config_string_length(void **state)
{
    (void)state;
    static char var[400];
    char *env[] = { var, NULL };
    struct us_config cfg;
    /* 255 characters fit */
    int n = snprintf(var, sizeof var, "UNSTALL_REPORT=");
    memset(var + n, 'a', 255);
    var[n + 255] = '\0';
    load(&cfg, NULL, env, NULL);
    assert_int_equal(line_count, 0);
    assert_int_equal(strlen(cfg.report), 255);
    /* 256 do not: one warning, the default kept, the value shown cut */
    n = snprintf(var, sizeof var, "UNSTALL_LOG=");
    memset(var + n, 'b', 256);
    var[n + 256] = '\0';
    load(&cfg, NULL, env, NULL);
    assert_string_equal(cfg.log, "stderr");
    assert_int_equal(line_count, 1);
    assert_non_null(strstr(lines[0], "UNSTALL_LOG=\"bbbb"));
    assert_non_null(strstr(lines[0], "bbb...\": longer than 255 characters; keeping \"stderr\""));
    /* empty is a string like any other */
    line_count = 0;
    char *empty[] = { "UNSTALL_LOG=", NULL };
    load(&cfg, NULL, empty, NULL);
    assert_int_equal(line_count, 0);
    assert_string_equal(cfg.log, "");
}

/* A removed option (d2h_deferred) set in the environment or the file says
 * that it was removed and why, and changes nothing. */
static void test_config_removed_option_says_why(void **state)
{
    (void)state;
    struct us_config cfg;
    char *env[] = { "UNSTALL_D2H_DEFERRED=1", NULL };
    load(&cfg, NULL, env, NULL);
    assert_int_equal(line_count, 1);
    assert_non_null(strstr(lines[0], "UNSTALL_D2H_DEFERRED: d2h_deferred was removed: "));
    assert_non_null(strstr(lines[0], "stale bytes"));
    line_count = 0;
    load(&cfg, NULL, NULL, "d2h_deferred = 1\n");
    assert_int_equal(line_count, 1);
    assert_non_null(strstr(lines[0], ":1: d2h_deferred was removed: "));
}

/* --- the file format -------------------------------------------------------------------- */

static void test_config_file_syntax(void **state)
{
    (void)state;
    struct us_config cfg;
    enum us_option_source src[64];
    load(&cfg, src, NULL,
         "# a comment\n"
         "\n"
         "   \t\n"
         "  # an indented comment\n"
         "chunk_bytes=16m\n"
         "  slots   =   8   # a trailing comment\r\n"
         "log = /tmp/a#b.log\n"
         "mode = warn"); /* no newline at the end */
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.chunk_bytes, 16 * MiB);
    assert_int_equal(cfg.slots, 8);
    assert_string_equal(cfg.log, "/tmp/a#b.log"); /* '#' inside a value is kept */
    assert_int_equal(cfg.mode, US_MODE_WARN);
    assert_int_equal(src[option_index("mode")], US_SRC_FILE);
}

/* A later line wins; a bad later line keeps the earlier one. */
static void test_config_file_repeated_key(void **state)
{
    (void)state;
    struct us_config cfg;
    load(&cfg, NULL, NULL, "slots = 8\nslots = 16\n");
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.slots, 16);
    load(&cfg, NULL, NULL, "slots = 8\n\nslots = lots\n");
    assert_int_equal(cfg.slots, 8);
    assert_one_warning("t.conf:3: slots=\"lots\": not an unsigned decimal number; keeping 8");
}

static void test_config_file_bad_lines(void **state)
{
    (void)state;
    struct us_config cfg;
    load(&cfg, NULL, NULL, "chunk_bytes 16m\n");
    assert_one_warning("t.conf:1: \"chunk_bytes 16m\": expected key = value; line ignored");
    assert_int_equal(cfg.chunk_bytes, 8 * MiB);
    line_count = 0;
    load(&cfg, NULL, NULL, "= 16m\n");
    assert_one_warning("t.conf:1: \"= 16m\": expected key = value; line ignored");
    line_count = 0;
    load(&cfg, NULL, NULL, "chunk_bytes = 8m # big\nchunk_bytes = 2g\n");
    assert_one_warning("t.conf:2: chunk_bytes=\"2g\": out of range 64k..1g; keeping 8m");
}

/* A 1 MB garbage config once printed 262,032 lines. Its warnings are
 * bounded by log_max_lines (as loaded), the last line counting the rest. */
static void test_config_warnings_bounded_by_log_max_lines(void **state)
{
    (void)state;
    static char garbage[300 * 5 + 1];
    for (int i = 0; i < 300; i++)
        memcpy(garbage + 5 * i, "junk\n", 5);
    char *const env[] = { "UNSTALL_LOG_MAX_LINES=10", NULL };
    struct us_config cfg;
    load(&cfg, NULL, env, garbage);
    assert_int_equal(cfg.log_max_lines, 10);
    assert_int_equal(line_count, 10);
    for (int i = 0; i < 9; i++)
        assert_non_null(strstr(lines[i], "\"junk\": expected key = value; line ignored"));
    char expected[200];
    snprintf(expected, sizeof expected,
             "unstall[%ld]: warning: 291 more configuration warnings suppressed (option log_max_lines)",
             (long)getpid());
    assert_string_equal(lines[9], expected);

    /* the bound from the file itself, and exactly at the bound: no summary */
    line_count = 0;
    load(&cfg, NULL, NULL, "log_max_lines = 3\njunk\njunk\n");
    assert_int_equal(line_count, 2);
    line_count = 0;
    load(&cfg, NULL, NULL, "log_max_lines = 3\njunk\njunk\njunk\n");
    assert_int_equal(line_count, 3);
    assert_null(strstr(lines[2], "suppressed"));
    line_count = 0;
    load(&cfg, NULL, NULL, "log_max_lines = 1\njunk\njunk\n");
    assert_int_equal(line_count, 1);
    assert_non_null(strstr(lines[0], "2 more configuration warnings suppressed"));

    /* 0: no bound */
    char *const unbounded[] = { "UNSTALL_LOG_MAX_LINES=0", NULL };
    line_count = 0;
    load(&cfg, NULL, unbounded, garbage);
    assert_int_equal(line_count, 300);
}

static void test_config_file_unknown_keys(void **state)
{
    (void)state;
    struct us_config cfg;
    load(&cfg, NULL, NULL, "chunk_byte = 16m\n");
    assert_one_warning("t.conf:1: unknown key \"chunk_byte\", ignored; did you mean chunk_bytes?");
    assert_int_equal(cfg.chunk_bytes, 8 * MiB);
    line_count = 0;
    load(&cfg, NULL, NULL, "\nUNSTALL_SLOTS = 8\n");
    assert_one_warning("t.conf:2: unknown key \"UNSTALL_SLOTS\", ignored; did you mean slots?");
    line_count = 0;
    load(&cfg, NULL, NULL, "banana = 1\n");
    assert_one_warning("t.conf:1: unknown key \"banana\", ignored");
}

/* --- names in the environment ------------------------------------------------------------ */

static void test_config_env_unknown_close_match(void **state)
{
    (void)state;
    struct us_config cfg;
    char *env[] = { "UNSTALL_CHUNK_BYTE=1m", NULL };
    load(&cfg, NULL, env, NULL);
    assert_one_warning("UNSTALL_CHUNK_BYTE: unknown variable, ignored; did you mean UNSTALL_CHUNK_BYTES?");
    assert_int_equal(cfg.chunk_bytes, 8 * MiB);

    static const struct {
        const char *var, *match;
    } cases[] = {
        { "UNSTALL_chunk_bytes=1m", "UNSTALL_CHUNK_BYTES" }, /* names are upper case */
        { "UNSTALL_LOGLEVEL=info", "UNSTALL_LOG_LEVEL" },
        { "UNSTALL_SLOT=8", "UNSTALL_SLOTS" },
        { "UNSTALL_FIX_PEERS=0", "UNSTALL_FIX_PEER" },
        { "UNSTALL_VERBSE=1", "UNSTALL_VERBOSE" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *one[] = { (char *)cases[i].var, NULL };
        char expected[200];
        const char *eq = strchr(cases[i].var, '=');
        snprintf(expected, sizeof expected, "%.*s: unknown variable, ignored; did you mean %s?",
                 (int)(eq - cases[i].var), cases[i].var, cases[i].match);
        line_count = 0;
        load(&cfg, NULL, one, NULL);
        assert_one_warning(expected);
    }
}

static void test_config_env_unknown_no_match(void **state)
{
    (void)state;
    struct us_config cfg;
    static const char *const vars[] = { "UNSTALL_FOO=1", "UNSTALL_=1", "UNSTALL_LOGGING_IS_FUN=1" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        char *env[] = { (char *)vars[i], NULL };
        char expected[200];
        snprintf(expected, sizeof expected, "%.*s: unknown variable, ignored",
                 (int)(strchr(vars[i], '=') - vars[i]), vars[i]);
        line_count = 0;
        load(&cfg, NULL, env, NULL);
        assert_one_warning(expected);
    }
}

/* Project variables that are not options, and other programs' variables. */
static void test_config_env_known_and_foreign_are_quiet(void **state)
{
    (void)state;
    struct us_config cfg;
    char *env[] = { "UNSTALL_CONFIG=/etc/unstall.conf", "UNSTALL_PRELOADED=1", "UNSTALL_LIB=/x.so", "UNSTALLED=1",
                    "unstall_slots=8",
                    "LD_PRELOAD=libunstall.so", "NOEQUALS", "RANK=2", NULL };
    load(&cfg, NULL, env, NULL);
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.slots, 4);
}

/* --- the shipped config files ---------------------------------------------------------- */

/* Read a file of the repository (tests run from its root, as make does). */
static void read_repo_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot open %s: run the tests from the repository root", path);
    size_t n = fread(buf, 1, size - 1, f);
    assert_true(n < size - 1); /* the whole file */
    buf[n] = '\0';
    fclose(f);
}

static void test_config_profiles_load_cleanly(void **state)
{
    (void)state;
    static char text[16384];
    struct us_config cfg;
    enum us_option_source src[64];

    read_repo_file("config/strict.conf", text, sizeof text);
    us_config_load(&cfg, src, NULL, text, "config/strict.conf");
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.mode, US_MODE_STRICT);
    assert_int_equal(cfg.strict_severity, US_SEVERITY_MEDIUM);
    assert_int_equal(cfg.log_level, US_LOG_WARN);
    assert_int_equal(src[option_index("mode")], US_SRC_FILE);

    read_repo_file("config/pytorch.conf", text, sizeof text);
    us_config_load(&cfg, src, NULL, text, "config/pytorch.conf");
    assert_int_equal(line_count, 0);
    assert_int_equal(cfg.mode, US_MODE_REPORT);
    assert_string_equal(cfg.report, "unstall-%p-%r.json");
    assert_true(cfg.python_frames);
    assert_int_equal(src[option_index("report")], US_SRC_FILE);
    /* only what is safe for every correct torch program: copies are still
     * rewritten with the native call's promises, no call is failed */
    assert_true(cfg.fix && cfg.fix_h2d && cfg.fix_d2h);
    assert_int_equal(cfg.d2h_min_bytes, 0);
    assert_int_equal(src[option_index("fix_d2h")], US_SRC_DEFAULT);
    /* and each setting is justified: a comment right above every key line */
    bool comment_above = false;
    int keys = 0;
    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        if (len > 0 && line[0] != '#') {
            assert_true(comment_above);
            keys++;
        }
        comment_above = len > 0 && line[0] == '#';
        line += len + (end != NULL);
    }
    assert_int_equal(keys, 3);
}

/* config/unstall.conf (tools/gen-docs) with every key uncommented is every
 * option set to its default, without a warning. */
static void test_config_generated_file_is_the_defaults(void **state)
{
    (void)state;
    static char text[32768], uncommented[32768];
    read_repo_file("config/unstall.conf", text, sizeof text);
    size_t o = 0;
    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) + 1 : strlen(line);
        for (size_t i = 0; i < us_option_count; i++) {
            char key[80];
            snprintf(key, sizeof key, "# %s =", us_options[i].name);
            if (strncmp(line, key, strlen(key)) == 0) {
                line += 2;
                len -= 2;
                break;
            }
        }
        memcpy(uncommented + o, line, len);
        o += len;
        line += len;
    }
    uncommented[o] = '\0';

    struct us_config from_file, defaults;
    enum us_option_source src[64];
    us_config_load(&defaults, NULL, NULL, NULL, NULL);
    us_config_load(&from_file, src, NULL, uncommented, "config/unstall.conf");
    assert_int_equal(line_count, 0);
    for (size_t i = 0; i < us_option_count; i++)
        if (src[i] != US_SRC_FILE)
            fail_msg("config/unstall.conf does not set %s", us_options[i].name);
    assert_memory_equal(&from_file, &defaults, sizeof defaults);
}

/* --- the process configuration, in a child ------------------------------------------------- */

/* Run body in a forked child with the sink capturing; return what it wrote:
 * the captured lines, then the body's own report. */
static void run_child(void (*body)(FILE *out), char *result, size_t result_size)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        FILE *out = fdopen(fds[1], "w");
        line_count = 0;
        us_log_set_sink(capture, NULL);
        body(out);
        for (int i = 0; i < line_count && i < MAX_LINES; i++)
            fprintf(out, "%s\n", lines[i]);
        fclose(out);
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t n;
    while ((n = read(fds[0], result + got, result_size - 1 - got)) > 0)
        got += (size_t)n;
    result[got] = '\0';
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int count_substr(const char *text, const char *sub)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, sub)) != NULL; p += strlen(sub))
        n++;
    return n;
}

static char config_path[64];

static void process_body(FILE *out)
{
    setenv("UNSTALL_CONFIG", config_path, 1);
    setenv("UNSTALL_SLOTS", "6", 1);
    setenv("UNSTALL_VERBOSE", "1", 1);
    setenv("UNSTALL_CHUNK_BYTE", "1m", 1);
    setenv("UNSTALL_PRELOADED", "1", 1);
    setenv("LOCAL_RANK", "5", 1);
    setenv("RANK", "3", 1);
    const struct us_config *cfg = us_config();
    fprintf(out, "#chunk_bytes=%zu source=%d\n", cfg->chunk_bytes, us_config_source(option_index("chunk_bytes")));
    fprintf(out, "#slots=%u source=%d\n", cfg->slots, us_config_source(option_index("slots")));
    fprintf(out, "#mode=%d source=%d\n", cfg->mode, us_config_source(option_index("mode")));
    fprintf(out, "#rank=%s\n", us_config_rank() != NULL ? us_config_rank() : "(null)");
    /* the dump is printed once, by the first call after the load */
    int before = line_count;
    us_config();
    fprintf(out, "#again=%d\n", line_count - before);
}

static void test_config_process_sources(void **state)
{
    (void)state;
    snprintf(config_path, sizeof config_path, "/tmp/test_config.%ld.conf", (long)getpid());
    FILE *f = fopen(config_path, "w");
    assert_non_null(f);
    fputs("# test\nchunk_bytes = 16m\nslots = 8\n", f);
    fclose(f);
    static char result[16384];
    run_child(process_body, result, sizeof result);
    unlink(config_path);

    char expect[256];
    snprintf(expect, sizeof expect, "#chunk_bytes=%zu source=%d\n", 16 * MiB, US_SRC_FILE);
    assert_non_null(strstr(result, expect));
    snprintf(expect, sizeof expect, "#slots=6 source=%d\n", US_SRC_ENV);
    assert_non_null(strstr(result, expect));
    snprintf(expect, sizeof expect, "#mode=%d source=%d\n", US_MODE_REPORT, US_SRC_DEFAULT);
    assert_non_null(strstr(result, expect));
    assert_non_null(strstr(result, "#rank=3\n"));
    assert_non_null(strstr(result, "#again=0\n"));
    /* one warning, for the unknown variable only */
    assert_int_equal(count_substr(result, "warning: "), 1);
    assert_int_equal(count_substr(result, "warning: UNSTALL_CHUNK_BYTE: unknown variable, ignored; did you mean "
                                          "UNSTALL_CHUNK_BYTES?\n"), 1);
    /* verbose: every option once, with its value and source */
    snprintf(expect, sizeof expect, "configuration (file: %s):\n", config_path);
    assert_non_null(strstr(result, expect));
    for (size_t i = 0; i < us_option_count; i++) {
        char name[64];
        snprintf(name, sizeof name, "]:   %-16s = ", us_options[i].name);
        assert_int_equal(count_substr(result, name), 1);
    }
    assert_non_null(strstr(result, "chunk_bytes      = 16m        (config file)\n"));
    assert_non_null(strstr(result, "slots            = 6          (environment)\n"));
    assert_non_null(strstr(result, "mode             = report     (default)\n"));
    assert_non_null(strstr(result, "log              = \"stderr\"   (default)\n"));
}

static void missing_file_body(FILE *out)
{
    setenv("UNSTALL_CONFIG", "/nonexistent/unstall.conf", 1);
    setenv("UNSTALL_MODE", "warn", 1);
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    const struct us_config *cfg = us_config();
    fprintf(out, "#mode=%d verbose=%d\n", cfg->mode, cfg->verbose);
    fprintf(out, "#rank=%s\n", us_config_rank() != NULL ? us_config_rank() : "(null)");
}

static void test_config_process_missing_file(void **state)
{
    (void)state;
    static char result[4096];
    run_child(missing_file_body, result, sizeof result);
    char expect[128];
    snprintf(expect, sizeof expect, "#mode=%d verbose=0\n", US_MODE_WARN);
    assert_non_null(strstr(result, expect));
    assert_non_null(strstr(result, "#rank=(null)\n"));
    assert_int_equal(count_substr(result, "unstall["), 1);
    assert_non_null(strstr(result, "warning: UNSTALL_CONFIG=/nonexistent/unstall.conf: cannot read it (No such "
                                   "file or directory); using the defaults and the environment\n"));
}

static void bad_rank_body(FILE *out)
{
    setenv("RANK", "../x", 1);
    setenv("LOCAL_RANK", "7", 1);
    fprintf(out, "#rank=%s\n", us_config_rank() != NULL ? us_config_rank() : "(null)");
}

/* A rank goes into file names: only a number is taken, else the next. */
static void test_config_rank_is_a_number(void **state)
{
    (void)state;
    static char result[4096];
    run_child(bad_rank_body, result, sizeof result);
    assert_non_null(strstr(result, "#rank=7\n"));
}

/* Launchers' rank variables: global ranks first (RANK, SLURM_PROCID,
 * OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK), LOCAL_RANK last. */
static const char *const rank_vars[] = { "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                         "LOCAL_RANK" };
static const char *rank_case_env; /* "VAR=value VAR=value" set in the child */

static void rank_case_body(FILE *out)
{
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++)
        unsetenv(rank_vars[i]);
    char env[256];
    snprintf(env, sizeof env, "%s", rank_case_env);
    for (char *save = NULL, *kv = strtok_r(env, " ", &save); kv != NULL; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        setenv(kv, eq + 1, 1);
    }
    fprintf(out, "#rank=%s from=%s\n", us_config_rank() != NULL ? us_config_rank() : "(null)",
            us_config_rank_source() != NULL ? us_config_rank_source() : "(null)");
}

static void test_config_rank_variables_in_order(void **state)
{
    (void)state;
    static const struct { const char *env, *expect; } cases[] = {
        { "RANK=3 SLURM_PROCID=9 LOCAL_RANK=1", "#rank=3 from=RANK\n" },
        { "SLURM_PROCID=5 OMPI_COMM_WORLD_RANK=9 LOCAL_RANK=1", "#rank=5 from=SLURM_PROCID\n" },
        { "OMPI_COMM_WORLD_RANK=6 PMI_RANK=9 PMIX_RANK=8", "#rank=6 from=OMPI_COMM_WORLD_RANK\n" },
        { "PMI_RANK=7 PMIX_RANK=8 LOCAL_RANK=1", "#rank=7 from=PMI_RANK\n" },
        { "PMIX_RANK=8 LOCAL_RANK=1", "#rank=8 from=PMIX_RANK\n" },
        { "LOCAL_RANK=2", "#rank=2 from=LOCAL_RANK\n" },
        { "SLURM_PROCID=x PMI_RANK=4", "#rank=4 from=PMI_RANK\n" },
        { "", "#rank=(null) from=(null)\n" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static char result[4096];
        rank_case_env = cases[i].env;
        run_child(rank_case_body, result, sizeof result);
        if (strstr(result, cases[i].expect) == NULL)
            fail_msg("%s: got %s", cases[i].env, result);
    }
}

static void host_body(FILE *out) { fprintf(out, "#host=%s\n", us_config_host()); }

/* %h: the host name, as gethostname says, safe in a file name */
static void test_config_host(void **state)
{
    (void)state;
    char name[256] = "", expect[300];
    assert_int_equal(gethostname(name, sizeof name), 0);
    static char result[4096];
    run_child(host_body, result, sizeof result);
    snprintf(expect, sizeof expect, "#host=%s\n", name);
    assert_non_null(strstr(result, expect));
    assert_null(strchr(us_config_host(), '/'));
}

/* Tests run with no UNSTALL_* variable of whoever runs them: the parent's own
 * configuration (the log's) is then the defaults. */
static void clear_unstall_environment(void)
{
    for (;;) {
        char name[256] = "";
        for (char **e = environ; *e != NULL; e++) {
            const char *eq = strchr(*e, '=');
            if (strncmp(*e, "UNSTALL_", 8) == 0 && eq != NULL && (size_t)(eq - *e) < sizeof name) {
                snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
                break;
            }
        }
        if (name[0] == '\0')
            return;
        unsetenv(name);
    }
}

int main(void)
{
    clear_unstall_environment();
    const struct CMUnitTest tests[] = {
        /* First, while this process has not loaded its own configuration (the
         * log of any later test does): each child loads it afresh, where a
         * child of a loaded process would inherit it. */
        cmocka_unit_test(test_config_process_sources),
        cmocka_unit_test(test_config_process_missing_file),
        cmocka_unit_test(test_config_rank_is_a_number),
        cmocka_unit_test(test_config_rank_variables_in_order),
        cmocka_unit_test(test_config_host),
        cmocka_unit_test(test_config_parse_bool),
        cmocka_unit_test(test_config_parse_size_accepts),
        cmocka_unit_test(test_config_parse_size_rejects),
        cmocka_unit_test(test_config_parse_uint),
        cmocka_unit_test(test_config_parse_enum),
        cmocka_unit_test(test_config_parse_range),
        cmocka_unit_test(test_config_defaults_round_trip),
        cmocka_unit_test(test_config_enum_choices_match_enums),
        cmocka_unit_test(test_config_choice_names_come_from_the_table),
        cmocka_unit_test_setup_teardown(test_config_defaults_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_file_overrides_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_env_overrides_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_bad_env_keeps_file_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_bad_env_keeps_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_bad_values_each_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_range_ends_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_string_length, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_removed_option_says_why, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_file_syntax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_file_repeated_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_file_bad_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_file_unknown_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_warnings_bounded_by_log_max_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_env_unknown_close_match, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_env_unknown_no_match, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_env_known_and_foreign_are_quiet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_profiles_load_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_generated_file_is_the_defaults, setup, teardown),
    };
    return US_RUN_TESTS("test_config", tests, NULL, NULL);
}
