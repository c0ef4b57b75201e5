/* callsite_python.c - the innermost Python frames of the calling thread, for
 * a call site (see callsite_python.h): through CPython's C API while the
 * thread holds the GIL, by reading the interpreter's structures where it
 * released it. */
#include "callsite_python.h"
#include "hot.h"
#include "resolve.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* Where a walk writes: the call site's Python fields. */
struct py_frames {
    int depth;
    char (*file)[US_SITE_PY_FILE];
    char (*func)[US_SITE_PY_FUNC];
};

/* The few functions of CPython's C API that read the current thread's frames
 * (all since 3.9), found with dlsym in the process, never linked. Objects are
 * opaque here. */
struct py_api {
    int (*is_initialized)(void);
    int (*gil_check)(void);
    void *(*this_thread_state)(void);
    void *(*current_state)(void); /* no fatal error when none */
    void *(*thread_frame)(void *tstate);
    void *(*frame_code)(void *frame);
    int (*frame_line)(void *frame);
    void *(*frame_back)(void *frame);
    void *(*get_attr)(void *obj, const char *name);
    const char *(*as_utf8)(void *obj);
    void (*dec_ref)(void *obj);
    void (*err_fetch)(void **type, void **value, void **tb);
    void (*err_restore)(void *type, void *value, void *tb);
    /* for the walk of a thread that released the GIL: pure reads only */
    const char *(*version)(void);
    int (*addr2line)(void *code, int byte_offset);
    ssize_t (*str_length)(void *str);
    uint32_t (*str_char)(void *str, ssize_t index);
    void *code_type, *str_type;
};

static struct py_api py;
static atomic_bool py_ok;
static void detached_init(void);
static pthread_once_t py_once = PTHREAD_ONCE_INIT;

#define PY_SYM(field, name) (*(void **)&py.field = us_resolve_global(name)) != NULL

static void py_resolve(void)
{
    /* the GIL check is the marker: without it nothing else is looked up */
    if (atomic_load(&py_ok) || us_resolve_global("PyGILState_Check") == NULL)
        return;
    *(void **)&py.current_state = us_resolve_global("PyThreadState_GetUnchecked"); /* 3.13 */
    if (py.current_state == NULL)
        *(void **)&py.current_state = us_resolve_global("_PyThreadState_UncheckedGet");
    bool ok = py.current_state != NULL && PY_SYM(is_initialized, "Py_IsInitialized") &&
            PY_SYM(gil_check, "PyGILState_Check") &&
            PY_SYM(this_thread_state, "PyGILState_GetThisThreadState") &&
            PY_SYM(thread_frame, "PyThreadState_GetFrame") && PY_SYM(frame_code, "PyFrame_GetCode") &&
            PY_SYM(frame_line, "PyFrame_GetLineNumber") && PY_SYM(frame_back, "PyFrame_GetBack") &&
            PY_SYM(get_attr, "PyObject_GetAttrString") && PY_SYM(as_utf8, "PyUnicode_AsUTF8") &&
            PY_SYM(dec_ref, "Py_DecRef") && PY_SYM(err_fetch, "PyErr_Fetch") &&
            PY_SYM(err_restore, "PyErr_Restore");
    if (ok)
        detached_init();
    atomic_store(&py_ok, ok); /* publishes the pointers */
}


/* Copy text into out, keeping its tail when it does not fit ("...tail"). */
static void copy_tail(char *out, size_t size, const char *text)
{
    size_t len = strlen(text);
    if (len < size) {
        memcpy(out, text, len + 1);
        return;
    }
    snprintf(out, size, "...%s", text + len - (size - 4));
}

/* --- Python frames of a thread that released the GIL ------------------------------------
 *
 * Most CUDA calls of a PyTorch program come from C++ that released the GIL
 * (gil_scoped_release around tensor operations). The calling thread's Python
 * frames are still there and cannot change until it takes the GIL again, but
 * the C API may not be used without the GIL (it allocates frame objects and
 * touches reference counts). So the walk reads the interpreter's structures
 * itself, for the CPython versions whose layout is known below, and calls only
 * functions that read (PyCode_Addr2Line, PyUnicode_GetLength/ReadChar) on
 * objects it has checked. Until one walk has confirmed the layout (every
 * object of the expected type), memory is read with process_vm_readv on the
 * process itself, which fails instead of faulting on a wrong address; where
 * that is refused, no walk is made. Unknown versions and free-threaded builds
 * get native frames only. */

struct py_layout {
    int minor;                   /* 3.<minor>, standard (GIL) build, 64-bit */
    size_t tstate_cframe;        /* PyThreadState.cframe */
    size_t cframe_current;       /* _PyCFrame.current_frame */
    size_t frame_code, frame_previous, frame_instr, frame_owner; /* _PyInterpreterFrame */
    int owned_by_cstack;         /* the owner value of C entry frames; -1 none */
    size_t code_filename, code_qualname, code_firsttraceable, code_adaptive; /* PyCodeObject */
};

/* offsetof() read off each version's headers (CPython 3.11.2 and 3.12.3, x86_64;
 * the probe is in docs/findings.md, "Python frames"). */
static const struct py_layout py_layouts[] = {
    { 11, 56, 8, 32, 48, 56, 69, -1, 112, 128, 168, 184 },
    { 12, 56, 0, 0, 8, 56, 70, 3, 112, 128, 176, 192 },
};

static const struct py_layout *py_layout; /* NULL: no detached walk */
static atomic_bool py_layout_confirmed;   /* direct reads from now on */

#define PY_OB_TYPE 8 /* PyObject: ob_refcnt, ob_type */

static bool safe_read(const void *addr, void *out, size_t len)
{
    if (atomic_load_explicit(&py_layout_confirmed, memory_order_relaxed)) {
        memcpy(out, addr, len);
        return true;
    }
    if ((uintptr_t)addr < 4096)
        return false;
    struct iovec local = { out, len }, remote = { (void *)addr, len };
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len;
}

static void detached_init(void)
{
    *(void **)&py.version = us_resolve_global("Py_GetVersion");
    *(void **)&py.addr2line = us_resolve_global("PyCode_Addr2Line");
    *(void **)&py.str_length = us_resolve_global("PyUnicode_GetLength");
    *(void **)&py.str_char = us_resolve_global("PyUnicode_ReadChar");
    py.code_type = us_resolve_global("PyCode_Type");
    py.str_type = us_resolve_global("PyUnicode_Type");
    if (py.version == NULL || py.addr2line == NULL || py.str_length == NULL || py.str_char == NULL ||
        py.code_type == NULL || py.str_type == NULL || sizeof(void *) != 8)
        return;
    const char *v = py.version();
    int major = 0, minor = 0;
    if (v == NULL || sscanf(v, "%d.%d", &major, &minor) != 2 || major != 3 || strstr(v, "free-threading") != NULL)
        return;
    /* process_vm_readv on itself must work: it guards the first walk */
    long probe = 42, copy = 0;
    struct iovec local = { &copy, sizeof copy }, remote = { &probe, sizeof probe };
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof copy || copy != 42)
        return;
    for (size_t i = 0; i < sizeof py_layouts / sizeof py_layouts[0]; i++)
        if (py_layouts[i].minor == minor)
            py_layout = &py_layouts[i];
}

/* Whether obj is an object of exactly this type (read safely). */
static bool is_type(const void *obj, const void *type)
{
    const void *t = NULL;
    return obj != NULL && safe_read((const char *)obj + PY_OB_TYPE, &t, sizeof t) && t == type;
}

/* A str's text as UTF-8, its tail kept when long. The object is checked to
 * be a str first; GetLength and ReadChar only read it. */
static bool py_str_text(void *str, char *out, size_t size)
{
    if (!is_type(str, py.str_type))
        return false;
    ssize_t len = py.str_length(str);
    if (len < 0)
        return false;
    ssize_t from = len > 200 ? len - 200 : 0;
    char text[200 * 4 + 8];
    size_t n = 0;
    for (ssize_t i = from; i < len; i++) {
        uint32_t c = py.str_char(str, i);
        if (c < 0x80) {
            text[n++] = (char)c;
        } else if (c < 0x800) {
            text[n++] = (char)(0xc0 | (c >> 6));
            text[n++] = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            text[n++] = (char)(0xe0 | (c >> 12));
            text[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
            text[n++] = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x110000) {
            text[n++] = (char)(0xf0 | (c >> 18));
            text[n++] = (char)(0x80 | ((c >> 12) & 0x3f));
            text[n++] = (char)(0x80 | ((c >> 6) & 0x3f));
            text[n++] = (char)(0x80 | (c & 0x3f));
        } else {
            text[n++] = '?';
        }
    }
    text[n] = '\0';
    copy_tail(out, size, text);
    return true;
}

/* Names of code objects, cached: the same functions call CUDA again and
 * again. An entry holds while the code object at that address still names
 * the same filename and qualname objects. */
#define PY_NAME_CACHE 64
struct py_name {
    const void *code, *filename, *qualname;
    char file[US_SITE_PY_FILE];
    char func[US_SITE_PY_FUNC];
};
static struct py_name py_names[PY_NAME_CACHE];
static pthread_mutex_t py_names_lock = PTHREAD_MUTEX_INITIALIZER;

static bool py_code_names(const void *code, void *filename, void *qualname, char *file, size_t file_size,
                          char *func, size_t func_size)
{
    struct py_name *e = &py_names[((uintptr_t)code >> 4) % PY_NAME_CACHE];
    pthread_mutex_lock(&py_names_lock);
    bool hit = e->code == code && e->filename == filename && e->qualname == qualname;
    if (hit) {
        snprintf(file, file_size, "%s", e->file);
        snprintf(func, func_size, "%s", e->func);
    }
    pthread_mutex_unlock(&py_names_lock);
    if (hit)
        return true;
    if (!py_str_text(filename, file, file_size))
        return false;
    if (qualname == NULL || !py_str_text(qualname, func, func_size))
        func[0] = '\0';
    pthread_mutex_lock(&py_names_lock);
    e->code = code;
    e->filename = filename;
    e->qualname = qualname;
    snprintf(e->file, sizeof e->file, "%s", file);
    snprintf(e->func, sizeof e->func, "%s", func);
    pthread_mutex_unlock(&py_names_lock);
    return true;
}

/* The innermost frames of tstate, a thread state of this thread that is not
 * running Python now (it released the GIL). */
static void py_capture_detached(struct py_frames *site, void *tstate)
{
    const struct py_layout *L = py_layout;
    void *cframe = NULL, *frame = NULL;
    if (!safe_read((char *)tstate + L->tstate_cframe, &cframe, sizeof cframe) || cframe == NULL ||
        !safe_read((char *)cframe + L->cframe_current, &frame, sizeof frame))
        return;
    bool checked = true;
    for (int steps = 0; frame != NULL && site->depth < US_SITE_PY_FRAMES && steps < 64; steps++) {
        unsigned char fb[128];
        unsigned char cb[256];
        if (L->frame_owner + 1 > sizeof fb || L->code_adaptive > sizeof cb ||
            !safe_read(frame, fb, L->frame_owner + 1)) {
            checked = false;
            break;
        }
        void *code, *previous, *instr;
        memcpy(&code, fb + L->frame_code, sizeof code);
        memcpy(&previous, fb + L->frame_previous, sizeof previous);
        memcpy(&instr, fb + L->frame_instr, sizeof instr);
        char owner = (char)fb[L->frame_owner];
        frame = previous;
        if (L->owned_by_cstack >= 0 && owner == L->owned_by_cstack)
            continue; /* the C entry frame of an evaluation */
        if (!is_type(code, py.code_type) || !safe_read(code, cb, L->code_adaptive)) {
            checked = false;
            break;
        }
        void *filename, *qualname;
        int firsttraceable;
        memcpy(&filename, cb + L->code_filename, sizeof filename);
        memcpy(&qualname, cb + L->code_qualname, sizeof qualname);
        memcpy(&firsttraceable, cb + L->code_firsttraceable, sizeof firsttraceable);
        long lasti = ((char *)instr - ((char *)code + L->code_adaptive)) / 2; /* code units */
        if (lasti < firsttraceable || lasti > (1l << 28))
            continue; /* a frame that has not started */
        int i = site->depth;
        char file[US_SITE_PY_FILE];
        if (!py_code_names(code, filename, qualname, file, sizeof file, site->func[i], sizeof site->func[i])) {
            checked = false;
            break;
        }
        int line = py.addr2line(code, (int)lasti * 2);
        char text[US_SITE_PY_FILE + 16];
        snprintf(text, sizeof text, "%s:%d", file, line);
        copy_tail(site->file[i], sizeof site->file[i], text);
        site->depth++;
    }
    if (checked && site->depth > 0)
        atomic_store(&py_layout_confirmed, true);
}

bool us_callsite_python_detached(void) { return us_callsite_python_available() && py_layout != NULL; }

bool us_callsite_python_available(void)
{
    pthread_once(&py_once, py_resolve);
    return atomic_load_explicit(&py_ok, memory_order_acquire);
}

void us_callsite_python_rescan(void)
{
    pthread_once(&py_once, py_resolve);
    py_resolve();
}

/* The string attribute name of obj into out; false (and no error left set by
 * us: the caller restores the saved one) if it has none. */
static bool py_string_attr(void *obj, const char *name, char *out, size_t size, bool tail)
{
    void *value = py.get_attr(obj, name);
    if (value == NULL)
        return false;
    const char *text = py.as_utf8(value);
    if (text != NULL) {
        if (tail)
            copy_tail(out, size, text);
        else
            snprintf(out, size, "%s", text);
    }
    py.dec_ref(value);
    return text != NULL;
}

/* Read the innermost frames of this thread. Only while this thread holds the
 * GIL (its thread state is the current one); never takes the GIL. Every new
 * reference is released; an exception set on entry is kept as it was. */
US_HOT static void py_capture(struct py_frames *site)
{
    site->depth = 0;
    if (!us_callsite_python_available() || !py.is_initialized())
        return;
    void *tstate = py.current_state();
    void *mine = py.this_thread_state();
    if (mine == NULL)
        return; /* a thread that never ran Python */
    if (tstate != mine || !py.gil_check()) {
        /* this thread released the GIL (3.12+: it has no current thread
         * state; 3.11: the current one is another thread's or none) */
        if (py_layout != NULL && tstate != mine)
            py_capture_detached(site, mine);
        return;
    }
    void *et = NULL, *ev = NULL, *etb = NULL;
    py.err_fetch(&et, &ev, &etb);
    void *frame = py.thread_frame(tstate);
    while (frame != NULL && site->depth < US_SITE_PY_FRAMES) {
        int i = site->depth;
        void *code = py.frame_code(frame);
        if (code != NULL) {
            char file[US_SITE_PY_FILE * 2];
            int line = py.frame_line(frame);
            if (py_string_attr(code, "co_filename", file, sizeof file - 16, true)) {
                char text[US_SITE_PY_FILE * 2 + 16];
                snprintf(text, sizeof text, "%s:%d", file, line);
                copy_tail(site->file[i], sizeof site->file[i], text);
                site->func[i][0] = '\0';
                if (!py_string_attr(code, "co_qualname", site->func[i], sizeof site->func[i], false) &&
                    !py_string_attr(code, "co_name", site->func[i], sizeof site->func[i], false))
                    site->func[i][0] = '\0';
                site->depth++;
            }
            py.dec_ref(code);
        }
        void *back = py.frame_back(frame);
        py.dec_ref(frame);
        frame = back;
    }
    if (frame != NULL)
        py.dec_ref(frame);
    py.err_restore(et, ev, etb); /* clears whatever our lookups may have set */
}

US_HOT int us_callsite_python_capture(char file[][US_SITE_PY_FILE], char func[][US_SITE_PY_FUNC])
{
    struct py_frames frames = { .depth = 0, .file = file, .func = func };
    py_capture(&frames);
    return frames.depth;
}
