/* callsite_python.h - the Python frames of a call site.
 *
 * For a Python program, the innermost Python frames of the calling thread,
 * as "path:line" and function name: through CPython's C API (found with
 * dlsym, never linked) while the thread holds the GIL, or, where it released
 * the GIL (PyTorch's C++ around tensor operations), by reading the
 * interpreter's structures for the CPython versions whose layout is known.
 * The GIL is never taken. */
#ifndef UNSTALL_CALLSITE_PYTHON_H
#define UNSTALL_CALLSITE_PYTHON_H

#include <stdbool.h>

#define US_SITE_PY_FRAMES 3    /* Python frames kept, innermost first */
#define US_SITE_PY_FILE 160    /* "path:line", the path's tail kept if long */
#define US_SITE_PY_FUNC 48

/* The calling thread's innermost Python frames into file[i] and func[i]
 * (US_SITE_PY_FRAMES of each at most); returns how many, 0 when the process
 * runs no Python or they cannot be read safely. */
int us_callsite_python_capture(char file[][US_SITE_PY_FILE], char func[][US_SITE_PY_FUNC]);

/* Whether Python's C API was found in the process. Looked up once, at the
 * first capture; us_callsite_python_rescan looks again (tests, which load
 * Python after the first capture). */
bool us_callsite_python_available(void);
void us_callsite_python_rescan(void);

/* Whether the frames of a thread that released the GIL can be read: CPython
 * 3.11 and 3.12 (standard builds), whose layout callsite_python.c knows. */
bool us_callsite_python_detached(void);

#endif
