/* Audit events as JSON lines.
 *
 * Every event is one JSON object with the fixed members (execution_id, policy,
 * policy_digest, backend, workspace, event, decision, reason, target, ts_ms; a NULL
 * string is written as null, so the schema never changes shape) plus the members of the
 * caller's `extra_json` object that do not collide with them. Keys are sorted so equal
 * events serialize equally. Text is bytes (paths, names): what is not valid UTF-8 is
 * written as {"base64": ...} (engine/json.h), exactly, never replaced or dropped.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
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
    char *execution_id, *policy, *digest, *backend, *workspace; /* bytes, or NULL */
    a3s_error first;  /* the first error */
    unsigned long errors; /* how many errors in all */
};

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

    out[0] = '\0';
    /* getentropy (POSIX): at most 256 bytes, never a short read. */
    if (getentropy(raw, sizeof raw) < 0)
        return a3s_fail_errno(err, A3S_ERR_INTERNAL, errno, "execution id: getentropy");
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
    free(a->workspace);
    free(a);
}

/* A copy of s into *dst (NULL stays NULL); -1 on ENOMEM. */
static int dup_field(char **dst, const char *s)
{
    *dst = NULL;
    return s && !(*dst = strdup(s)) ? -1 : 0;
}

/* With no sink at all there is nothing to record: *out is NULL and every emit is a
 * no-op, so callers need not special-case "auditing off". */
int a3s_audit_open(a3s_audit **out, const char *path, a3s_audit_fn fn, void *ud,
                   const char *execution_id, const char *policy, const char *digest,
                   const char *backend, const char *workspace, a3s_error *err)
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
        dup_field(&a->digest, digest) < 0 || dup_field(&a->backend, backend) < 0 ||
        dup_field(&a->workspace, workspace) < 0) {
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

/* s (may be NULL) as JSON text (a string, {"base64": ...} or null); NULL on ENOMEM. */
static json_t *jstr(const char *s)
{
    return a3s_json_cstr(s);
}

/* The target, at most TARGET_MAX bytes: a longer one is cut (on a character boundary
 * when it is UTF-8) and ends with "...". Then encoded like any text. */
static json_t *jtarget(const char *s)
{
    if (!s)
        return json_null();
    size_t n = strlen(s);
    if (n <= TARGET_MAX)
        return a3s_json_str(s, n);
    size_t keep = TARGET_MAX - (sizeof ELLIPSIS - 1);
    /* Back up over continuation bytes to a character start, so that valid UTF-8 stays
     * valid (and a string); other bytes are base64 anyway. */
    if (a3s_json_is_utf8(s, n))
        while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
            keep--;
    char buf[TARGET_MAX + 1];
    memcpy(buf, s, keep);
    memcpy(buf + keep, ELLIPSIS, sizeof ELLIPSIS);
    return a3s_json_str(buf, keep + sizeof ELLIPSIS - 1);
}

static int set(json_t *o, const char *key, json_t *v)
{
    return a3s_json_set(o, key, v);
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
        set(o, "backend", jstr(a->backend)) < 0 ||
        set(o, "workspace", jstr(a->workspace)) < 0 || set(o, "event", jstr(event)) < 0 ||
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
