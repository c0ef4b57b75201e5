/* dlsym.c - the interposed dlsym.
 *
 * The static runtime and driver-API programs take libcuda's functions with
 * dlsym(handle, name). This dlsym calls the C library's, then hands back the
 * wrapper of a function the layer wraps when the result lies in libcuda
 * (symbols.c); every other answer is the C library's own.
 *
 * The C library's dlsym is found with dlvsym(RTLD_NEXT, "dlsym",
 * "GLIBC_2.34"), then "GLIBC_2.2.5" (older glibc; us_resolve_libc_dlsym,
 * resolve.h): never through dlsym itself, so nothing recurses.
 * RTLD_NEXT and RTLD_DEFAULT answer relative to the caller (glibc looks at
 * the return address): those lookups jump to the
 * C library's dlsym with the caller's return address untouched (a tail jump,
 * in assembly: a C compiler may or may not make one), so another preload's
 * dlsym(RTLD_NEXT, ...) still finds what comes after it. The layer
 * substitutes nothing there: a program takes libcuda through a handle.
 *
 * x86-64 only; elsewhere dlsym is not interposed and the layer sees what
 * cudaGetDriverEntryPoint hands out (docs/architecture.md). */
#include "driver_layer.h"

#include <dlfcn.h>
#include <stddef.h>

#include "resolve.h"

/* read by the assembly below: hidden, so reached PC-relative */
__attribute__((visibility("hidden"))) us_dlsym_fn us_drv_dlsym_next;

__attribute__((visibility("hidden"))) us_dlsym_fn us_drv_dlsym_resolve(void);
__attribute__((visibility("hidden"))) void *us_drv_dlsym_handle(void *handle, const char *name);

/* A sanitizer's runtime, preloaded first, looks up the functions it
 * intercepts with dlsym(RTLD_NEXT) while it initializes: this dlsym then
 * runs before the sanitizer can record anything, so the code on that path
 * is left uninstrumented. */
#define US_BEFORE_SANITIZERS __attribute__((no_sanitize("address", "thread", "undefined")))

/* Called by the assembly the first time (and until found). */
US_BEFORE_SANITIZERS us_dlsym_fn us_drv_dlsym_resolve(void)
{
    us_dlsym_fn next = __atomic_load_n(&us_drv_dlsym_next, __ATOMIC_ACQUIRE);
    if (next != NULL)
        return next;
    next = us_resolve_libc_dlsym();
    if (next != NULL)
        __atomic_store_n(&us_drv_dlsym_next, next, __ATOMIC_RELEASE);
    return next;
}

void *us_drv_real_dlsym(void *handle, const char *name)
{
    us_dlsym_fn next = us_drv_dlsym_resolve();
    return next != NULL ? next(handle, name) : NULL;
}

/* A lookup in a real handle: the answer does not depend on the caller. */
void *us_drv_dlsym_handle(void *handle, const char *name)
{
    void *sym = __atomic_load_n(&us_drv_dlsym_next, __ATOMIC_ACQUIRE)(handle, name);
    if (sym == NULL || name == NULL || name[0] != 'c' || name[1] != 'u')
        return sym; /* dlerror() stays the C library's */
    return us_drv_substitute_symbol(name, sym);
}

#if defined(__x86_64__)
/* an indirect-branch target where the build marks code for CET/IBT */
#if defined(__CET__) && (__CET__ & 1)
#define US_ENDBR "    endbr64\n"
#else
#define US_ENDBR ""
#endif
/* dlsym(handle, name): rdi, rsi. Pseudo-handles (RTLD_DEFAULT 0, RTLD_NEXT
 * -1) jump to the C library's dlsym; a real handle goes to
 * us_drv_dlsym_handle; before the C library's is known, resolve it (the
 * stack kept 16-byte aligned across the call) and start again, or answer
 * NULL when there is none. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        "    .cfi_startproc\n"
        US_ENDBR
        "0:  movq us_drv_dlsym_next(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jz 2f\n"
        "    cmpq $-1, %rdi\n"
        "    je 1f\n"
        "    testq %rdi, %rdi\n"
        "    je 1f\n"
        "    jmp us_drv_dlsym_handle\n"
        "1:  jmp *%rax\n"
        "2:  pushq %rdi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    pushq %rsi\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    subq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    call us_drv_dlsym_resolve\n"
        "    addq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rsi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    popq %rdi\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    testq %rax, %rax\n"
        "    jnz 0b\n"
        "    ret\n"
        "    .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#endif
