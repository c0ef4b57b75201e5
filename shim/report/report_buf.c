/* report_buf.c - see report_buf.h. */
#include "report_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static bool reserve(struct us_buf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void us_buf_printf(struct us_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the well-formed UTF-8 sequence at c (1-4), or 0 if it is not
 * one: a stray continuation byte, a sequence cut short, an overlong form, a
 * surrogate or a code point past U+10FFFF (RFC 3629). */
static int utf8_sequence_length(const unsigned char *c)
{
    if (c[0] < 0x80)
        return 1;
    int len;
    unsigned min, cp;
    if ((c[0] & 0xe0) == 0xc0) {
        len = 2, min = 0x80, cp = c[0] & 0x1f;
    } else if ((c[0] & 0xf0) == 0xe0) {
        len = 3, min = 0x800, cp = c[0] & 0x0f;
    } else if ((c[0] & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, cp = c[0] & 0x07;
    } else {
        return 0;
    }
    for (int i = 1; i < len; i++) {
        if ((c[i] & 0xc0) != 0x80) /* the terminating NUL included */
            return 0;
        cp = cp << 6 | (c[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void us_buf_json_string(struct us_buf *b, const char *s)
{
    us_buf_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        switch (*c) {
        case '"': us_buf_printf(b, "\\\""); break;
        case '\\': us_buf_printf(b, "\\\\"); break;
        case '\n': us_buf_printf(b, "\\n"); break;
        case '\t': us_buf_printf(b, "\\t"); break;
        case '\r': us_buf_printf(b, "\\r"); break;
        default:
            if (*c < 0x20) {
                us_buf_printf(b, "\\u%04x", *c);
            } else if (*c < 0x80) {
                us_buf_printf(b, "%c", *c);
            } else {
                int len = utf8_sequence_length(c);
                if (len == 0) {
                    us_buf_printf(b, "\\ufffd");
                } else {
                    us_buf_printf(b, "%.*s", len, (const char *)c);
                    c += len - 1;
                }
            }
        }
    }
    us_buf_printf(b, "\"");
}

char *us_buf_finish(struct us_buf *b)
{
    if (b->oom || !reserve(b, 0)) {
        free(b->p);
        return NULL;
    }
    b->p[b->len] = '\0';
    return b->p;
}
