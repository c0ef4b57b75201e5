/* unwinder.c - the stack walk call sites are captured with (unwinder.h).
 *
 * Why libunwind: glibc's backtrace(3) goes through libgcc's unwinder, which
 * sets up a full register context on every call: 0.6-2.7 us for 2-12 frames
 * on this project's build machine, 2-4 us a finding on an H100 host, more
 * than a small native copy takes. libunwind's unw_backtrace with a
 * per-thread cache does the same walk in 40-80 ns.
 *
 * Its cache has a price on first use: a return address it has not met costs
 * 2.5-3 us on an H200 host, and a process's first copy meets three or more
 * (session 27, docs/performance.md). Most of that is signal masking: around
 * each lock it takes (its memory pool's, its table search's) libunwind blocks
 * every signal and restores the mask, two rt_sigprocmask system calls, a
 * dozen for one new address. On the build machine a walk through one new
 * return address took 1.5 us, 0.4 us with the masking skipped (session 30).
 * The masking keeps a signal handler that walks with the same copy from
 * deadlocking on a lock the interrupted walk holds. The bundled copy has a
 * soname of its own (US_UNWIND_PRIVATE_SONAME), so no library the program
 * loads can share it, and the shim walks from no signal handler (a walk
 * begun while the thread is walking returns nothing): there the masking is
 * pure cost, and its calls are pointed at a function that makes none. */
#include "unwinder.h"
#include "log.h"
#include "phdr.h"

#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int (*walk_fn)(void **frames, int max);
typedef void (*mask_hook_fn)(void);

#if defined(__x86_64__)
#define UNW_PREFIX "_ULx86_64_"
#define RELOC_JUMP_SLOT R_X86_64_JUMP_SLOT
#define RELOC_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define UNW_PREFIX "_ULaarch64_"
#define RELOC_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define RELOC_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#define UNW_PREFIX "_UL_unknown_" /* the default global cache then */
#define RELOC_JUMP_SLOT (-1)      /* and the masking kept */
#define RELOC_GLOB_DAT (-1)
#endif
#if __ELF_NATIVE_CLASS == 64
#define RELOC_TYPE ELF64_R_TYPE
#define RELOC_SYMBOL ELF64_R_SYM
#else
#define RELOC_TYPE ELF32_R_TYPE
#define RELOC_SYMBOL ELF32_R_SYM
#endif
#define UNW_CACHE_PER_THREAD 2 /* libunwind.h's value: no lock between threads */

/* libunwind's step by step walk, for the slots (us_unwind_slots). Its
 * cursor and context are opaque here (no header): room enough for both,
 * 127 words (1016 bytes) and a ucontext_t (968) in libunwind 1.x on x86-64. */
#define UNW_OPAQUE_BYTES 2048
#define UNW_REG_IP_X86_64 16
#define UNW_REG_SP_X86_64 7
typedef int (*getcontext_fn)(void *context);
typedef int (*init_local_fn)(void *cursor, void *context);
typedef int (*step_fn)(void *cursor);
typedef int (*get_reg_fn)(void *cursor, int reg, uintptr_t *value);

static struct {
    pthread_mutex_t lock; /* choosing only; a walk takes none */
    atomic_bool chosen;
    walk_fn walk;
    getcontext_fn getcontext; /* all four, or none */
    init_local_fn init_local;
    step_fn step;
    get_reg_fn get_reg;
    enum us_unwinder_kind kind;
    bool overridden; /* by a test: */
    const char *bundled_override;
} unwinder = {.lock = PTHREAD_MUTEX_INITIALIZER, .walk = backtrace, .kind = US_UNWINDER_BACKTRACE};

static int logged_unwinder;
static _Thread_local bool walking __attribute__((tls_model("initial-exec")));
static _Thread_local unsigned long masks_skipped __attribute__((tls_model("initial-exec")));
static _Atomic(mask_hook_fn) on_mask;

/* What the private copy's sigprocmask and pthread_sigmask calls reach: the
 * mask is left as it is; libunwind restores the "old" one it is given here
 * through this same function. */
static int mask_nothing(int how, const sigset_t *set, sigset_t *old)
{
    (void)how;
    (void)set;
    if (old != NULL)
        sigemptyset(old);
    masks_skipped++;
    mask_hook_fn hook = atomic_load_explicit(&on_mask, memory_order_relaxed);
    if (hook != NULL)
        hook();
    return 0;
}

/* --- the private copy's imports ------------------------------------------------------ */

/* What a loaded object's dynamic section says, at run-time addresses. */
struct dynamic_view {
    uintptr_t base;
    const char *strtab;
    const ElfW(Sym) *symtab;
    const ElfW(Rela) *plt_relocs; /* DT_JMPREL, when in RELA form */
    size_t plt_relocs_size;
    const ElfW(Rela) *relocs; /* DT_RELA */
    size_t relocs_size;
    const char *soname; /* NULL: none */
    uintptr_t relro_lo, relro_hi; /* PT_GNU_RELRO: read-only once bound; empty when none */
};

/* glibc rewrites the dynamic section's addresses to run-time ones where the
 * section is writable (the usual case); elsewhere they are still offsets
 * from the base, which are below it. */
static uintptr_t dynamic_address(uintptr_t base, ElfW(Addr) value)
{
    return value < base ? base + value : value;
}

struct relro_query {
    uintptr_t base;
    uintptr_t lo, hi;
};

static int relro_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct relro_query *q = arg;
    if (info->dlpi_addr != q->base)
        return 0;
    us_phdr_relro(info, &q->lo, &q->hi);
    return 1;
}

static bool view_dynamic(void *lib, struct dynamic_view *v)
{
    struct link_map *map = NULL;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || map == NULL || map->l_ld == NULL)
        return false;
    memset(v, 0, sizeof *v);
    v->base = map->l_addr;
    bool plt_rela = true, has_soname = false;
    ElfW(Addr) soname = 0;
    for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_STRTAB: v->strtab = (const char *)dynamic_address(v->base, d->d_un.d_ptr); break;
        case DT_SYMTAB: v->symtab = (const ElfW(Sym) *)dynamic_address(v->base, d->d_un.d_ptr); break;
        case DT_JMPREL: v->plt_relocs = (const ElfW(Rela) *)dynamic_address(v->base, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: v->plt_relocs_size = d->d_un.d_val; break;
        case DT_PLTREL: plt_rela = d->d_un.d_val == DT_RELA; break;
        case DT_RELA: v->relocs = (const ElfW(Rela) *)dynamic_address(v->base, d->d_un.d_ptr); break;
        case DT_RELASZ: v->relocs_size = d->d_un.d_val; break;
        case DT_SONAME: soname = d->d_un.d_val; has_soname = true; break;
        default: break;
        }
    }
    if (v->strtab == NULL || v->symtab == NULL)
        return false;
    if (!plt_rela) /* REL form: no 64-bit target of the shim's uses it */
        v->plt_relocs = NULL, v->plt_relocs_size = 0;
    v->soname = has_soname ? v->strtab + soname : NULL;
    struct relro_query q = {.base = v->base};
    dl_iterate_phdr(relro_visit, &q);
    v->relro_lo = q.lo;
    v->relro_hi = q.hi;
    return true;
}

/* One import slot pointed at `to`; a slot the loader made read-only after
 * binding (RELRO) is made writable for the store and read-only again. */
static bool write_slot(const struct dynamic_view *v, void **slot, void *to)
{
    if ((uintptr_t)slot < v->relro_lo || (uintptr_t)slot >= v->relro_hi) {
        *slot = to;
        return true;
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *start = (void *)((uintptr_t)slot & ~(page - 1));
    if (mprotect(start, page, PROT_READ | PROT_WRITE) != 0)
        return false;
    *slot = to;
    (void)mprotect(start, page, PROT_READ);
    return true;
}

/* Points every import of the named functions in the object at `to`; how
 * many slots it pointed. */
static int redirect_imports(const struct dynamic_view *v, const char *const *names, size_t name_count, void *to)
{
    const ElfW(Rela) *tables[2] = {v->plt_relocs, v->relocs};
    size_t sizes[2] = {v->plt_relocs_size, v->relocs_size};
    int pointed = 0;
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; tables[t] != NULL && i < sizes[t] / sizeof(ElfW(Rela)); i++) {
            const ElfW(Rela) *r = &tables[t][i];
            long type = (long)RELOC_TYPE(r->r_info);
            if (type != RELOC_JUMP_SLOT && type != RELOC_GLOB_DAT)
                continue;
            const char *name = v->strtab + v->symtab[RELOC_SYMBOL(r->r_info)].st_name;
            for (size_t k = 0; k < name_count; k++)
                if (strcmp(name, names[k]) == 0 && write_slot(v, (void **)(v->base + r->r_offset), to))
                    pointed++;
        }
    }
    return pointed;
}

/* The private copy's signal masking pointed at mask_nothing; false when the
 * copy is not the private one (or nothing was pointed): its masking stays. */
static bool mask_nothing_in(void *lib)
{
    static const char *const masking[] = {"sigprocmask", "pthread_sigmask"};
    struct dynamic_view v;
    if (!view_dynamic(lib, &v) || v.soname == NULL || strcmp(v.soname, US_UNWIND_PRIVATE_SONAME) != 0)
        return false;
    return redirect_imports(&v, masking, sizeof masking / sizeof masking[0], (void *)mask_nothing) > 0;
}

/* --- choosing --------------------------------------------------------------------------- */

/* DIR/unstall/libunwind.so.8, where DIR holds the shim: GPU machines often
 * lack the library and a package manager, and the build folder is carried
 * there with the copy (tools/bundle-unwind.sh). */
static const char *bundled_path(char *path, size_t size)
{
    Dl_info info;
    if (dladdr((const void *)bundled_path, &info) == 0 || info.dli_fname == NULL)
        return NULL;
    const char *slash = strrchr(info.dli_fname, '/');
    int dir_len = slash != NULL ? (int)(slash - info.dli_fname) : 1;
    const char *dir = slash != NULL ? info.dli_fname : ".";
    int n = snprintf(path, size, "%.*s/unstall/libunwind.so.8", dir_len, dir);
    return n > 0 && (size_t)n < size ? path : NULL;
}

static void choose_locked(void)
{
    unwinder.walk = backtrace;
    unwinder.kind = US_UNWINDER_BACKTRACE;
    unwinder.getcontext = NULL;
    /* Under ThreadSanitizer, libunwind's per-thread cache destructor runs at
     * thread exit after TSan tore the thread's state down, and crashes the
     * program (seen in make sanitize): stay with backtrace(3) there. */
    if (dlsym(RTLD_DEFAULT, "__tsan_init") != NULL) {
        us_log_once(&logged_unwinder, US_LOG_INFO, "ThreadSanitizer present: call sites are captured with backtrace(3)");
        return;
    }
    char buf[PATH_MAX];
    const char *from = unwinder.overridden ? unwinder.bundled_override : bundled_path(buf, sizeof buf);
    void *lib = from != NULL ? dlopen(from, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (lib == NULL) {
        from = "the system";
        lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    }
    walk_fn fast = lib != NULL ? (walk_fn)dlsym(lib, "unw_backtrace") : NULL;
    int (*set_caching)(void *, int) =
        lib != NULL ? (int (*)(void *, int))dlsym(lib, UNW_PREFIX "set_caching_policy") : NULL;
    void **space = lib != NULL ? dlsym(lib, UNW_PREFIX "local_addr_space") : NULL;
    if (fast == NULL) {
        us_log_once(&logged_unwinder, US_LOG_INFO,
                    "libunwind.so.8 not found: call sites are captured with backtrace(3), about 1-4 us a finding "
                    "(install libunwind8 for 40-80 ns)");
        return;
    }
    if (set_caching != NULL && space != NULL)
        set_caching(*space, UNW_CACHE_PER_THREAD);
    bool private_copy = mask_nothing_in(lib);
    unwinder.walk = fast;
    unwinder.kind = private_copy ? US_UNWINDER_LIBUNWIND_PRIVATE : US_UNWINDER_LIBUNWIND;
#if defined(__x86_64__)
    *(void **)&unwinder.init_local = dlsym(lib, UNW_PREFIX "init_local");
    *(void **)&unwinder.step = dlsym(lib, UNW_PREFIX "step");
    *(void **)&unwinder.get_reg = dlsym(lib, UNW_PREFIX "get_reg");
    if (unwinder.init_local != NULL && unwinder.step != NULL && unwinder.get_reg != NULL)
        *(void **)&unwinder.getcontext = dlsym(lib, "_Ux86_64_getcontext");
#endif
    us_log_once(&logged_unwinder, US_LOG_INFO, "call sites are captured with libunwind (%s%s)", from,
                private_copy ? ", a private copy: its signal masking off" : "");
}

static void choose_slow(void)
{
    pthread_mutex_lock(&unwinder.lock);
    if (!atomic_load_explicit(&unwinder.chosen, memory_order_relaxed)) {
        choose_locked();
        atomic_store_explicit(&unwinder.chosen, true, memory_order_release);
    }
    pthread_mutex_unlock(&unwinder.lock);
}

/* The unwinder chosen, on the first call: one load after that. */
static inline void choose(void)
{
    if (!atomic_load_explicit(&unwinder.chosen, memory_order_acquire))
        choose_slow();
}

int us_unwind(void **frames, int max)
{
    if (walking)
        return 0;
    walking = true;
    choose();
    int n = unwinder.walk(frames, max);
    walking = false;
    return n;
}

__attribute__((noinline)) int us_unwind_slots(void *const *rets, int n, uintptr_t *slots)
{
    choose();
    if (walking || unwinder.getcontext == NULL || n < 1)
        return 0;
    walking = true;
    _Alignas(64) unsigned char context[UNW_OPAQUE_BYTES], cursor[UNW_OPAQUE_BYTES];
    int found = 0;
    if (unwinder.getcontext(context) == 0 && unwinder.init_local(cursor, context) == 0) {
        /* frame by frame from this one: a return address is the IP of the
         * frame it returns to, and sits just below that frame's SP */
        for (int steps = 0; found < n && steps < 256 && unwinder.step(cursor) > 0; steps++) {
            uintptr_t ip, sp;
            if (unwinder.get_reg(cursor, UNW_REG_IP_X86_64, &ip) != 0 ||
                unwinder.get_reg(cursor, UNW_REG_SP_X86_64, &sp) != 0)
                break;
            if (ip == (uintptr_t)rets[found])
                slots[found++] = sp - sizeof(void *);
            else if (found > 0)
                break; /* not in the walk's order */
        }
    }
    walking = false;
    return found;
}

enum us_unwinder_kind us_unwinder_kind(void)
{
    choose();
    return unwinder.kind;
}

unsigned long us_unwinder_masks_skipped(void)
{
    return masks_skipped;
}

void us_unwinder_choose_from(const char *bundled_override)
{
    pthread_mutex_lock(&unwinder.lock);
    unwinder.overridden = true;
    unwinder.bundled_override = bundled_override;
    atomic_store_explicit(&unwinder.chosen, false, memory_order_release);
    pthread_mutex_unlock(&unwinder.lock);
}

void us_unwinder_on_mask_for_test(void (*fn)(void))
{
    atomic_store_explicit(&on_mask, fn, memory_order_relaxed);
}
