/* callsite.c - capture, identify and symbolize call sites (see callsite.h). */
#include "callsite.h"
#include "hot.h"
#include "callsite_python.h"
#include "config.h"
#include "log.h"
#include "resolve.h"
#include "srcline.h"
#include "unwinder.h"
#include "walkmemo.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

/* Frames the shim itself may have between the capture and the CUDA entry the
 * program called (watch/copy, the entry, an inlined helper or two): captured
 * beyond the depth kept, then dropped by the self range, with us_unwind's. */
#define SELF_SLACK 7

/* --- the shim's own frames ---------------------------------------------------------- */

static _Atomic uintptr_t self_lo, self_hi;
static atomic_bool self_set;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

struct segment_query {
    uintptr_t addr;
    uintptr_t lo, hi;
    bool found, main_program;
    int index;
};

static int segment_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct segment_query *q = arg;
    int index = q->index++;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        if (q->addr >= lo && q->addr < hi) {
            q->lo = lo;
            q->hi = hi;
            q->found = true;
            /* the first object listed is the main program */
            q->main_program = index == 0;
            return 1;
        }
    }
    return 0;
}

bool us_callsite_segment_of(const void *addr, uintptr_t *lo, uintptr_t *hi, bool *main_program)
{
    struct segment_query q = { .addr = (uintptr_t)addr };
    dl_iterate_phdr(segment_visit, &q);
    if (!q.found)
        return false;
    *lo = q.lo;
    *hi = q.hi;
    *main_program = q.main_program;
    return true;
}

static void self_init(void)
{
    if (atomic_load(&self_set))
        return; /* a test chose */
    uintptr_t lo, hi;
    bool main_program;
    if (us_callsite_segment_of((const void *)&us_site_capture, &lo, &hi, &main_program) && !main_program) {
        atomic_store(&self_lo, lo);
        atomic_store(&self_hi, hi);
    }
    /* linked into the main program (unit tests): the program's frames are
     * the ones wanted, so nothing is dropped by range */
}

void us_callsite_set_self_range(uintptr_t lo, uintptr_t hi)
{
    pthread_once(&self_once, self_init);
    atomic_store(&self_set, true);
    atomic_store(&self_lo, lo);
    atomic_store(&self_hi, hi);
}

void us_callsite_self_range(uintptr_t *lo, uintptr_t *hi)
{
    pthread_once(&self_once, self_init);
    *lo = atomic_load(&self_lo);
    *hi = atomic_load(&self_hi);
}

/* --- capture ------------------------------------------------------------------------ */

/* caller: a return address into the caller of us_site_capture, the first
 * frame kept (then the shim's own leading frames are dropped). Frames are
 * matched by address, not counted, so neither a sanitizer's backtrace
 * interceptor nor a tail call into here shifts them. A walk this thread made
 * from the same frame before, and which its stack still holds, is not made
 * again (walkmemo.h). */
_Static_assert(US_SITE_MAX_FRAMES <= US_WALKMEMO_MAX_FRAMES, "a remembered walk keeps a site's frames");
US_HOT __attribute__((noinline)) static void capture_from(struct us_site *site, int max_depth, bool python,
                                                   const void *caller)
{
    void *buf[US_SITE_MAX_FRAMES + SELF_SLACK + 3];
    if (max_depth < 1)
        max_depth = 1;
    if (max_depth > US_SITE_MAX_FRAMES)
        max_depth = US_SITE_MAX_FRAMES;
    /* the key's own address stands for this frame's: the stack pointer
     * this function was entered with, less a fixed amount */
    struct us_walkmemo_key key = {.caller = caller, .max_depth = max_depth};
    key.frame = (uintptr_t)&key;
    us_callsite_self_range(&key.self_lo, &key.self_hi);
    if (!us_walkmemo_find(&key, site->frames, &site->depth)) {
        int n = us_unwind(buf, max_depth + SELF_SLACK + 3);
        /* buf[0] is us_unwind, buf[1] this function, buf[2] us_site_capture
         * (absent after a tail call), then its caller */
        int i = 3, from = -1;
        for (int k = 0; k < n && k < 6; k++)
            if (buf[k] == caller) {
                i = from = k;
                break;
            }
        while (i < n && (uintptr_t)buf[i] >= key.self_lo && (uintptr_t)buf[i] < key.self_hi)
            i++;
        int depth = 0;
        for (; i < n && depth < max_depth; i++)
            site->frames[depth++] = buf[i];
        site->depth = depth;
        /* the return addresses that decided the site: the caller's to the
         * last kept */
        if (from >= 0 && i > from)
            us_walkmemo_learn(&key, buf + from, i - from, site->frames, depth);
    }
    site->py_depth = 0;
    if (python)
        site->py_depth = us_callsite_python_capture(site->py_file, site->py_func);
}

US_HOT __attribute__((noinline)) void us_site_capture(struct us_site *site)
{
    const struct us_config *cfg = us_config();
    capture_from(site, (int)cfg->callsite_depth, cfg->python_frames, __builtin_return_address(0));
}

void us_callsite_learn_next(void)
{
    us_walkmemo_learn_next();
}

void us_callsite_prepare(void)
{
    pthread_once(&self_once, self_init);
    /* one walk now: the unwinder's first one sets itself up and reads the
     * unwind tables of every object on the stack (the program's, libc's),
     * 0.3-0.4 ms on the build machine, which the first finding's call paid */
    void *warm[US_SITE_MAX_FRAMES + SELF_SLACK + 3];
    (void)us_unwind(warm, (int)(sizeof warm / sizeof warm[0]));
    us_walkmemo_prepare();
    (void)us_callsite_python_available();
}

US_HOT uint64_t us_callsite_hash(const struct us_site *site)
{
    /* a word at a time for the frames (a byte at a time cost a third of a
     * finding's record), then a byte at a time for the Python text; each
     * multiply is followed by a shift so that high address bits reach the
     * low ones */
    uint64_t h = 14695981039346656037ull;
    int depth = site->depth < US_SITE_MAX_FRAMES ? site->depth : US_SITE_MAX_FRAMES;
    for (int i = 0; i < depth; i++) {
        h ^= (uint64_t)(uintptr_t)site->frames[i];
        h *= 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    int py_depth = site->py_depth < US_SITE_PY_FRAMES ? site->py_depth : US_SITE_PY_FRAMES;
    for (int i = 0; i < py_depth; i++) {
        for (const char *c = site->py_file[i]; *c != '\0'; c++) {
            h ^= (unsigned char)*c;
            h *= 1099511628211ull;
        }
        h ^= 0xff; /* a separator: "a:1" "b" differs from "a:1b" */
        h *= 1099511628211ull;
    }
    return h != 0 ? h : 1;
}

/* --- symbolize ---------------------------------------------------------------------- */

typedef char *(*demangle_fn)(const char *name, char *buf, size_t *len, int *status);
static _Atomic(demangle_fn) demangle;

/* libstdc++'s (or libc++'s) demangler when the program has it loaded: a
 * mangled name means a C++ library is there, so it is looked up until found */
static demangle_fn demangler(void)
{
    demangle_fn fn = atomic_load(&demangle);
    if (fn != NULL)
        return fn;
    *(void **)&fn = us_resolve_global("__cxa_demangle");
    /* a C++ library loaded RTLD_LOCAL (Python extension modules are) keeps
     * its libstdc++ out of the global scope: ask the library itself, loaded
     * already (RTLD_NOLOAD loads nothing; the handle is kept) */
    static const char *const libs[] = { "libstdc++.so.6", "libc++abi.so.1", "libc++.so.1" };
    for (size_t i = 0; fn == NULL && i < sizeof libs / sizeof libs[0]; i++) {
        void *lib = us_resolve_loaded(libs[i]);
        if (lib != NULL)
            *(void **)&fn = us_resolve_in(lib, "__cxa_demangle");
    }
    atomic_store(&demangle, fn);
    return fn;
}

/* "ns::f<T>(int, char)" -> "ns::f<T>": cut at the parameter list, the first
 * '(' outside template brackets that is not "(anonymous namespace)" nor the
 * "()" of "operator()". */
static void strip_parameters(char *name)
{
    int angle = 0;
    for (char *c = name; *c != '\0'; c++) {
        if (*c == '<')
            angle++;
        else if (*c == '>' && angle > 0)
            angle--;
        else if (*c == '(' && angle == 0) {
            if (strncmp(c, "(anonymous namespace)", 21) == 0) {
                c += 20;
                continue;
            }
            if (c - name >= 8 && strncmp(c - 8, "operator", 8) == 0 && c[1] == ')') {
                c++;
                continue;
            }
            if (c != name) {
                *c = '\0';
                return;
            }
        }
    }
}

static void name_function(const char *symbol, char *out, size_t size)
{
    demangle_fn demangle = symbol[0] == '_' && symbol[1] == 'Z' ? demangler() : NULL;
    if (demangle != NULL) {
        int status = -1;
        char *plain = demangle(symbol, NULL, NULL, &status);
        if (plain != NULL && status == 0) {
            strip_parameters(plain);
            snprintf(out, size, "%s", plain);
            free(plain);
            return;
        }
        free(plain);
    }
    snprintf(out, size, "%s", symbol);
}

static void symbolize_uncached(const void *pc, struct us_frame *out)
{
    memset(out, 0, sizeof *out);
    uintptr_t at = (uintptr_t)pc;
    Dl_info info;
    /* pc is a return address: the call is just before it */
    if (at == 0 || dladdr((const void *)(at - 1), &info) == 0 || info.dli_fname == NULL) {
        out->offset = at;
        return;
    }
    const char *base = strrchr(info.dli_fname, '/');
    snprintf(out->module, sizeof out->module, "%s", base != NULL ? base + 1 : info.dli_fname);
    snprintf(out->path, sizeof out->path, "%s", info.dli_fname);
    if (out->module[0] == '\0') /* the main program, on some systems */
        snprintf(out->module, sizeof out->module, "%s", program_invocation_short_name);
    out->module_offset = at - (uintptr_t)info.dli_fbase;
    if (info.dli_sname != NULL && info.dli_saddr != NULL) {
        snprintf(out->symbol, sizeof out->symbol, "%s", info.dli_sname);
        name_function(info.dli_sname, out->function, sizeof out->function);
        out->offset = at - (uintptr_t)info.dli_saddr;
    } else {
        out->offset = out->module_offset;
    }
}

/* A bounded cache: dladdr scans a library's symbol table, which for a large
 * C++ library costs far more than the lookup here. */
#define SYM_CACHE_MAX 4096
struct sym_entry {
    const void *pc;
    struct us_frame frame;
    UT_hash_handle hh;
};
static struct sym_entry *sym_cache;
static unsigned sym_cache_count;
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;

void us_callsite_symbolize(const void *pc, struct us_frame *out)
{
    struct sym_entry *e;
    pthread_mutex_lock(&sym_lock);
    HASH_FIND_PTR(sym_cache, &pc, e);
    if (e != NULL)
        *out = e->frame;
    pthread_mutex_unlock(&sym_lock);
    if (e != NULL)
        return;
    symbolize_uncached(pc, out);
    pthread_mutex_lock(&sym_lock);
    HASH_FIND_PTR(sym_cache, &pc, e);
    if (e == NULL && sym_cache_count < SYM_CACHE_MAX && (e = malloc(sizeof *e)) != NULL) {
        e->pc = pc;
        e->frame = *out;
        HASH_ADD_PTR(sym_cache, pc, e);
        sym_cache_count++;
    }
    pthread_mutex_unlock(&sym_lock);
}

/* The system's own libraries (libc, libstdc++, libpthread...): their lines
 * would take libdw to their separate debug files (/usr/lib/debug, often
 * compressed: 65 ms at exit for a libc frame on a Debian machine), and a
 * user fixes nothing there; their frames keep function+offset. */
static bool in_system_library(const void *pc)
{
    static const char *const dirs[] = {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"};
    Dl_info info;
    if (dladdr(pc, &info) == 0 || info.dli_fname == NULL)
        return false;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (strncmp(info.dli_fname, dirs[i], strlen(dirs[i])) == 0)
            return true;
    return false;
}

void us_callsite_symbolize_source(const void *pc, struct us_frame *out)
{
    us_callsite_symbolize(pc, out);
    if (out->source_looked)
        return;
    out->source_looked = true;
    struct us_srcline src;
    /* pc is a return address: the call is just before it */
    if (pc != NULL && out->module[0] != '\0' && !in_system_library(pc) && us_srcline_lookup((uintptr_t)pc - 1, &src)) {
        if (src.line > 0) {
            snprintf(out->file, sizeof out->file, "%s", src.file);
            out->line = src.line;
        }
        if (out->function[0] == '\0' && src.symbol[0] != '\0') {
            /* a function the dynamic symbol table lacks (static, or the main
             * program's without -rdynamic) */
            snprintf(out->symbol, sizeof out->symbol, "%s", src.symbol);
            name_function(src.symbol, out->function, sizeof out->function);
            out->offset = src.symbol_offset + 1;
        }
    }
    struct sym_entry *e;
    pthread_mutex_lock(&sym_lock);
    HASH_FIND_PTR(sym_cache, &pc, e);
    if (e != NULL)
        e->frame = *out;
    pthread_mutex_unlock(&sym_lock);
}

char *us_callsite_frame_text(const struct us_frame *fr, char *out, size_t size)
{
    if (fr->module[0] == '\0')
        snprintf(out, size, "0x%lx", (unsigned long)fr->offset);
    else if (fr->function[0] == '\0')
        snprintf(out, size, "%s+0x%lx", fr->module, (unsigned long)fr->offset);
    else
        snprintf(out, size, "%s!%s+0x%lx", fr->module, fr->function, (unsigned long)fr->offset);
    if (fr->line > 0) {
        const char *base = strrchr(fr->file, '/');
        size_t len = strlen(out);
        if (len < size)
            snprintf(out + len, size - len, " (%s:%u)", base != NULL ? base + 1 : fr->file, fr->line);
    }
    return out;
}

char *us_callsite_frame_key(const struct us_frame *fr, char *out, size_t size)
{
    if (fr->function[0] == '\0')
        snprintf(out, size, "%s", fr->module);
    else
        snprintf(out, size, "%s!%s", fr->module, fr->function);
    return out;
}

char *us_callsite_python_text(const struct us_site *site, int i, char *out, size_t size)
{
    const char *file = site->py_file[i];
    /* keep the last two path components of a long path */
    const char *shown = file;
    if (strlen(file) > 40) {
        const char *last = strrchr(file, '/');
        if (last != NULL) {
            const char *c = last;
            while (c > file && c[-1] != '/')
                c--;
            if (c > file + 1)
                shown = c;
        }
    }
    const char *dots = shown != file ? ".../" : "";
    if (site->py_func[i][0] != '\0')
        snprintf(out, size, "%s%s (%s)", dots, shown, site->py_func[i]);
    else
        snprintf(out, size, "%s%s", dots, shown);
    return out;
}

static char *site_line(const struct us_site *site, int native_max, bool source, char *out, size_t size);

char *us_callsite_line(const struct us_site *site, int native_max, char *out, size_t size)
{
    return site_line(site, native_max, false, out, size);
}

char *us_callsite_line_source(const struct us_site *site, int native_max, char *out, size_t size)
{
    return site_line(site, native_max, true, out, size);
}

static char *site_line(const struct us_site *site, int native_max, bool source, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    int shown = 0;
    for (int i = 0; i < site->py_depth && i < US_SITE_PY_FRAMES; i++, shown++) {
        char text[US_SITE_PY_FILE + US_SITE_PY_FUNC + 16];
        us_callsite_python_text(site, i, text, sizeof text);
        int n = snprintf(out + len, size - len, "%s%s", shown ? " <- " : "", text);
        if (n < 0 || (size_t)n >= size - len)
            return out;
        len += (size_t)n;
    }
    for (int i = 0; i < site->depth && i < native_max; i++, shown++) {
        struct us_frame fr;
        char text[512];
        if (source)
            us_callsite_symbolize_source(site->frames[i], &fr);
        else
            us_callsite_symbolize(site->frames[i], &fr);
        us_callsite_frame_text(&fr, text, sizeof text);
        int n = snprintf(out + len, size - len, "%s%s", shown ? " <- " : "", text);
        if (n < 0 || (size_t)n >= size - len)
            return out;
        len += (size_t)n;
    }
    if (shown == 0)
        snprintf(out, size, "(unknown site)");
    return out;
}
