/* phdr.h - what a loaded object's program headers say, for the shim's own
 * walks over dl_iterate_phdr (prefault.c). */
#ifndef UNSTALL_PHDR_H
#define UNSTALL_PHDR_H

#include <link.h>
#include <stdint.h>

/* The object's PT_GNU_RELRO range, at run-time addresses: read-only once
 * the loader has bound it. lo == hi (both 0) when it has none. */
static inline void us_phdr_relro(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
    *lo = *hi = 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
            *lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            *hi = *lo + info->dlpi_phdr[i].p_memsz;
        }
}

#endif
