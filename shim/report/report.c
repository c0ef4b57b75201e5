/* report.c - the report's model (see report.h): rows sorted, names of its
 * amounts and endings, and the file it is saved to. Its two forms are
 * written by report_text.c and report_json.c from one walk (report_walk.c). */
#include "report.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "callsite.h"

/* --- small helpers ---------------------------------------------------------------------- */

char *us_report_bytes(uint64_t bytes, char *out, size_t size)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
    if (bytes < 1024) {
        snprintf(out, size, "%llu B", (unsigned long long)bytes);
        return out;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, size, "%.1f %s", v, units[u]);
    return out;
}

char *us_report_time(uint64_t ns, char *out, size_t size)
{
    if (ns < 1000)
        snprintf(out, size, "%llu ns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(out, size, "%.1f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(out, size, "%.1f ms", (double)ns / 1e6);
    else
        snprintf(out, size, "%.2f s", (double)ns / 1e9);
    return out;
}

const char *us_report_stream_kind_name(enum us_stream_kind kind)
{
    switch (kind) {
    case US_STREAM_LEGACY: return "legacy";
    case US_STREAM_PER_THREAD: return "per-thread";
    default: return "user";
    }
}

static int compare_rows(const void *a, const void *b)
{
    const struct us_report_row *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->forbidden != y->forbidden)
        return x->forbidden > y->forbidden ? -1 : 1;
    if (x->rule != y->rule)
        return x->rule < y->rule ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void us_report_sort(struct us_report_row *rows, size_t count)
{
    if (count > 1)
        qsort(rows, count, sizeof *rows, compare_rows);
}

void us_report_free(struct us_report *r)
{
    if (r == NULL)
        return;
    free(r->rows);
    free(r->events);
    free(r->spans);
    free(r);
}

const char us_report_driver_layer_reach[] =
    "the driver layer saw the copies the program made through libcuda (functions taken with dlsym, "
    "cuGetProcAddress or cudaGetDriverEntryPoint, or called directly by a program linked with -lcuda); out of "
    "its reach: functions a program takes with dlvsym, and a libcuda loaded in another linker namespace (dlmopen)";

const char *us_report_signal_name(int sig, char *out, size_t size)
{
    const char *name = sigabbrev_np(sig);
    if (name != NULL)
        snprintf(out, size, "SIG%s", name);
    else
        snprintf(out, size, "signal %d", sig);
    return out;
}

const char *us_report_end_name(enum us_report_end_how how)
{
    switch (how) {
    case US_REPORT_END_SIGNAL: return "signal";
    case US_REPORT_END_SNAPSHOT: return "snapshot";
    case US_REPORT_END_EXIT: break;
    }
    return "exit";
}

/* --- the file -------------------------------------------------------------------------- */

enum us_report_content us_report_content_of(const struct us_report *r)
{
    if (r->row_count > 0)
        return US_REPORT_HAS_FINDINGS;
    return r->hooked ? US_REPORT_NO_FINDINGS : US_REPORT_SAW_NOTHING;
}

static const char *file_kind(mode_t mode)
{
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* What the unstall report at path holds, and its pid. Opened without
 * following a link and without blocking, then checked to be a regular file
 * (it could have changed since the caller looked). A file that is not an
 * unstall report holds nothing worth keeping. */
static enum us_report_content existing_content(const char *path, long *pid)
{
    static const size_t head_max = 64 * 1024; /* the findings key comes after a few KiB */
    *pid = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return US_REPORT_SAW_NOTHING;
    struct stat st;
    char *head = NULL;
    size_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (head = malloc(head_max + 1)) != NULL) {
        ssize_t n;
        while (got < head_max && ((n = read(fd, head + got, head_max - got)) > 0 || (n < 0 && errno == EINTR)))
            got += n > 0 ? (size_t)n : 0;
        head[got] = '\0';
    }
    close(fd);
    enum us_report_content content = US_REPORT_SAW_NOTHING;
    /* the keys as us_report_json writes them; inside a JSON string a quote
     * is escaped, so these cannot match a string's contents */
    if (head != NULL && strstr(head, "\n  \"tool\": \"unstall\",\n") != NULL) {
        const char *p = strstr(head, "\n  \"pid\": ");
        if (p != NULL)
            *pid = strtol(p + 10, NULL, 10);
        const char *findings = strstr(head, "\n  \"findings\": [");
        if (findings != NULL && findings[16] != ']')
            content = US_REPORT_HAS_FINDINGS;
        else if (strstr(head, "\n  \"hooked\": true,") != NULL)
            content = US_REPORT_NO_FINDINGS;
    }
    free(head);
    return content;
}

/* The text into a new file beside path; its name into tmp. */
static bool write_temporary(const char *path, const char *text, char *tmp, size_t tmp_size)
{
    int n = snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= tmp_size) {
        errno = ENAMETOOLONG;
        return false;
    }
    /* O_EXCL: never through a link or into a file someone left there */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) /* a stale one of a reused pid */
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return false;
    size_t len = strlen(text);
    const char *p = text;
    int saved;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto close_tmp;
        p += w;
        len -= (size_t)w;
    }
    if (close(fd) != 0)
        goto remove_tmp;
    return true;

close_tmp:
    if (errno == 0)
        errno = EIO;
    saved = errno;
    close(fd);
    errno = saved;
remove_tmp:
    saved = errno;
    unlink(tmp);
    errno = saved;
    return false;
}

/* tmp to path where nothing is at path: fails with EEXIST if something came. */
static int rename_no_replace(const char *tmp, const char *path)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    /* a file system without RENAME_NOREPLACE: link(2) does not replace either */
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    if (errno != EPERM && errno != ENOTSUP)
        return -1;
    return rename(tmp, path); /* no hard links (vfat): the last resort */
}

enum us_report_save_result us_report_save(const char *path, const char *text, enum us_report_content content,
                                          uint64_t started_real_ns, char *why, size_t why_size)
{
    char tmp[4200];
    why[0] = '\0';
    for (int attempt = 0; attempt < 2; attempt++) {
        struct stat st;
        bool exists = lstat(path, &st) == 0;
        if (!exists && errno != ENOENT)
            return US_REPORT_FAILED;
        if (exists && !S_ISREG(st.st_mode)) {
            snprintf(why, why_size, "it is %s; unstall writes its report only to a regular file or a new one",
                     file_kind(st.st_mode));
            return US_REPORT_NOT_REGULAR;
        }
        uint64_t modified_ns = exists ? (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec : 0;
        if (exists && content < US_REPORT_HAS_FINDINGS && modified_ns >= started_real_ns) {
            /* written while this process ran: another process of the same
             * job under the same name (a launcher and its rank 0) */
            long pid;
            enum us_report_content there = existing_content(path, &pid);
            if (there > content) {
                snprintf(why, why_size, "it holds the report of pid %ld, written while this process ran, with %s; "
                         "this process saw %s", pid, there == US_REPORT_HAS_FINDINGS ? "findings" : "CUDA calls",
                         content == US_REPORT_SAW_NOTHING ? "no CUDA call" : "no finding");
                return US_REPORT_KEPT_OTHER;
            }
        }
        if (!write_temporary(path, text, tmp, sizeof tmp))
            return US_REPORT_FAILED;
        /* a regular file is replaced in one step (rename does not follow a
         * link at path; a FIFO put there since lstat would be replaced, a race
         * only someone who can write the directory can run); where there was
         * nothing, nothing that appears meanwhile is replaced */
        if ((exists ? rename(tmp, path) : rename_no_replace(tmp, path)) == 0)
            return US_REPORT_SAVED;
        int saved = errno;
        unlink(tmp);
        errno = saved;
        if (exists || errno != EEXIST)
            return US_REPORT_FAILED;
        /* something appeared at path: look again */
    }
    errno = EEXIST;
    return US_REPORT_FAILED;
}
