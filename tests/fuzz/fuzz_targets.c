/* fuzz_targets.c - fuzz targets for the shim's parsers and tables, one per
 * build (-DFUZZ_TARGET=n): libFuzzer's LLVMFuzzerTestOneInput, driven by
 * clang -fsanitize=fuzzer, or by driver.c (gcc: seeded random inputs and the
 * corpus) where clang is missing. Each target checks what it can against a
 * simple model, besides not crashing under ASan+UBSan.
 *   1 values    us_parse_bool/size/uint/enum/range: the first byte picks one
 *   2 config    us_config_load of a config file (the input) and, after a
 *               line "--env--", environment entries, one per line
 *   3 path      us_expand_path against a model, output size from the input
 *   4 ptrtable  insert/remove/lookup sequences against a list of ranges */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "ptrtable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                                  \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz: %s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

static void quiet(enum us_log_level level, const char *line, void *arg)
{
    (void)level;
    (void)line;
    (void)arg;
}

/* the input as a NUL-terminated string (NULs inside end it early) */
static char *text_of(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1);
    REQUIRE(t != NULL);
    memcpy(t, data, size);
    t[size] = '\0';
    return t;
}

#if FUZZ_TARGET == 1
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *t = text_of(data + 1, size - 1);
    switch (data[0] % 5) {
    case 0: {
        bool v = false, w = true;
        bool ok = us_parse_bool(t, &v);
        REQUIRE(ok == us_parse_bool(t, &w));
        REQUIRE(!ok || v == w);
        REQUIRE(ok || w == true); /* untouched on failure */
        break;
    }
    case 1: {
        size_t v = 12345;
        if (us_parse_size(t, &v)) {
            /* plain decimal digits mean bytes */
            bool digits = *t != '\0' && strspn(t, "0123456789") == strlen(t) && strlen(t) < 19;
            REQUIRE(!digits || v == (size_t)strtoull(t, NULL, 10));
        } else {
            REQUIRE(v == 12345);
        }
        break;
    }
    case 2: {
        unsigned v = 777;
        if (us_parse_uint(t, &v)) {
            bool digits = *t != '\0' && strspn(t, "0123456789") == strlen(t) && strlen(t) < 10;
            REQUIRE(!digits || v == (unsigned)strtoul(t, NULL, 10));
        } else {
            REQUIRE(v == 777);
        }
        break;
    }
    case 3: {
        int v = -5;
        if (us_parse_enum(t, "off,report,warn,strict", &v))
            REQUIRE(v >= 0 && v < 4);
        else
            REQUIRE(v == -5);
        break;
    }
    default: {
        size_t lo = 1, hi = 2;
        if (us_parse_range(t, &lo, &hi))
            REQUIRE(lo <= hi);
        break;
    }
    }
    free(t);
    return 0;
}
#elif FUZZ_TARGET == 2
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    us_log_set_sink(quiet, NULL);
    char *t = text_of(data, size);
    char *env[64];
    int n = 0;
    char *sep = strstr(t, "--env--\n");
    if (sep != NULL) {
        *sep = '\0';
        for (char *line = strtok(sep + 8, "\n"); line != NULL && n < 63; line = strtok(NULL, "\n"))
            env[n++] = line;
    }
    env[n] = NULL;
    struct us_config cfg;
    enum us_option_source sources[256]; /* more than options.def has rows */
    us_config_load(&cfg, sources, env, t, "fuzz.conf");
    /* what came out is within its documented bounds */
    REQUIRE(cfg.chunk_bytes >= (64u << 10) && cfg.chunk_bytes <= (1u << 30)); /* options.def: 64k..1g */
    REQUIRE(cfg.slots >= 2 && cfg.slots <= 64);                                  /* 2..64 */
    free(t);
    return 0;
}
#elif FUZZ_TARGET == 3
/* the documented expansion: %p pid, %r rank, %h host, %% a '%', anything else as is */
static bool model(const char *templ, const char *rank, const char *host, char *out, size_t out_size)
{
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    size_t o = 0;
    for (const char *t = templ; *t != '\0'; t++) {
        char one[2] = {*t, '\0'};
        const char *piece = one;
        if (t[0] == '%' && (t[1] == 'p' || t[1] == 'r' || t[1] == 'h' || t[1] == '%')) {
            piece = t[1] == 'p' ? pid : t[1] == 'r' ? rank : t[1] == 'h' ? host : "%";
            t++;
        }
        size_t len = strlen(piece);
        if (o + len >= out_size)
            return false;
        memcpy(out + o, piece, len);
        o += len;
    }
    out[o] = '\0';
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned out_size = data[0] % 200; /* 0 .. 199: small buffers too */
    const char *rank = data[1] & 1 ? "17" : NULL;
    const char *host = data[1] & 2 ? "node-7" : "h";
    char *t = text_of(data + 2, size - 2);
    char *out = malloc(out_size + 1), want[4096];
    REQUIRE(out != NULL);
    out[out_size] = 'Z'; /* one past the size: never written */
    bool ok = us_expand_path(t, rank, host, out, out_size);
    bool want_ok = out_size > 0 &&
                   model(t, rank ? rank : US_PATH_NO_RANK, host, want, out_size < sizeof want ? out_size : sizeof want);
    REQUIRE(ok == want_ok);
    REQUIRE(!ok || strcmp(out, want) == 0);
    REQUIRE(out_size == 0 || ok || out[0] == '\0');
    REQUIRE(out[out_size] == 'Z');
    free(out);
    free(t);
    return 0;
}
#elif FUZZ_TARGET == 4
/* Ranges live in slots 8 MiB apart (real allocations do not overlap), each
 * up to 7 MiB long from an offset: they span several 2 MiB shards. */
#define SLOTS 16
#define SLOT_BYTES ((uintptr_t)8 << 20)
#define ARENA ((uintptr_t)0x7f0000000000)

struct model_range {
    bool used;
    uintptr_t base;
    size_t size;
    enum us_mem_kind kind;
    int device;
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct model_range m[SLOTS] = {{0}};
    us_ptrtable_clear();
    for (size_t i = 0; i + 4 <= size; i += 4) {
        const uint8_t *op = data + i;
        unsigned slot = op[1] % SLOTS;
        uintptr_t base = ARENA + slot * SLOT_BYTES + ((uintptr_t)(op[2] & 0x0f) << 12);
        size_t len = ((size_t)op[3] << 15) + (op[2] >> 4) + 1; /* 1 B .. ~8 MiB */
        if (len > SLOT_BYTES - (base - ARENA - slot * SLOT_BYTES))
            len = SLOT_BYTES - (base - ARENA - slot * SLOT_BYTES);
        switch (op[0] % 4) {
        case 0: { /* insert: a range of this slot at another base would overlap: replace it */
            if (m[slot].used && m[slot].base != base)
                REQUIRE(us_ptrtable_remove(m[slot].base, NULL));
            enum us_mem_kind kind = (enum us_mem_kind)(1 + op[3] % 3);
            int device = kind == US_MEM_DEVICE ? op[2] % 4 : -1;
            us_ptrtable_insert(base, len, kind, device);
            m[slot] = (struct model_range){true, base, len, kind, device};
            break;
        }
        case 1: { /* remove by base */
            struct us_range r;
            bool want = m[slot].used && m[slot].base == base;
            REQUIRE(us_ptrtable_remove(base, &r) == want);
            if (want) {
                REQUIRE(r.base == base && r.size == m[slot].size && r.kind == m[slot].kind);
                m[slot].used = false;
            }
            break;
        }
        default: { /* lookup an address anywhere in the slot */
            uintptr_t addr = ARENA + slot * SLOT_BYTES + (((uintptr_t)op[2] << 15 | (uintptr_t)op[3] << 7) % SLOT_BYTES);
            struct us_range r;
            bool want = m[slot].used && addr >= m[slot].base && addr - m[slot].base < m[slot].size;
            bool got = us_ptrtable_lookup(addr, &r);
            REQUIRE(got == want);
            if (want)
                REQUIRE(r.base == m[slot].base && r.size == m[slot].size && r.kind == m[slot].kind &&
                        r.device == m[slot].device);
            break;
        }
        }
    }
    us_ptrtable_clear();
    return 0;
}
#else
#error "FUZZ_TARGET must be 1 (values), 2 (config), 3 (path) or 4 (ptrtable)"
#endif
