/* srcline.c - source lines of code addresses through elfutils' libdw,
 * dlopen'ed at report time (see srcline.h).
 *
 * Why libdw: it is the library gdb's neighbours (eu-addr2line, eu-stack,
 * systemd-coredump, perf) use, kept by elfutils and packaged everywhere as
 * libdw.so.1 with a stable ABI; its dwfl layer maps this process's modules
 * and finds separate debug files (build id, .gnu_debuglink, debuginfod's
 * cache) as gdb does, and reads DWARF 5 as gcc 11+ writes it. libbacktrace
 * has no shared library in the distributions (it is compiled into gcc and
 * others), so it could not be loaded at run time; calling addr2line would
 * fork a process per object from an exit handler. */
#include "srcline.h"
#include "resolve.h"

#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* libdwfl.h's types, declared here so that the build needs no elfutils
 * headers (the ABI of libdw.so.1, ELFUTILS_0.158 and older). The callbacks
 * are libdw's own functions (dlsym) and one of ours of the same type:
 * plain pointers. */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
struct dwfl_callbacks {
    void *find_elf;        /* dwfl_linux_proc_find_elf */
    void *find_debuginfo;  /* local_find_debuginfo */
    void *section_address; /* only for relocatable files: none here */
    char **debuginfo_path; /* points to NULL: the default search path */
};

static struct {
    Dwfl *(*begin)(const struct dwfl_callbacks *callbacks);
    void (*report_begin)(Dwfl *dwfl);
    int (*proc_report)(Dwfl *dwfl, pid_t pid);
    int (*report_end)(Dwfl *dwfl, void *removed, void *arg);
    Dwfl_Module *(*addrmodule)(Dwfl *dwfl, uint64_t addr);
    Dwfl_Line *(*module_getsrc)(Dwfl_Module *mod, uint64_t addr);
    const char *(*lineinfo)(Dwfl_Line *line, uint64_t *addr, int *linep, int *colp, uint64_t *mtime,
                            uint64_t *length);
    const char *(*module_addrinfo)(Dwfl_Module *mod, uint64_t addr, uint64_t *offset, Elf64_Sym *sym,
                                   uint32_t *shndx, void **elf, uint64_t *bias);
} dw;

typedef int (*find_debuginfo_fn)(Dwfl_Module *mod, void **userdata, const char *modname, uint64_t base,
                                 const char *file_name, const char *debuglink_file, uint32_t debuglink_crc,
                                 char **debuginfo_file_name);
static find_debuginfo_fn standard_find_debuginfo, build_id_find_debuginfo;

/* Separate debug files on this machine only. libdw's standard search ends
 * by asking the debuginfod servers of DEBUGINFOD_URLS (Ubuntu sets it for
 * every login shell): a download from inside an exit handler, which could
 * hold the program's exit for minutes. Where that variable is set, only the
 * build-id directories are searched (/usr/lib/debug/.build-id: the distro's
 * -dbgsym/-debuginfo packages), which asks no server. */
static int local_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, uint64_t base,
                                const char *file_name, const char *debuglink_file, uint32_t debuglink_crc,
                                char **debuginfo_file_name)
{
    const char *servers = getenv("DEBUGINFOD_URLS");
    find_debuginfo_fn find = servers != NULL && servers[0] != '\0' ? build_id_find_debuginfo : standard_find_debuginfo;
    return find(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
}

static char *debuginfo_path; /* NULL: libdw's default, ":.debug:/usr/lib/debug" */
static struct dwfl_callbacks callbacks = { .debuginfo_path = &debuginfo_path };
static Dwfl *dwfl;            /* kept to the end: it caches what it read */
static bool loaded, tried;
static int rereports;         /* modules loaded after the first map */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define DW_SYM(field, name) (*(void **)&dw.field = us_resolve_in(lib, name)) != NULL

/* Called with lock held. */
static bool load(void)
{
    if (tried)
        return loaded;
    tried = true;
    void *lib = us_resolve_load("libdw.so.1");
    if (lib == NULL)
        return false;
    callbacks.find_elf = us_resolve_in(lib, "dwfl_linux_proc_find_elf");
    *(void **)&standard_find_debuginfo = us_resolve_in(lib, "dwfl_standard_find_debuginfo");
    *(void **)&build_id_find_debuginfo = us_resolve_in(lib, "dwfl_build_id_find_debuginfo");
    callbacks.find_debuginfo = (void *)local_find_debuginfo;
    bool ok = callbacks.find_elf != NULL && standard_find_debuginfo != NULL && build_id_find_debuginfo != NULL &&
              DW_SYM(begin, "dwfl_begin") &&
              DW_SYM(report_begin, "dwfl_report_begin") && DW_SYM(proc_report, "dwfl_linux_proc_report") &&
              DW_SYM(report_end, "dwfl_report_end") && DW_SYM(addrmodule, "dwfl_addrmodule") &&
              DW_SYM(module_getsrc, "dwfl_module_getsrc") && DW_SYM(lineinfo, "dwfl_lineinfo") &&
              DW_SYM(module_addrinfo, "dwfl_module_addrinfo");
    if (!ok || (dwfl = dw.begin(&callbacks)) == NULL)
        return false;
    dw.report_begin(dwfl);
    int rc = dw.proc_report(dwfl, getpid());
    dw.report_end(dwfl, NULL, NULL);
    loaded = rc == 0;
    return loaded;
}

bool us_srcline_available(void)
{
    pthread_mutex_lock(&lock);
    bool ok = load();
    pthread_mutex_unlock(&lock);
    return ok;
}

/* A module loaded after the map was read (dlopen): read the map again, a few
 * times at most (each reads /proc/self/maps). Called with lock held. */
static Dwfl_Module *module_of(uintptr_t addr)
{
    Dwfl_Module *mod = dw.addrmodule(dwfl, addr);
    if (mod == NULL && rereports < 8) {
        Dl_info info;
        if (dladdr((const void *)addr, &info) == 0)
            return NULL; /* in no loaded object: nothing to find */
        rereports++;
        dw.report_begin(dwfl);
        dw.proc_report(dwfl, getpid());
        dw.report_end(dwfl, NULL, NULL);
        mod = dw.addrmodule(dwfl, addr);
    }
    return mod;
}

bool us_srcline_lookup(uintptr_t addr, struct us_srcline *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&lock);
    Dwfl_Module *mod = load() ? module_of(addr) : NULL;
    if (mod != NULL) {
        Dwfl_Line *line = dw.module_getsrc(mod, addr);
        int lineno = 0;
        const char *file = line != NULL ? dw.lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
        if (file != NULL && lineno > 0) {
            snprintf(out->file, sizeof out->file, "%s", file);
            out->line = (unsigned)lineno;
        }
        uint64_t offset = 0, bias = 0;
        Elf64_Sym sym;
        uint32_t shndx = 0;
        void *elf = NULL;
        const char *name = dw.module_addrinfo(mod, addr, &offset, &sym, &shndx, &elf, &bias);
        if (name != NULL && name[0] != '\0') {
            snprintf(out->symbol, sizeof out->symbol, "%s", name);
            out->symbol_offset = (uintptr_t)offset;
        }
    }
    pthread_mutex_unlock(&lock);
    return out->line > 0 || out->symbol[0] != '\0';
}
