/* srcline.h - source file and line of a code address, from the debug
 * information of the object that holds it, at report time only.
 *
 * elfutils' libdw (its dwfl layer: the process's modules from /proc/self/maps,
 * separate debug files by build id or .gnu_debuglink under /usr/lib/debug)
 * does the reading. It is loaded with dlopen when first needed, never linked:
 * the shim runs where it is missing (Debian/Ubuntu package libdw1), and frames
 * then keep their module+offset form. Nothing here runs on a CUDA call: the
 * report asks at exit. */
#ifndef UNSTALL_SRCLINE_H
#define UNSTALL_SRCLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct us_srcline {
    char file[256];     /* the source file as the debug information names it */
    unsigned line;      /* 0: no line information */
    char symbol[160];   /* the symbol table's name for the address ("" none),
                         * also for functions the dynamic table lacks */
    uintptr_t symbol_offset; /* address - the symbol's start */
};

/* Look addr (a code address in this process: a return address minus one)
 * up. False when libdw is not there or nothing is known about addr; out is
 * then zeroed. Serialized internally: safe from any thread. */
bool us_srcline_lookup(uintptr_t addr, struct us_srcline *out);

/* Whether libdw could be loaded (loads it on the first call). */
bool us_srcline_available(void);

#endif
