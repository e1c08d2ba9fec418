/* Audit events as JSON lines.
 *
 * Every event is one JSON object with the fixed members (execution_id, policy,
 * policy_digest, backend, event, decision, reason, target, ts_ms; a NULL string is
 * written as null, so the schema never changes shape) plus the members of the caller's
 * `extra_json` object that do not collide with them. Keys are sorted so equal events
 * serialize equally.
 *
 * File sink: the whole line goes out in one write(2) on an O_APPEND descriptor, so lines
 * of concurrent writers (other executions, other processes) never interleave within a
 * regular file. Only regular files are accepted: a FIFO or device could block an
 * execution or send the log somewhere unexpected, and a symlink as the last component
 * is refused (O_NOFOLLOW) so a planted link cannot redirect the appends.
 *
 * Emitting never fails: the first error is kept (with a count of the later ones) and
 * reported by a3s_audit_close, where the caller decides whether it fails the execution.
 * An a3s_audit is used from one thread at a time (one per execution). */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* `target` carries paths and names; a bound keeps every line short and a hostile
 * path from bloating the log. */
#define TARGET_MAX 1024
#define ELLIPSIS "..."
#define DUMP_FLAGS (JSON_COMPACT | JSON_SORT_KEYS)

struct a3s_audit {
    int fd; /* the file sink, or -1 */
    a3s_audit_fn fn;
    void *ud;
    char *execution_id, *policy, *digest, *backend; /* valid UTF-8, or NULL */
    a3s_error first;  /* the first error */
    unsigned long errors; /* how many errors in all */
};

/* ------------------------------------------------------------------ UTF-8 */

/* Length of the valid UTF-8 sequence at s[0..n) (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF; what jansson accepts), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

static bool utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq(p + i, n - i);
        if (!l)
            return false;
        i += l;
    }
    return true;
}

/* A copy of s with every byte that is not part of a valid UTF-8 sequence replaced by
 * U+FFFD (paths and names are bytes; JSON strings are UTF-8). NULL on ENOMEM. */
static char *utf8_sanitize(const char *s)
{
    static const char repl[] = "\xEF\xBF\xBD";
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1); /* worst case: every byte replaced */
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq(p + i, n - i);
        if (l) {
            memcpy(out + o, p + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, repl, 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

/* s as valid UTF-8: s itself when it already is (*owned = NULL), else a sanitized copy
 * stored in *owned. NULL only on ENOMEM (s non-NULL). */
static const char *as_utf8(const char *s, char **owned)
{
    *owned = NULL;
    if (!s || utf8_valid(s))
        return s;
    *owned = utf8_sanitize(s);
    return *owned;
}

/* ------------------------------------------------------------------ errors */

static void note_error(a3s_audit *a, int code, int errnum, const char *what)
{
    if (a->errors++ == 0) {
        if (errnum)
            a3s_fail_errno(&a->first, code, errnum, "audit: %s", what);
        else
            a3s_fail(&a->first, code, "audit: %s", what);
    }
}

/* ------------------------------------------------------------------ ids */

int a3s_audit_new_id(char out[33], a3s_error *err)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[16];
    size_t got = 0;

    out[0] = '\0';
    while (got < sizeof raw) {
        ssize_t r = getrandom(raw + got, sizeof raw - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return a3s_fail_errno(err, A3S_ERR_INTERNAL, errno, "execution id: getrandom");
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0F];
    }
    out[32] = '\0';
    return 0;
}

/* ------------------------------------------------------------------ open/close */

static int open_file(const char *path, a3s_error *err)
{
    /* O_NONBLOCK: opening a FIFO (or some devices) for writing would otherwise block
     * until a reader shows up; the fstat below refuses them anyway. */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY |
                            O_NONBLOCK,
                  0600);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            return a3s_fail(err, A3S_ERR_INVALID,
                            "audit file %s: is a symbolic link (refused)", path);
        if (e == EISDIR || e == ENXIO)
            return a3s_fail(err, A3S_ERR_INVALID,
                            "audit file %s: not a regular file (refused)", path);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "audit file %s: open", path);
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "audit file %s: fstat", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return a3s_fail(err, A3S_ERR_INVALID, "audit file %s: not a regular file (refused)",
                        path);
    }
    /* Back to blocking writes: a regular file ignores O_NONBLOCK today, but a write must
     * never come back EAGAIN half-done. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "audit file %s: fcntl", path);
    }
    return fd;
}

static void audit_free(a3s_audit *a)
{
    free(a->execution_id);
    free(a->policy);
    free(a->digest);
    free(a->backend);
    free(a);
}

/* A valid UTF-8 copy of s into *dst (NULL stays NULL); -1 on ENOMEM. */
static int dup_field(char **dst, const char *s)
{
    char *owned;
    const char *v = as_utf8(s, &owned);
    if (s && !v)
        return -1;
    if (owned) {
        *dst = owned;
        return 0;
    }
    *dst = NULL;
    if (s && !(*dst = strdup(v)))
        return -1;
    return 0;
}

/* With no sink at all there is nothing to record: *out is NULL and every emit is a
 * no-op, so callers need not special-case "auditing off". */
int a3s_audit_open(a3s_audit **out, const char *path, a3s_audit_fn fn, void *ud,
                   const char *execution_id, const char *policy, const char *digest,
                   const char *backend, a3s_error *err)
{
    *out = NULL;
    if (!path && !fn)
        return 0;
    if (path && !path[0])
        return a3s_fail(err, A3S_ERR_INVALID, "audit file: empty path");

    a3s_audit *a = calloc(1, sizeof *a);
    if (!a)
        return a3s_fail(err, A3S_ERR_INTERNAL, "audit: out of memory");
    a->fd = -1;
    a->fn = fn;
    a->ud = ud;
    if (dup_field(&a->execution_id, execution_id) < 0 || dup_field(&a->policy, policy) < 0 ||
        dup_field(&a->digest, digest) < 0 || dup_field(&a->backend, backend) < 0) {
        audit_free(a);
        return a3s_fail(err, A3S_ERR_INTERNAL, "audit: out of memory");
    }
    if (path) {
        a->fd = open_file(path, err);
        if (a->fd < 0) {
            audit_free(a);
            return -1;
        }
    }
    *out = a;
    return 0;
}

int a3s_audit_close(a3s_audit *a, a3s_error *err)
{
    if (!a)
        return 0;
    /* close(2) can report a deferred write error (NFS, quota): that line may be lost. */
    if (a->fd >= 0 && close(a->fd) < 0 && errno != EINTR)
        note_error(a, A3S_ERR_INTERNAL, errno, "close");
    unsigned long errors = a->errors;
    if (errors) {
        if (errors > 1)
            a3s_fail(err, a->first.code, "%s (and %lu more audit errors)", a->first.msg,
                     errors - 1);
        else
            a3s_fail(err, a->first.code, "%s", a->first.msg);
    }
    audit_free(a);
    return errors ? -1 : 0;
}

/* ------------------------------------------------------------------ emit */

/* s (may be NULL) as a JSON string or null; NULL on ENOMEM. */
static json_t *jstr(const char *s)
{
    if (!s)
        return json_null();
    char *owned;
    const char *v = as_utf8(s, &owned);
    json_t *j = v ? json_string(v) : NULL;
    free(owned);
    return j;
}

/* The target, valid UTF-8 and at most TARGET_MAX bytes: longer ones are cut on a
 * character boundary and end with "...". */
static json_t *jtarget(const char *s)
{
    if (!s)
        return json_null();
    char *owned;
    const char *v = as_utf8(s, &owned);
    if (!v)
        return NULL;
    size_t n = strlen(v);
    json_t *j;
    if (n <= TARGET_MAX) {
        j = json_string(v);
    } else {
        size_t keep = TARGET_MAX - (sizeof ELLIPSIS - 1);
        /* v is valid UTF-8: back up over continuation bytes to a character start. */
        while (keep > 0 && ((unsigned char)v[keep] & 0xC0) == 0x80)
            keep--;
        char buf[TARGET_MAX + 1];
        memcpy(buf, v, keep);
        memcpy(buf + keep, ELLIPSIS, sizeof ELLIPSIS);
        j = json_string(buf);
    }
    free(owned);
    return j;
}

static int set(json_t *o, const char *key, json_t *v)
{
    return v ? json_object_set_new(o, key, v) : -1; /* set_new also fails on NULL */
}

/* Merge the members of extra_json that o does not have yet. */
static void merge_extra(a3s_audit *a, json_t *o, const char *extra_json)
{
    json_error_t je;
    json_t *x = json_loads(extra_json, JSON_REJECT_DUPLICATES, &je);
    if (!x) {
        char what[sizeof je.text + 64];
        snprintf(what, sizeof what, "invalid extra_json (ignored): %s", je.text);
        note_error(a, A3S_ERR_INVALID, 0, what);
        return;
    }
    if (!json_is_object(x)) {
        note_error(a, A3S_ERR_INVALID, 0, "invalid extra_json (ignored): not an object");
        json_decref(x);
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach(x, key, val) {
        if (json_object_get(o, key))
            continue; /* the fixed members are never overridden */
        if (json_object_set(o, key, val) < 0) {
            note_error(a, A3S_ERR_INTERNAL, 0, "out of memory");
            break;
        }
    }
    json_decref(x);
}

/* The serialized line, "json\n\0"; *len excludes the NUL. NULL on failure. */
static char *dump_line(const json_t *o, size_t *len)
{
    size_t n = json_dumpb(o, NULL, 0, DUMP_FLAGS);
    if (n == 0)
        return NULL;
    char *buf = malloc(n + 2);
    if (!buf)
        return NULL;
    if (json_dumpb(o, buf, n, DUMP_FLAGS) != n) {
        free(buf);
        return NULL;
    }
    buf[n] = '\n';
    buf[n + 1] = '\0';
    *len = n + 1;
    return buf;
}

static void write_line(a3s_audit *a, const char *line, size_t len)
{
    ssize_t w;
    do
        w = write(a->fd, line, len);
    while (w < 0 && errno == EINTR);
    if (w < 0) {
        note_error(a, A3S_ERR_INTERNAL, errno, "write");
        return;
    }
    if ((size_t)w == len)
        return;
    note_error(a, A3S_ERR_INTERNAL, 0, "short write (disk full or file size limit?)");
    /* Finish the line so later events still start on a line of their own. */
    if (a3s_write_all(a->fd, line + w, len - (size_t)w) < 0)
        note_error(a, A3S_ERR_INTERNAL, errno, "write");
}

void a3s_audit_emit(a3s_audit *a, const char *event, const char *decision,
                    const char *reason, const char *target, const char *extra_json)
{
    if (!a)
        return;
    struct timespec ts;
    long long ms = 0;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    else
        note_error(a, A3S_ERR_INTERNAL, errno, "clock_gettime");

    json_t *o = json_object();
    if (!o || set(o, "ts_ms", json_integer(ms)) < 0 ||
        set(o, "execution_id", jstr(a->execution_id)) < 0 ||
        set(o, "policy", jstr(a->policy)) < 0 ||
        set(o, "policy_digest", jstr(a->digest)) < 0 ||
        set(o, "backend", jstr(a->backend)) < 0 || set(o, "event", jstr(event)) < 0 ||
        set(o, "decision", jstr(decision)) < 0 || set(o, "reason", jstr(reason)) < 0 ||
        set(o, "target", jtarget(target)) < 0) {
        note_error(a, A3S_ERR_INTERNAL, 0, "out of memory");
        json_decref(o);
        return;
    }
    if (extra_json)
        merge_extra(a, o, extra_json);

    size_t len = 0;
    char *line = dump_line(o, &len);
    json_decref(o);
    if (!line) {
        note_error(a, A3S_ERR_INTERNAL, 0, "out of memory");
        return;
    }
    if (a->fd >= 0)
        write_line(a, line, len);
    if (a->fn) {
        line[len - 1] = '\0'; /* the callback gets the object without the newline */
        a->fn(a->ud, line);
    }
    free(line);
}
