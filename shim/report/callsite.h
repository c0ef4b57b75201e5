/* callsite.h - where a finding came from: capture, identify, symbolize.
 *
 * Capture is cheap and runs only when a rule fires: a stack walk
 * (unwinder.h) into the site, the shim's own leading frames dropped (those
 * inside the shim's executable segment), and for a Python program the
 * innermost Python frames: through the interpreter's C API (resolved with
 * dlsym, never linked) when the calling thread holds the GIL, or, when it
 * released the GIL (PyTorch does around tensor operations), by reading its
 * frames without the API for the CPython versions whose layout is known.
 * The GIL is never taken. Nothing is symbolized at capture: frames are named
 * (dladdr, demangled when the program has libstdc++) when a warning, a
 * strict-mode message or the report needs them. */
#ifndef UNSTALL_CALLSITE_H
#define UNSTALL_CALLSITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "callsite_python.h"

#define US_SITE_MAX_FRAMES 32

/* A call site: the native return addresses, innermost first, with the
 * shim's own frames removed (symbolized only when reported), and for a
 * Python program whose calling thread holds the GIL, the innermost Python
 * frames as text (callsite.h). */
struct us_site {
    void *frames[US_SITE_MAX_FRAMES];
    int depth;
    int py_depth; /* 0: no Python frames (not Python, GIL not held, option off) */
    char py_file[US_SITE_PY_FRAMES][US_SITE_PY_FILE]; /* "path:line" */
    char py_func[US_SITE_PY_FRAMES][US_SITE_PY_FUNC];
};

/* Capture the caller's stack into *site: the frames from the caller of this
 * function outwards, the shim's own leading frames dropped, at most option
 * callsite_depth of them, and Python frames when option python_frames is on
 * and they can be read safely. */
void us_site_capture(struct us_site *site);

/* The calling thread's next capture is remembered at once, not at the
 * second miss of its key (walkmemo.h): for a rehearsal, whose learning pays
 * the step by step walk's first use (11-14 us) before the program's copies. */
void us_callsite_learn_next(void);

/* Does the one-time work of the first capture now: the shim's own code
 * range, the Python API look-up, the unwinder's loading. */
void us_callsite_prepare(void);

/* A 64-bit hash of the native frames and the Python frames: equal sites, equal
 * hashes; never 0. */
uint64_t us_callsite_hash(const struct us_site *site);

/* The address range [lo, hi) whose leading frames capture drops. Found once,
 * at the first capture, as the executable segment holding the shim's code;
 * empty when the shim is linked into the main program (unit tests), which
 * would otherwise drop every frame. Tests set it: (0, 0) drops nothing. */
void us_callsite_set_self_range(uintptr_t lo, uintptr_t hi);
void us_callsite_self_range(uintptr_t *lo, uintptr_t *hi);

/* The executable PT_LOAD segment that holds addr, and whether its object is
 * the main program. False if no loaded object holds addr. */
bool us_callsite_segment_of(const void *addr, uintptr_t *lo, uintptr_t *hi, bool *main_program);

/* One native frame, named. */
struct us_frame {
    char module[96];      /* basename of the object, "" if none holds the address */
    char path[256];       /* the object's path as loaded */
    char function[160];   /* demangled without parameters where possible, else as
                           * the symbol table has it; "" when no symbol covers it */
    char symbol[160];     /* the raw (mangled) symbol, "" when none */
    uintptr_t offset;     /* from the function's start, or from the module's base */
    uintptr_t module_offset; /* from the module's base (for addr2line) */
    char file[256];       /* source file from the debug information, "" if none */
    unsigned line;        /* its line; 0 when unknown or not looked up */
    bool source_looked;   /* file and line were looked up (symbolize_source) */
};

/* Name a return address (looked up at pc - 1, so that a call at the end of a
 * function names that function). Never fails: an unknown address leaves
 * module and function empty. Cached per address: cheap when repeated. */
void us_callsite_symbolize(const void *pc, struct us_frame *out);

/* us_callsite_symbolize, and where the object has debug information the
 * source file and line of the call, and the function from the full symbol
 * table when the dynamic one lacks it (srcline.h: libdw, loaded at run
 * time). Reads debug information: for the report at exit, never on a CUDA
 * call. Cached with the frame. */
void us_callsite_symbolize_source(const void *pc, struct us_frame *out);

/* "module!function+0x1a2", "module+0x1234" (no symbol) or "0x7f..." (no
 * module), then " (file.c:42)" when the source line is known (the file's
 * last component; the JSON report has the path), into out (always
 * terminated). Returns out. */
char *us_callsite_frame_text(const struct us_frame *fr, char *out, size_t size);

/* "module!function" for allow-list patterns; "module" without a symbol. */
char *us_callsite_frame_key(const struct us_frame *fr, char *out, size_t size);

/* A Python frame's text for a line: "path:line (function)" with a long path
 * shortened to its last two components. */
char *us_callsite_python_text(const struct us_site *site, int i, char *out, size_t size);

/* The site on one line, Python frames first, then up to native_max native
 * frames, joined with " <- ". "(unknown site)" when it has no frame. */
char *us_callsite_line(const struct us_site *site, int native_max, char *out, size_t size);

/* The same with the native frames' source lines (us_callsite_symbolize_source):
 * for the report. */
char *us_callsite_line_source(const struct us_site *site, int native_max, char *out, size_t size);

#endif
