/* report_buf.h - the growing text buffer the reports are written into, and
 * JSON strings in it. A failed allocation marks the buffer; us_buf_finish
 * then gives NULL and frees it, so that a writer checks once, at the end. */
#ifndef UNSTALL_REPORT_BUF_H
#define UNSTALL_REPORT_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct us_buf {
    char *p;
    size_t len, cap;
    bool oom;
};

void us_buf_printf(struct us_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A JSON string of s. The report must be valid UTF-8 whatever the program
 * path or arguments hold: a byte that is not part of a well-formed UTF-8
 * sequence is written as \ufffd (U+FFFD, the replacement character). */
void us_buf_json_string(struct us_buf *b, const char *s);

/* The text, NUL-terminated, for the caller to free; NULL when memory was
 * short at any point (the buffer is freed then). */
char *us_buf_finish(struct us_buf *b);

#endif
