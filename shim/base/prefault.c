/* prefault.c - see prefault.h.
 *
 * Why: a process's first finding (its first pageable copy, say) runs the
 * capture, record and report code for the first time, and each 4 KiB page of
 * it is mapped in by a minor fault on the way; on the H100 host's virtual
 * machine a first 4 B pageable H2D took 60-100 us under the shim against
 * 27-47 natively, 30 us of it with findings on and none of it with mode off.
 * Populating the pages at the shim's start, on the program's first CUDA call
 * (usually the one that creates its context, hundreds of milliseconds),
 * moves that cost out of the copy. One system call per object; the pages
 * are the file's, shared with every process that maps it. */
#include "prefault.h"

#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

struct code_range {
    uintptr_t addr, lo, hi;
};

static int find_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct code_range *r = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (r->addr >= lo && r->addr < hi) {
            r->lo = lo;
            r->hi = hi;
            return 1;
        }
    }
    return 0;
}

void us_prefault_code_of(const void *addr)
{
    struct code_range r = {.addr = (uintptr_t)addr};
    if (addr == NULL || dl_iterate_phdr(find_segment, &r) == 0)
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = r.lo & ~(page - 1), hi = (r.hi + page - 1) & ~(page - 1);
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_READ); /* an older kernel says EINVAL: nothing lost */
}
