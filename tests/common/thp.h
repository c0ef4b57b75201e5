/* thp.h - for tests of the D2H's huge-page advice (hostcopy.h,
 * us_hostcopy_advise_fresh): whether the kernel would act on it, and whether
 * the mapping holding an address carries it (VmFlags "hg" in
 * /proc/self/smaps). Header-only: the unit and pipeline tests include it. */
#ifndef UNSTALL_TEST_THP_H
#define UNSTALL_TEST_THP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* THP present and its mode madvise or always (what the shim reads too; the
 * test reads it on its own, so that a wrong reading in the shim fails). */
static inline bool thp_advice_works(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == NULL)
        return false;
    char mode[128] = "";
    bool ok = fgets(mode, sizeof mode, f) != NULL && strstr(mode, "[never]") == NULL && strchr(mode, '[') != NULL;
    fclose(f);
    return ok;
}

/* 1: the mapping that holds `addr` was advised MADV_HUGEPAGE; 0: not; -1: no
 * such mapping (or smaps unreadable). */
static inline int thp_advised_at(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL)
        return -1;
    char line[512];
    bool inside = false;
    int found = -1;
    uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && line[strspn(line, "0123456789abcdef")] == '-') {
            inside = a >= lo && a < hi;
            continue;
        }
        if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL ? 1 : 0;
            break;
        }
    }
    fclose(f);
    return found;
}

#endif
