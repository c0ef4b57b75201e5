/* test_callsite.c - call sites: capture drops the shim's frames and keeps the
 * caller's, the self range, depth, hashing, symbolizing, demangling, the
 * one-line form, and Python frames read only while the GIL is held. */
#include <dlfcn.h>
#include <errno.h>
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

#include "callsite.h"
#include "config.h"
#include "findings.h"

static struct us_config defaults;
static struct us_config cfg;

static int setup(void **state)
{
    (void)state;
    us_config_load(&defaults, NULL, NULL, NULL, NULL);
    cfg = defaults;
    us_config_set(&cfg);
    us_callsite_set_self_range(0, 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    us_config_set(&defaults);
    us_callsite_set_self_range(0, 0);
    return 0;
}

/* --- capture ------------------------------------------------------------------------ */

/* What an entry looks like: a function that captures the site; its caller is
 * the program. */
static void *caller_ret; /* the return address into the caller of hook() */

__attribute__((noinline, noclone)) static void hook(struct us_site *site)
{
    us_site_capture(site);
    caller_ret = __builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) static void program(struct us_site *site)
{
    hook(site);
    __asm__ volatile("" ::: "memory");
}

static void test_callsite_capture_starts_at_the_caller_of_capture(void **state)
{
    (void)state;
    struct us_site site;
    program(&site);
    assert_true(site.depth >= 2);
    /* frames[0] is in hook (the capture machinery's own frames are gone),
     * frames[1] the return into program */
    assert_true((uintptr_t)site.frames[0] > (uintptr_t)&hook);
    assert_true((uintptr_t)site.frames[0] < (uintptr_t)&hook + 4096);
    assert_ptr_equal(site.frames[1], caller_ret);
    uintptr_t lo, hi;
    bool main_program;
    assert_true(us_callsite_segment_of(site.frames[0], &lo, &hi, &main_program));
    assert_true(main_program); /* in the test binary */
}

static void test_callsite_self_range_drops_leading_shim_frames(void **state)
{
    (void)state;
    struct us_site first, second;
    program(&first);
    /* pretend hook() is the shim */
    us_callsite_set_self_range((uintptr_t)first.frames[0], (uintptr_t)first.frames[0] + 1);
    program(&second);
    assert_ptr_equal(second.frames[0], caller_ret);
    assert_ptr_equal(second.frames[0], first.frames[1]);
}

static void test_callsite_self_range_only_leading_frames(void **state)
{
    (void)state;
    struct us_site first, second;
    program(&first);
    /* a range holding the second frame only: the first is the caller's */
    us_callsite_set_self_range((uintptr_t)first.frames[1], (uintptr_t)first.frames[1] + 1);
    program(&second);
    assert_ptr_equal(second.frames[0], first.frames[0]);
    assert_ptr_equal(second.frames[1], first.frames[1]);
}

static void test_callsite_segment_of_shared_library(void **state)
{
    (void)state;
    void *fn = dlsym(RTLD_DEFAULT, "fnmatch");
    assert_non_null(fn);
    uintptr_t lo, hi;
    bool main_program = true;
    assert_true(us_callsite_segment_of(fn, &lo, &hi, &main_program));
    assert_false(main_program);
    assert_true(lo <= (uintptr_t)fn && (uintptr_t)fn < hi);
    assert_false(us_callsite_segment_of((void *)16, &lo, &hi, &main_program));
}

static void test_callsite_depth_follows_option(void **state)
{
    (void)state;
    struct us_site site;
    cfg.callsite_depth = 2;
    us_config_set(&cfg);
    program(&site);
    assert_int_equal(site.depth, 2);
    cfg.callsite_depth = 1;
    us_config_set(&cfg);
    program(&site);
    assert_int_equal(site.depth, 1);
}

static void test_callsite_hash_same_site_same_hash(void **state)
{
    (void)state;
    struct us_site two[2], c;
    volatile int n = 2; /* a loop the compiler does not unroll */
    for (int i = 0; i < n; i++)
        program(&two[i]); /* one site, twice */
    hook(&c); /* called from here: another site */
    struct us_site a = two[0], b = two[1];
    assert_int_equal(us_callsite_hash(&a), us_callsite_hash(&b));
    assert_int_not_equal(us_callsite_hash(&a), us_callsite_hash(&c));
    assert_int_not_equal(us_callsite_hash(&a), 0);
    /* Python frames tell sites apart too */
    b.py_depth = 1;
    snprintf(b.py_file[0], sizeof b.py_file[0], "train.py:42");
    b.py_func[0][0] = '\0';
    uint64_t h42 = us_callsite_hash(&b);
    assert_int_not_equal(h42, us_callsite_hash(&a));
    snprintf(b.py_file[0], sizeof b.py_file[0], "train.py:43");
    assert_int_not_equal(h42, us_callsite_hash(&b));
    struct us_site empty = { .depth = 0 };
    assert_int_not_equal(us_callsite_hash(&empty), 0);
}

/* --- symbolize ------------------------------------------------------------------------ */

static void test_callsite_symbolize_shared_library_function(void **state)
{
    (void)state;
    void *fn = dlsym(RTLD_DEFAULT, "fnmatch");
    assert_non_null(fn);
    struct us_frame fr;
    us_callsite_symbolize((char *)fn + 5, &fr); /* a return address 5 bytes in */
    assert_non_null(strstr(fr.module, "libc.so"));
    assert_true(fr.path[0] == '/');
    assert_true(strlen(fr.function) > 0);
    assert_int_equal(fr.offset, 5);
    char text[512], key[512];
    us_callsite_frame_text(&fr, text, sizeof text);
    char expected[512];
    snprintf(expected, sizeof expected, "%s!%s+0x5", fr.module, fr.function);
    assert_string_equal(text, expected);
    us_callsite_frame_key(&fr, key, sizeof key);
    snprintf(expected, sizeof expected, "%s!%s", fr.module, fr.function);
    assert_string_equal(key, expected);
    /* cached: the same answer again */
    struct us_frame again;
    us_callsite_symbolize((char *)fn + 5, &again);
    assert_memory_equal(&fr, &again, sizeof fr);
}

static void test_callsite_symbolize_main_program_without_symbols(void **state)
{
    (void)state;
    struct us_site site;
    program(&site);
    struct us_frame fr;
    us_callsite_symbolize(site.frames[0], &fr);
    assert_string_equal(fr.module, program_invocation_short_name);
    assert_string_equal(fr.function, ""); /* not in the dynamic symbol table */
    assert_int_equal(fr.offset, fr.module_offset);
    char text[512], expected[512];
    snprintf(expected, sizeof expected, "%s+0x%lx", fr.module, (unsigned long)fr.offset);
    assert_string_equal(us_callsite_frame_text(&fr, text, sizeof text), expected);
    assert_string_equal(us_callsite_frame_key(&fr, text, sizeof text), fr.module);
}

static void test_callsite_symbolize_unknown_address(void **state)
{
    (void)state;
    struct us_frame fr;
    us_callsite_symbolize((void *)0x20, &fr);
    assert_string_equal(fr.module, "");
    char text[64];
    assert_string_equal(us_callsite_frame_text(&fr, text, sizeof text), "0x20");
}

/* In a child, so that libstdc++ is loaded there only: RTLD_LOCAL, as Python
 * loads extension modules, which keeps it out of dlsym(RTLD_DEFAULT). */
static void test_callsite_demangles_without_parameters(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (cxx == NULL)
            _exit(77);
        void *fn = dlsym(cxx, "_ZNSt6chrono3_V212system_clock3nowEv");
        if (fn == NULL)
            _exit(77);
        struct us_frame fr;
        us_callsite_symbolize((char *)fn + 1, &fr);
        if (strcmp(fr.function, "std::chrono::_V2::system_clock::now") != 0) {
            fprintf(stderr, "function \"%s\"\n", fr.function);
            _exit(1);
        }
        if (strcmp(fr.symbol, "_ZNSt6chrono3_V212system_clock3nowEv") != 0)
            _exit(2);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        us_test_skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* --- text forms ----------------------------------------------------------------------- */

static void test_callsite_python_text_shortens_long_paths(void **state)
{
    (void)state;
    struct us_site site = { .py_depth = 2 };
    snprintf(site.py_file[0], sizeof site.py_file[0], "/home/someone/projects/model/src/pkg/train.py:42");
    snprintf(site.py_func[0], sizeof site.py_func[0], "Trainer.step");
    snprintf(site.py_file[1], sizeof site.py_file[1], "run.py:7");
    char text[256];
    assert_string_equal(us_callsite_python_text(&site, 0, text, sizeof text), ".../pkg/train.py:42 (Trainer.step)");
    assert_string_equal(us_callsite_python_text(&site, 1, text, sizeof text), "run.py:7");
}

static void test_callsite_line_python_first_then_native(void **state)
{
    (void)state;
    struct us_site site = { .depth = 4, .py_depth = 1 };
    site.frames[0] = (void *)0x10;
    site.frames[1] = (void *)0x20;
    site.frames[2] = (void *)0x30;
    site.frames[3] = (void *)0x40;
    snprintf(site.py_file[0], sizeof site.py_file[0], "train.py:42");
    snprintf(site.py_func[0], sizeof site.py_func[0], "step");
    char line[512];
    assert_string_equal(us_callsite_line(&site, 3, line, sizeof line),
                        "train.py:42 (step) <- 0x10 <- 0x20 <- 0x30");
    site.py_depth = 0;
    assert_string_equal(us_callsite_line(&site, 2, line, sizeof line), "0x10 <- 0x20");
    site.depth = 0;
    assert_string_equal(us_callsite_line(&site, 3, line, sizeof line), "(unknown site)");
    /* a small buffer is cut, never overrun */
    site.depth = 4;
    char small[12];
    us_callsite_line(&site, 3, small, sizeof small);
    assert_true(strlen(small) < sizeof small);
}

/* --- Python frames ----------------------------------------------------------------------- */

static struct us_site py_site;
static void py_hook(void) { us_site_capture(&py_site); }

static void *open_libpython(void)
{
    static const char *const names[] = { "libpython3.13.so.1.0", "libpython3.12.so.1.0", "libpython3.11.so.1.0",
                                         "libpython3.10.so.1.0", "libpython3.9.so.1.0" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
        if (h != NULL)
            return h;
    }
    return NULL;
}

/* The child embeds Python and calls py_hook through ctypes: PYFUNCTYPE keeps
 * the GIL (Python frames expected), CFUNCTYPE releases it (none expected). */
static int python_child(void)
{
    void *py = open_libpython();
    if (py == NULL)
        return 77;
    void (*init)(void) = (void (*)(void))dlsym(py, "Py_Initialize");
    int (*run)(const char *) = (int (*)(const char *))dlsym(py, "PyRun_SimpleString");
    if (init == NULL || run == NULL)
        return 77;
    init();
    us_callsite_python_rescan(); /* the parent looked before Python was here */
    char code[2048];
    snprintf(code, sizeof code,
             "import ctypes\n"
             "held = ctypes.PYFUNCTYPE(None)(%lu)\n"
             "released = ctypes.CFUNCTYPE(None)(%lu)\n"
             "src = 'def step(f):\\n    f()\\n\\ndef main(f):\\n    step(f)\\n'\n"
             "ns = {}\n"
             "exec(compile(src, '/work/project/train.py', 'exec'), ns)\n"
             "ns['main'](held)\n",
             (unsigned long)(uintptr_t)py_hook, (unsigned long)(uintptr_t)py_hook);
    if (!us_callsite_python_available())
        return 3;
    if (run(code) != 0)
        return 4;
    if (py_site.py_depth < 2) {
        fprintf(stderr, "py_depth %d\n", py_site.py_depth);
        return 5;
    }
    if (strcmp(py_site.py_file[0], "/work/project/train.py:2") != 0 || strcmp(py_site.py_func[0], "step") != 0) {
        fprintf(stderr, "frame 0: %s (%s)\n", py_site.py_file[0], py_site.py_func[0]);
        return 6;
    }
    if (strcmp(py_site.py_file[1], "/work/project/train.py:5") != 0 || strcmp(py_site.py_func[1], "main") != 0)
        return 7;
    if (py_site.depth < 1)
        return 8; /* native frames too */
    /* the GIL released around the call: the same frames, read without the
     * C API where the interpreter's layout is known, else native frames only;
     * twice: the first walk reads safely, the next ones directly */
    for (int round = 0; round < 2; round++) {
        memset(&py_site, 0, sizeof py_site);
        if (run("ns['main'](released)\n") != 0)
            return 9;
        if (py_site.depth < 1)
            return 10;
        if (!us_callsite_python_detached()) {
            if (py_site.py_depth != 0)
                return 14;
            continue;
        }
        if (py_site.py_depth < 2 || strcmp(py_site.py_file[0], "/work/project/train.py:2") != 0 ||
            strcmp(py_site.py_func[0], "step") != 0 || strcmp(py_site.py_file[1], "/work/project/train.py:5") != 0 ||
            strcmp(py_site.py_func[1], "main") != 0) {
            fprintf(stderr, "released, round %d: depth %d, %s (%s)\n", round, py_site.py_depth, py_site.py_file[0],
                    py_site.py_func[0]);
            return 15;
        }
    }
    /* a non-ASCII file name, with and without the GIL */
    if (run("src2 = 'def g(f):\\n    f()\\n'\n"
            "ns2 = {}\n"
            "exec(compile(src2, '/w/caf\u00e9/\u6a21\u578b.py', 'exec'), ns2)\n"
            "ns2['g'](held)\n") != 0)
        return 16;
    struct us_site held_site = py_site;
    if (run("ns2['g'](released)\n") != 0)
        return 17;
    if (strcmp(held_site.py_file[0], "/w/caf\u00e9/\u6a21\u578b.py:2") != 0)
        return 18;
    if (us_callsite_python_detached() && (strcmp(py_site.py_file[0], held_site.py_file[0]) != 0 ||
                                          us_callsite_hash(&py_site) == 0))
        return 19;
    /* option python_frames off */
    struct us_config c = *us_config();
    c.python_frames = false;
    us_config_set(&c);
    if (run("ns['main'](held)\n") != 0)
        return 11;
    if (py_site.py_depth != 0)
        return 12;
    /* an exception pending in the interpreter survives the capture */
    c.python_frames = true;
    us_config_set(&c);
    if (run("import sys\n"
            "try:\n"
            "    raise KeyError('kept')\n"
            "except KeyError:\n"
            "    ns['main'](held)\n"
            "    assert sys.exc_info()[0] is KeyError\n") != 0)
        return 13;
    return 0;
}

static void test_callsite_python_frames_when_gil_held(void **state)
{
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(python_child());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        us_test_skip(); /* no libpython to embed here */
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_callsite_no_python_no_frames(void **state)
{
    (void)state;
    struct us_site site;
    program(&site);
    if (!us_callsite_python_available())
        assert_int_equal(site.py_depth, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_callsite_capture_starts_at_the_caller_of_capture, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_self_range_drops_leading_shim_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_self_range_only_leading_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_segment_of_shared_library, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_depth_follows_option, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_hash_same_site_same_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_symbolize_shared_library_function, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_symbolize_main_program_without_symbols, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_symbolize_unknown_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_demangles_without_parameters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_python_text_shortens_long_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_line_python_first_then_native, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_python_frames_when_gil_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callsite_no_python_no_frames, setup, teardown),
    };
    return US_RUN_TESTS("test_callsite", tests, NULL, NULL);
}
