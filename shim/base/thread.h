/* thread.h - the shim's own threads (the grower, the host copy workers). */
#ifndef UNSTALL_THREAD_H
#define UNSTALL_THREAD_H

#include <stddef.h>

/* Start fn(arg) on a detached thread with a stack of stack_bytes and every
 * signal masked (no signal of the program lands on the shim's thread), named
 * name (at most 15 characters). Returns 0, or pthread_create's error. */
int us_thread_start(void *(*fn)(void *), void *arg, size_t stack_bytes, const char *name);

#endif
