/* prefault.c - see prefault.h. */
#include "prefault.h"
#include "phdr.h"

#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older headers lack it, older kernels refuse it */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* A variable of this object: the object whose segments hold it is ours. */
static char own_marker;

struct own_object {
    struct dl_phdr_info info;
    bool found;
};

static bool holds_marker(const struct dl_phdr_info *info)
{
    uintptr_t mark = (uintptr_t)&own_marker;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && mark >= lo && mark < lo + ph->p_memsz)
            return true;
    }
    return false;
}

static int find_own(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct own_object *own = arg;
    if (!holds_marker(info))
        return 0;
    own->info = *info;
    own->found = true;
    return 1;
}

/* [start, end) rounded out to pages, mapped in (us_prefault_range). */
static size_t populate(uintptr_t start, uintptr_t end, uintptr_t page, bool write)
{
    start &= ~(page - 1);
    end = (end + page - 1) & ~(page - 1);
    if (end <= start)
        return 0;
    if (madvise((void *)start, end - start, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
        return end - start;
    for (uintptr_t p = start; p < end; p += page) {
        if (write)
            __atomic_fetch_add((volatile char *)p, 0, __ATOMIC_RELAXED);
        else
            (void)*(volatile const char *)p;
    }
    return end - start;
}

static uintptr_t page_bytes(void)
{
    long page_size = sysconf(_SC_PAGESIZE);
    return page_size > 0 ? (uintptr_t)page_size : 4096u;
}

size_t us_prefault_range(void *start, size_t bytes, bool write)
{
    return populate((uintptr_t)start, (uintptr_t)start + bytes, page_bytes(), write);
}

size_t us_prefault_self(void)
{
    struct own_object own = {.found = false};
    uintptr_t page = page_bytes();
    if (dl_iterate_phdr(find_own, &own) == 0 || !own.found)
        return 0;
    const struct dl_phdr_info *info = &own.info;
    uintptr_t relro_lo, relro_hi;
    us_phdr_relro(info, &relro_lo, &relro_hi);
    size_t covered = 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!(ph->p_flags & PF_W)) {
            covered += populate(lo, hi, page, false);
            continue;
        }
        /* the RELRO head is read-only once relocated: read it; the rest is
         * written from its first whole page (RELRO ends on a page boundary) */
        uintptr_t w = lo;
        if (relro_hi > lo && relro_hi <= hi) {
            covered += populate(lo > relro_lo ? lo : relro_lo, relro_hi, page, false);
            w = (relro_hi + page - 1) & ~(page - 1);
        }
        if (w < hi)
            covered += populate(w, hi, page, true);
    }
    return covered;
}

void *us_map_on_boundary(size_t bytes, size_t boundary, int flags)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    bytes = (bytes + page - 1) / page * page;
    char *m = mmap(NULL, bytes + boundary, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)m + boundary - 1) & ~(uintptr_t)(boundary - 1));
    if (p > m)
        munmap(m, (size_t)(p - m));
    if (m + bytes + boundary > p + bytes)
        munmap(p + bytes, (size_t)(m + bytes + boundary - (p + bytes)));
    return p;
}
