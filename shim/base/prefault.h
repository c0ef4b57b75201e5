/* prefault.h - code pages mapped in before the calls that need them. */
#ifndef UNSTALL_PREFAULT_H
#define UNSTALL_PREFAULT_H

/* Maps in the executable pages of the loaded object that holds `addr`
 * (madvise MADV_POPULATE_READ, Linux 5.14 and later; elsewhere nothing
 * happens). For the shim's own code at its start, and for libunwind's once
 * loaded: the first finding of a process runs code that no earlier call ran,
 * and each page of it would fault in on the way. */
void us_prefault_code_of(const void *addr);

#endif
