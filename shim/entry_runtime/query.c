/* query.c - what a program may ask the shim about itself: the one export
 * that is not a CUDA function. A test harness inside the program
 * (tools/pytest_unstall.py, through ctypes) learns from it that strict mode
 * failed a call, and where, even where the program swallowed the error. */
#include <stddef.h>

#include "export.h"
#include "findings.h"

/* How many calls strict mode has failed in this process, and into latest
 * (terminated, cut to size; NULL or size 0: not written) the latest one:
 * "rule (severity) in api at site", the site's Python file:line first; ""
 * before the first. 0 outside strict mode. */
US_EXPORT unsigned long long unstall_strict_failures(char *latest, size_t size)
{
    return (unsigned long long)us_findings_forbidden_total(latest, size);
}
