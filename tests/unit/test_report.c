/* test_report.c - rendering the report from a snapshot: amounts for people,
 * the row order, the text (header, totals by rule, rows, top, other sites,
 * fixes, no CUDA seen), the JSON (fields, escaping, rank), saving the file:
 * atomic, only to a regular or new file, never losing a richer report. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "summary.h"

#include "report.h"

static void test_report_bytes(void **state)
{
    (void)state;
    char out[32];
    assert_string_equal(us_report_bytes(0, out, sizeof out), "0 B");
    assert_string_equal(us_report_bytes(1023, out, sizeof out), "1023 B");
    assert_string_equal(us_report_bytes(1024, out, sizeof out), "1.0 KiB");
    assert_string_equal(us_report_bytes(64u << 20, out, sizeof out), "64.0 MiB");
    assert_string_equal(us_report_bytes(3ull << 30 | 1ull << 29, out, sizeof out), "3.5 GiB");
    assert_string_equal(us_report_bytes(2ull << 40, out, sizeof out), "2.0 TiB");
}

static void test_report_time(void **state)
{
    (void)state;
    char out[32];
    assert_string_equal(us_report_time(999, out, sizeof out), "999 ns");
    assert_string_equal(us_report_time(1500, out, sizeof out), "1.5 us");
    assert_string_equal(us_report_time(12300000, out, sizeof out), "12.3 ms");
    assert_string_equal(us_report_time(2345000000ull, out, sizeof out), "2.35 s");
}

static struct us_report_row row(enum us_rule_id rule, uint64_t count, uint64_t total, uint32_t id)
{
    struct us_report_row r = { .id = id, .rule = rule, .api = "cudaMemcpyAsync", .count = count,
                               .total_ns = total, .max_ns = total, .observed = count, .bytes = 1024 * count };
    r.site.depth = 1;
    r.site.frames[0] = (void *)(uintptr_t)(0x1000 * (id + 1));
    return r;
}

static void test_report_sort(void **state)
{
    (void)state;
    struct us_report_row rows[5] = {
        row(US_RULE_explicit_sync, 1, 10, 0), row(US_RULE_pageable_d2h, 1, 30, 1),
        row(US_RULE_pageable_h2d, 5, 20, 2),  row(US_RULE_pageable_h2d, 7, 20, 3),
        row(US_RULE_sync_memset, 0, 0, 4),
    };
    rows[4].forbidden = 3;
    us_report_sort(rows, 5);
    assert_int_equal(rows[0].id, 1); /* most time */
    assert_int_equal(rows[1].id, 3); /* same time: more calls first */
    assert_int_equal(rows[2].id, 2);
    assert_int_equal(rows[3].id, 0);
    assert_int_equal(rows[4].id, 4);
}

/* A snapshot with three rows, the last one of "other sites". */
static struct us_report *sample(void)
{
    struct us_report *r = calloc(1, sizeof *r);
    r->pid = 4242;
    snprintf(r->program, sizeof r->program, "python3");
    snprintf(r->cmdline, sizeof r->cmdline, "python3 train.py --epochs 2");
    snprintf(r->rank, sizeof r->rank, "3");
    r->rank_source = "SLURM_PROCID";
    snprintf(r->host, sizeof r->host, "node7");
    r->mode = "report";
    r->hooked = true;
    r->origin_mono_ns = 1000;
    r->origin_real_ns = 1700000000ull * 1000000000ull;
    r->now_mono_ns = 1000 + 2500000000ull;
    r->row_count = 3;
    r->rows = calloc(3, sizeof *r->rows);
    r->rows[0] = row(US_RULE_pageable_d2h, 120, 1230000000ull, 0);
    r->rows[0].bytes = 120ull << 26;
    r->rows[0].fixed = 100;
    r->rows[0].observed = 20;
    r->rows[0].max_ns = 12300000;
    r->rows[0].site.py_depth = 1;
    snprintf(r->rows[0].site.py_file[0], sizeof r->rows[0].site.py_file[0], "/w/train.py:42");
    snprintf(r->rows[0].site.py_func[0], sizeof r->rows[0].site.py_func[0], "step");
    r->rows[0].stream_kinds = 1u << US_STREAM_LEGACY;
    r->rows[0].devices = 0x5;
    r->rows[1] = row(US_RULE_explicit_sync, 300, 500000000ull, 1);
    r->rows[1].bytes = 0;
    r->rows[1].api = "cudaStreamSynchronize";
    r->rows[2] = row(US_RULE_pageable_d2h, 4, 1000, 2);
    r->rows[2].other = true;
    r->event_count = 1;
    r->events = calloc(1, sizeof *r->events);
    r->events[0] = (struct us_report_event){ .row = 0, .rule = US_RULE_pageable_d2h, .fixed = true,
                                             .stream_kind = US_STREAM_LEGACY, .tid = 77, .src_device = 0,
                                             .dst_device = -1, .stream = 1, .start_ns = 5000, .held_ns = 600,
                                             .bytes = 64 };
    r->span_count = 1;
    r->spans = calloc(1, sizeof *r->spans);
    r->spans[0] = (struct us_report_span){ .name = "d2h", .device = 2, .tid = 78, .start_ns = 5100, .end_ns = 5500,
                                           .bytes = 64 };
    return r;
}

static void test_report_text(void **state)
{
    (void)state;
    struct us_report *r = sample();
    char *text = us_report_text(r, 20);
    assert_non_null(text);
    assert_non_null(strstr(text, "unstall[4242]: ---- unstall report: python3 train.py --epochs 2 (pid 4242, rank 3, host node7), "
                                 "mode report, ran 2.50 s ----\n"));
    assert_non_null(strstr(text, "unstall[4242]: time the calls held the caller, by rule:\n"
                                 "unstall[4242]:   pageable_d2h       high       1.23 s in 124 calls, 7.5 GiB, 100 "
                                 "fixed\n"
                                 "unstall[4242]:   explicit_sync      low      500.0 ms in 300 calls\n"));
    assert_non_null(strstr(text, "unstall[4242]:    1  pageable_d2h       high        120    7.5 GiB     1.23 s    "
                                 "12.3 ms      100/20  cudaMemcpyAsync\n"
                                 "unstall[4242]:         at /w/train.py:42 (step) <- 0x1000\n"));
    assert_non_null(strstr(text, "   2  explicit_sync      low         300          -   500.0 ms   500.0 ms       "
                                 "0/300  cudaStreamSynchronize\n"));
    assert_non_null(strstr(text, "        at (other sites: the table of call sites is full)\n"));
    assert_non_null(strstr(text, "how to fix them:\n"));
    assert_non_null(strstr(text, us_rules[US_RULE_explicit_sync].fix));
    assert_null(strstr(text, "JSON report:"));
    assert_non_null(strstr(text, "unstall[4242]: ---- end of unstall report ----\n"));
    free(text);

    /* top 1; where the JSON went */
    snprintf(r->json_path, sizeof r->json_path, "/tmp/r.json");
    text = us_report_text(r, 1);
    assert_null(strstr(text, "explicit_sync      low         300"));
    assert_non_null(strstr(text, "... 2 more rows (option report_top"));
    assert_non_null(strstr(text, "JSON report: /tmp/r.json"));
    free(text);

    /* forbidden calls */
    r->rows[1].forbidden = 2;
    text = us_report_text(r, 20);
    assert_non_null(strstr(text, "cudaStreamSynchronize, 2 forbidden\n"));
    assert_non_null(strstr(text, "in 300 calls, 2 forbidden\n"));
    free(text);
    us_report_free(r);
}

static void test_report_text_no_cuda_seen(void **state)
{
    (void)state;
    struct us_report *r = sample();
    r->hooked = false;
    r->row_count = 0;
    r->rank[0] = '\0';
    char *text = us_report_text(r, 20);
    assert_non_null(strstr(text, "(pid 4242, host node7), mode report"));
    assert_non_null(strstr(text, "unstall[4242]: unstall saw no CUDA runtime call: if the program links the CUDA "
                                 "runtime statically (nvcc's default), a runtime-layer preload cannot see it; build "
                                 "with -cudart shared\n"));
    assert_null(strstr(text, "how to fix"));
    free(text);
    r->hooked = true;
    text = us_report_text(r, 20);
    assert_non_null(strstr(text, "no implicit synchronization seen\n"));
    free(text);
    us_report_free(r);
}

static void test_report_json(void **state)
{
    (void)state;
    struct us_report *r = sample();
    snprintf(r->program, sizeof r->program, "a\"b\\c\n");
    char *json = us_report_json(r);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"version\": 1,"));
    assert_non_null(strstr(json, "\"pid\": 4242,"));
    assert_non_null(strstr(json, "\"rank\": 3,\n  \"rank_from\": \"SLURM_PROCID\",\n  \"host\": \"node7\",\n"));
    assert_non_null(strstr(json, "\"program\": \"a\\\"b\\\\c\\n\","));
    assert_non_null(strstr(json, "\"started\": \"2023-11-14T22:13:20Z\","));
    assert_non_null(strstr(json, "\"clock\": {\"monotonic_ns\": 1000, \"realtime_ns\": 1700000000000000000},"));
    assert_non_null(strstr(json, "{\"rule\": \"pageable_d2h\", \"severity\": \"high\", \"count\": 124, "));
    assert_non_null(strstr(json, "{\"index\": 0, \"rule\": \"pageable_d2h\", \"severity\": \"high\", \"api\": "
                                 "\"cudaMemcpyAsync\", \"count\": 120, \"bytes\": 8053063680, \"total_ns\": 1230000000, "
                                 "\"max_ns\": 12300000, \"fixed\": 100, \"observed\": 20, \"forbidden\": 0"));
    assert_non_null(strstr(json, "\"other\": false, \"unlocated\": false, \"streams\": [\"legacy\"], \"devices\": [0, 2]"));
    assert_non_null(strstr(json, "\"site\": {\"python\": [{\"file\": \"/w/train.py\", \"line\": 42, \"function\": "
                                 "\"step\"}], \"native\": [\"0x1000\"], \"native_at\": [\"0x1000\"], \"native_src\": [null]}"));
    assert_non_null(strstr(json, "\"other\": true"));
    assert_non_null(strstr(json, "\"site\": {\"python\": [], \"native\": [], \"native_at\": [], \"native_src\": []}"));
    assert_non_null(strstr(json, "{\"finding\": 0, \"rule\": \"pageable_d2h\", \"start_ns\": 5000, \"held_ns\": 600, "
                                 "\"bytes\": 64, \"tid\": 77, \"stream\": \"0x1\", \"stream_kind\": \"legacy\", "
                                 "\"src_device\": 0, \"dst_device\": -1, \"context\": \"0x0\", \"fixed\": true}"));
    assert_non_null(strstr(json, "{\"name\": \"d2h\", \"device\": 2, \"tid\": 78, \"start_ns\": 5100, \"end_ns\": 5500, "
                                 "\"bytes\": 64}"));
    /* balanced braces and brackets outside strings: a cheap validity check */
    int depth = 0;
    bool in_string = false;
    for (const char *c = json; *c != '\0'; c++) {
        if (in_string) {
            if (*c == '\\')
                c++;
            else if (*c == '"')
                in_string = false;
            continue;
        }
        if (*c == '"')
            in_string = true;
        else if (*c == '{' || *c == '[')
            depth++;
        else if (*c == '}' || *c == ']')
            assert_true(--depth >= 0);
    }
    assert_int_equal(depth, 0);
    assert_false(in_string);
    free(json);

    r->rank[0] = '\0';
    r->row_count = 0;
    r->event_count = 0;
    r->span_count = 0;
    json = us_report_json(r);
    assert_non_null(strstr(json, "\"rank\": null,\n  \"rank_from\": null,"));
    assert_non_null(strstr(json, "\"rules\": [],\n  \"findings\": [],"));
    assert_non_null(strstr(json, "\"events\": [],"));
    assert_non_null(strstr(json, "\"spans\": []\n}\n"));
    free(json);
    us_report_free(r);
}

/* A program path with byte 0xff once made the report invalid UTF-8. */
static void test_report_json_is_utf8(void **state)
{
    (void)state;
    struct us_report *r = sample();
    snprintf(r->program, sizeof r->program, "prog_\xffx");
    /* kept: é, €, 𝄞; replaced: a lone continuation byte, a cut sequence, an
     * overlong '/', a surrogate, a code point past U+10FFFF, 0xfe */
    snprintf(r->cmdline, sizeof r->cmdline, "a\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e|\x80|\xe2\x82|\xc0\xaf|\xed\xa0\x80|"
                                            "\xf4\x90\x80\x80|\xfe|\xe2");
    char *json = us_report_json(r);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"program\": \"prog_\\ufffdx\","));
    assert_non_null(strstr(json, "\"cmdline\": \"a\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e|\\ufffd|\\ufffd\\ufffd|"
                                 "\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\\ufffd|\\ufffd|\\ufffd\","));
    for (const unsigned char *c = (const unsigned char *)json; *c != '\0'; c++)
        assert_true(*c != 0xff && *c != 0xfe && *c != 0xc0);
    free(json);
    us_report_free(r);
}

static void read_small(const char *path, char *text, size_t size)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, size - 1, f);
    text[n] = '\0';
    fclose(f);
}

static void write_small(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static enum us_report_save_result save(const char *path, const char *text, enum us_report_content content,
                                       uint64_t started, char *why)
{
    return us_report_save(path, text, content, started, why, 512);
}

static void test_report_save_new_and_regular(void **state)
{
    (void)state;
    char dir[] = "/tmp/unstall-report-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], tmp[300], why[512], text[64];
    snprintf(path, sizeof path, "%s/r.json", dir);
    assert_int_equal(save(path, "{\"a\": 1}\n", US_REPORT_HAS_FINDINGS, 0, why), US_REPORT_SAVED);
    assert_int_equal(save(path, "{}\n", US_REPORT_HAS_FINDINGS, 0, why), US_REPORT_SAVED); /* replaces */
    read_small(path, text, sizeof text);
    assert_string_equal(text, "{}\n");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);

    /* a link planted at the temporary name is not followed */
    char victim[300];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    write_small(victim, "keep");
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(save(path, "{\"b\": 2}\n", US_REPORT_HAS_FINDINGS, 0, why), US_REPORT_SAVED);
    read_small(victim, text, sizeof text);
    assert_string_equal(text, "keep");
    read_small(path, text, sizeof text);
    assert_string_equal(text, "{\"b\": 2}\n");
    assert_int_equal(access(tmp, F_OK), -1);
    unlink(victim);
    unlink(path);
    rmdir(dir);

    errno = 0;
    assert_int_equal(save("/nonexistent-unstall-dir/r.json", "{}", US_REPORT_HAS_FINDINGS, 0, why), US_REPORT_FAILED);
    assert_int_equal(errno, ENOENT);
}

/* A FIFO, a link (to /dev/null or to a file), a device node or a
 * directory at the report's path is left as it is, without blocking. */
static void test_report_save_leaves_other_files_alone(void **state)
{
    (void)state;
    char dir[] = "/tmp/unstall-report-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[256], link_null[256], link_file[256], target[256], sub[256], node[256], why[512], text[64];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(link_null, sizeof link_null, "%s/null-link", dir);
    snprintf(link_file, sizeof link_file, "%s/file-link", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(node, sizeof node, "%s/null", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(symlink("/dev/null", link_null), 0);
    write_small(target, "keep");
    assert_int_equal(symlink(target, link_file), 0);
    assert_int_equal(mkdir(sub, 0700), 0);
    bool have_node = mknod(node, S_IFCHR | 0600, makedev(1, 3)) == 0; /* as root only */

    struct { const char *path, *kind; mode_t type; } cases[] = {
        { fifo, "a FIFO", S_IFIFO },
        { link_null, "a symbolic link", S_IFLNK },
        { link_file, "a symbolic link", S_IFLNK },
        { sub, "a directory", S_IFDIR },
        { node, "a character device", S_IFCHR },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].type == S_IFCHR && !have_node)
            continue;
        assert_int_equal(save(cases[i].path, "{}\n", US_REPORT_HAS_FINDINGS, 0, why), US_REPORT_NOT_REGULAR);
        char expect[128];
        snprintf(expect, sizeof expect, "it is %s; unstall writes its report only to a regular file or a new one",
                 cases[i].kind);
        assert_string_equal(why, expect);
        struct stat st;
        assert_int_equal(lstat(cases[i].path, &st), 0);
        assert_int_equal(st.st_mode & S_IFMT, cases[i].type);
    }
    read_small(target, text, sizeof text);
    assert_string_equal(text, "keep");
    unlink(fifo);
    unlink(link_null);
    unlink(link_file);
    unlink(target);
    rmdir(sub);
    unlink(node);
    rmdir(dir);
}

static uint64_t now_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* torchrun's own process under a rank's name, exiting last, must not
 * replace that rank's report with an empty one; an earlier run's is replaced. */
static void test_report_save_keeps_a_richer_report_of_this_run(void **state)
{
    (void)state;
    char dir[] = "/tmp/unstall-report-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], why[512], text[4096];
    snprintf(path, sizeof path, "%s/r-0.json", dir);
    struct us_report *r = sample(); /* has findings */
    r->pid = 777;
    char *with_findings = us_report_json(r);
    r->row_count = 0;
    char *clean = us_report_json(r);
    r->hooked = false;
    char *nothing = us_report_json(r);
    us_report_free(r);

    uint64_t started = now_real_ns() - 1000000000ull; /* this process began a second ago */
    assert_int_equal(save(path, with_findings, US_REPORT_HAS_FINDINGS, started, why), US_REPORT_SAVED);
    assert_int_equal(save(path, nothing, US_REPORT_SAW_NOTHING, started, why), US_REPORT_KEPT_OTHER);
    assert_string_equal(why, "it holds the report of pid 777, written while this process ran, with findings; this "
                             "process saw no CUDA call");
    assert_int_equal(save(path, clean, US_REPORT_NO_FINDINGS, started, why), US_REPORT_KEPT_OTHER);
    assert_string_equal(why, "it holds the report of pid 777, written while this process ran, with findings; this "
                             "process saw no finding");
    read_small(path, text, sizeof text);
    assert_string_equal(text, with_findings);

    /* findings replace findings: the last writer wins */
    assert_int_equal(save(path, with_findings, US_REPORT_HAS_FINDINGS, started, why), US_REPORT_SAVED);

    /* a clean report of this run is kept from one that saw nothing */
    unlink(path);
    assert_int_equal(save(path, clean, US_REPORT_NO_FINDINGS, started, why), US_REPORT_SAVED);
    assert_int_equal(save(path, nothing, US_REPORT_SAW_NOTHING, started, why), US_REPORT_KEPT_OTHER);
    assert_non_null(strstr(why, "with CUDA calls; this process saw no CUDA call"));

    /* an earlier run's report (older than this process) is replaced */
    assert_int_equal(save(path, with_findings, US_REPORT_HAS_FINDINGS, started, why), US_REPORT_SAVED);
    const struct timespec old[2] = { { started / 1000000000u - 60, 0 }, { started / 1000000000u - 60, 0 } };
    assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
    assert_int_equal(save(path, nothing, US_REPORT_SAW_NOTHING, started, why), US_REPORT_SAVED);
    read_small(path, text, sizeof text);
    assert_string_equal(text, nothing);

    /* a file that is not an unstall report holds nothing to keep */
    write_small(path, "{\"findings\": [1]}\n");
    assert_int_equal(save(path, nothing, US_REPORT_SAW_NOTHING, started, why), US_REPORT_SAVED);

    free(with_findings);
    free(clean);
    free(nothing);
    unlink(path);
    rmdir(dir);
}

static void test_report_content_of(void **state)
{
    (void)state;
    struct us_report *r = sample();
    assert_int_equal(us_report_content_of(r), US_REPORT_HAS_FINDINGS);
    r->row_count = 0;
    assert_int_equal(us_report_content_of(r), US_REPORT_NO_FINDINGS);
    r->hooked = false;
    assert_int_equal(us_report_content_of(r), US_REPORT_SAW_NOTHING);
    us_report_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_bytes),
        cmocka_unit_test(test_report_time),
        cmocka_unit_test(test_report_sort),
        cmocka_unit_test(test_report_text),
        cmocka_unit_test(test_report_text_no_cuda_seen),
        cmocka_unit_test(test_report_json),
        cmocka_unit_test(test_report_json_is_utf8),
        cmocka_unit_test(test_report_save_new_and_regular),
        cmocka_unit_test(test_report_save_leaves_other_files_alone),
        cmocka_unit_test(test_report_save_keeps_a_richer_report_of_this_run),
        cmocka_unit_test(test_report_content_of),
    };
    return US_RUN_TESTS("test_report", tests, NULL, NULL);
}
