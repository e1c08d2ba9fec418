/* Unit tests for engine/audit.c: JSON-lines audit events to a file and/or a callback. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "json.h"
#include "tap.h"
#include "rmtree.h"
#include "util.h"

static char root[PATH_MAX];

/* ---------------------------------------------------------------- fixtures */

static void fmt_path(char *out, const char *fmt, ...) A3S_PRINTF(2, 3);
static void fmt_path(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX) {
        fprintf(stderr, "test path too long\n");
        exit(2);
    }
}

/* A fresh path under the test root (nothing created). */
static void new_path(char *out, const char *tag)
{
    static int seq;
    fmt_path(out, "%s/%s-%d", root, tag, ++seq);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The lines of a file (without "\n"); *complete is false if the file does not end with
 * a newline. */
typedef struct lines {
    a3s_strv v;
    bool complete;
} lines;

static void read_lines(const char *path, lines *out)
{
    memset(out, 0, sizeof *out);
    out->complete = true;
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&buf, &cap, f)) > 0) {
        if (buf[n - 1] == '\n')
            buf[n - 1] = '\0';
        else
            out->complete = false;
        if (a3s_strv_push(&out->v, buf) < 0)
            exit(2);
    }
    free(buf);
    fclose(f);
}

static json_t *parse_obj(const char *s)
{
    json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static const char *sget(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static bool is_null(json_t *o, const char *key)
{
    return json_is_null(json_object_get(o, key));
}

/* o[key] is {"base64": ...} of exactly the bytes want. */
static bool b64_of(json_t *o, const char *key, const char *want)
{
    json_t *v = json_object_get(o, key);
    size_t n = 0;
    char *b = json_is_object(v) ? a3s_json_bytes(v, &n) : NULL;
    bool good = b && n == strlen(want) && memcmp(b, want, n) == 0;
    free(b);
    return good;
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

typedef struct captured {
    a3s_strv v;
} captured;

static void capture_fn(void *ud, const char *line)
{
    captured *c = ud;
    if (a3s_strv_push(&c->v, line) < 0)
        exit(2);
}

#define OPEN(a, path, fn, ud, err)                                                      \
    a3s_audit_open((a), (path), (fn), (ud), "0123456789abcdef0123456789abcdef", "baseline", \
                   "sha256:feed", "bwrap", "/ws", (err))

/* ---------------------------------------------------------------- tests */

static void test_ids(void)
{
    enum { N = 1000 };
    static char ids[N][33];
    a3s_error err = {0};
    bool all_ok = true, all_hex = true;
    for (int i = 0; i < N; i++) {
        if (a3s_audit_new_id(ids[i], &err) != 0)
            all_ok = false;
        if (strlen(ids[i]) != 32 || strspn(ids[i], "0123456789abcdef") != 32)
            all_hex = false;
    }
    ok(all_ok, "a3s_audit_new_id succeeds 1000 times");
    ok(all_hex, "ids are 32 lower-case hex chars");
    qsort(ids, N, sizeof ids[0], (int (*)(const void *, const void *))strcmp);
    bool distinct = true;
    for (int i = 1; i < N; i++)
        if (strcmp(ids[i - 1], ids[i]) == 0)
            distinct = false;
    ok(distinct, "1000 ids are all different");
}

static void test_null_and_no_sink(void)
{
    a3s_error err = {0};
    a3s_audit_emit(NULL, "exec", "allow", "policy_allow", "/x", "{\"a\":1}");
    ok(a3s_audit_close(NULL, &err) == 0, "emit/close on a NULL audit are no-ops");

    a3s_audit *a = (a3s_audit *)&err; /* must be overwritten */
    ok(OPEN(&a, NULL, NULL, NULL, &err) == 0 && a == NULL,
       "no sink at all: open succeeds with a NULL audit");
    ok(a3s_audit_close(a, &err) == 0, "and closing it is fine");
}

static void test_file_sink(void)
{
    char path[PATH_MAX];
    new_path(path, "basic.jsonl");
    a3s_error err = {0};
    a3s_audit *a = NULL;
    long long t0 = now_ms();
    ok(OPEN(&a, path, NULL, NULL, &err) == 0 && a, "open a file sink");
    a3s_audit_emit(a, "policy_compile", "allow", "policy_allow", "enforced-policy", NULL);
    a3s_audit_emit(a, "network", "deny", "network_deny_all", "<network>", NULL);
    a3s_audit_emit(a, "exec", "allow", NULL, NULL, NULL);
    ok(a3s_audit_close(a, &err) == 0, "close without error");
    long long t1 = now_ms();

    struct stat st;
    ok(stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600,
       "file created as a regular file, mode 0600");

    lines L;
    read_lines(path, &L);
    ok(L.v.n == 3 && L.complete, "three complete lines (got %zu)", L.v.n);
    bool all_fixed = true, ts_ok = true, sorted = true;
    for (size_t i = 0; i < L.v.n; i++) {
        json_t *o = parse_obj(L.v.v[i]);
        if (!o) {
            all_fixed = false;
            continue;
        }
        static const char *const keys[] = {"ts_ms", "execution_id", "policy", "policy_digest",
                                           "backend", "workspace", "event", "decision",
                                           "reason", "target"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (!json_object_get(o, keys[k]))
                all_fixed = false;
        if (json_object_size(o) != 10)
            all_fixed = false;
        json_t *ts = json_object_get(o, "ts_ms");
        if (!json_is_integer(ts) || json_integer_value(ts) < t0 || json_integer_value(ts) > t1)
            ts_ok = false;
        if (strncmp(L.v.v[i], "{\"backend\":\"bwrap\",\"decision\":", 30) != 0)
            sorted = false;
        if (strchr(L.v.v[i], ' '))
            sorted = false; /* compact: no blank anywhere in these events */
        json_decref(o);
    }
    ok(all_fixed, "every line is a JSON object with exactly the ten fixed members");
    ok(ts_ok, "ts_ms is wall-clock milliseconds of the emission");
    ok(sorted, "compact with sorted keys");

    json_t *o = L.v.n == 3 ? parse_obj(L.v.v[0]) : NULL;
    ok_streq(o ? sget(o, "execution_id") : NULL, "0123456789abcdef0123456789abcdef",
             "execution_id");
    ok_streq(o ? sget(o, "policy") : NULL, "baseline", "policy");
    ok_streq(o ? sget(o, "policy_digest") : NULL, "sha256:feed", "policy_digest");
    ok_streq(o ? sget(o, "backend") : NULL, "bwrap", "backend");
    ok_streq(o ? sget(o, "event") : NULL, "policy_compile", "event");
    ok_streq(o ? sget(o, "decision") : NULL, "allow", "decision");
    ok_streq(o ? sget(o, "reason") : NULL, "policy_allow", "reason");
    ok_streq(o ? sget(o, "target") : NULL, "enforced-policy", "target");
    json_decref(o);
    o = L.v.n == 3 ? parse_obj(L.v.v[2]) : NULL;
    ok(o && is_null(o, "reason") && is_null(o, "target"), "NULL reason/target are null");
    json_decref(o);
    a3s_strv_free(&L.v);

    /* A second execution appends; nothing is truncated. */
    ok(OPEN(&a, path, NULL, NULL, &err) == 0, "reopen the same file");
    a3s_audit_emit(a, "exec", "deny", "timeout", "<process-tree>", NULL);
    ok(a3s_audit_close(a, &err) == 0, "close");
    read_lines(path, &L);
    ok(L.v.n == 4 && L.complete, "the reopened file was appended to (4 lines)");
    o = L.v.n == 4 ? parse_obj(L.v.v[3]) : NULL;
    ok_streq(o ? sget(o, "reason") : NULL, "timeout", "the appended event is last");
    json_decref(o);
    a3s_strv_free(&L.v);

    /* Other NULL common fields become null, too. */
    new_path(path, "nulls.jsonl");
    ok(a3s_audit_open(&a, path, NULL, NULL, "id", NULL, NULL, NULL, NULL, &err) == 0,
       "open w/ NULLs");
    a3s_audit_emit(a, NULL, NULL, NULL, NULL, NULL);
    ok(a3s_audit_close(a, &err) == 0, "close");
    read_lines(path, &L);
    o = L.v.n == 1 ? parse_obj(L.v.v[0]) : NULL;
    ok(o && is_null(o, "policy") && is_null(o, "policy_digest") && is_null(o, "backend") &&
           is_null(o, "workspace") && is_null(o, "event") && is_null(o, "decision") &&
           json_object_size(o) == 10,
       "NULL common fields and event/decision are null");
    json_decref(o);
    a3s_strv_free(&L.v);
}

static void test_callback(void)
{
    char path[PATH_MAX];
    new_path(path, "cb.jsonl");
    a3s_error err = {0};
    a3s_audit *a = NULL;
    captured c = {0};
    ok(OPEN(&a, path, capture_fn, &c, &err) == 0, "open file + callback");
    a3s_audit_emit(a, "exec", "allow", "policy_allow", "/work/x", "{\"n\":1}");
    a3s_audit_emit(a, "env", "deny", "secret", "<secret-env>", NULL);
    ok(a3s_audit_close(a, &err) == 0, "close");
    lines L;
    read_lines(path, &L);
    ok(c.v.n == 2 && L.v.n == 2, "callback called once per event");
    bool same = c.v.n == L.v.n;
    for (size_t i = 0; same && i < L.v.n; i++)
        if (strcmp(c.v.v[i], L.v.v[i]) != 0 || strchr(c.v.v[i], '\n'))
            same = false;
    ok(same, "callback receives the file's line text, without the newline");
    a3s_strv_free(&L.v);
    a3s_strv_free(&c.v);

    /* Callback alone. */
    ok(OPEN(&a, NULL, capture_fn, &c, &err) == 0 && a, "open callback only");
    a3s_audit_emit(a, "exec", "allow", NULL, NULL, NULL);
    ok(a3s_audit_close(a, &err) == 0, "close");
    json_t *o = c.v.n == 1 ? parse_obj(c.v.v[0]) : NULL;
    ok_streq(o ? sget(o, "event") : NULL, "exec", "callback-only sink gets the event");
    json_decref(o);
    a3s_strv_free(&c.v);
}

static void test_extra(void)
{
    a3s_error err = {0};
    a3s_audit *a = NULL;
    captured c = {0};
    ok(OPEN(&a, NULL, capture_fn, &c, &err) == 0, "open");
    a3s_audit_emit(a, "exec", "allow", "policy_allow", "/t",
                   "{\"exit_code\":3,\"names\":[\"A\",\"B\"],\"nested\":{\"k\":true},"
                   "\"execution_id\":\"evil\",\"policy\":\"evil\",\"policy_digest\":\"evil\","
                   "\"backend\":\"evil\",\"event\":\"evil\",\"decision\":\"evil\","
                   "\"ts_ms\":0,\"reason\":\"evil\",\"target\":\"evil\"}");
    ok(a3s_audit_close(a, &err) == 0, "collisions are dropped silently (close is clean)");
    json_t *o = c.v.n == 1 ? parse_obj(c.v.v[0]) : NULL;
    ok(o && json_integer_value(json_object_get(o, "exit_code")) == 3, "extra number merged");
    json_t *names = o ? json_object_get(o, "names") : NULL;
    ok(json_is_array(names) && json_array_size(names) == 2 &&
           strcmp(json_string_value(json_array_get(names, 1)), "B") == 0,
       "extra array merged");
    ok(o && json_is_true(json_object_get(json_object_get(o, "nested"), "k")),
       "extra object merged");
    ok_streq(o ? sget(o, "execution_id") : NULL, "0123456789abcdef0123456789abcdef",
             "execution_id not overridden");
    ok_streq(o ? sget(o, "policy") : NULL, "baseline", "policy not overridden");
    ok_streq(o ? sget(o, "policy_digest") : NULL, "sha256:feed", "policy_digest not overridden");
    ok_streq(o ? sget(o, "backend") : NULL, "bwrap", "backend not overridden");
    ok_streq(o ? sget(o, "event") : NULL, "exec", "event not overridden");
    ok_streq(o ? sget(o, "decision") : NULL, "allow", "decision not overridden");
    ok_streq(o ? sget(o, "reason") : NULL, "policy_allow", "reason not overridden");
    ok_streq(o ? sget(o, "target") : NULL, "/t", "target not overridden");
    ok(o && json_integer_value(json_object_get(o, "ts_ms")) > 0, "ts_ms not overridden");
    ok(o && json_object_size(o) == 13, "exactly 10 fixed + 3 extra members");
    json_decref(o);
    a3s_strv_free(&c.v);

    /* Invalid extra: the event is still recorded, without extras; close reports it. */
    char path[PATH_MAX];
    new_path(path, "badextra.jsonl");
    ok(OPEN(&a, path, capture_fn, &c, &err) == 0, "open");
    a3s_audit_emit(a, "exec", "allow", NULL, NULL, "{\"a\":");
    memset(&err, 0, sizeof err);
    ok(a3s_audit_close(a, &err) == -1, "invalid extra_json is reported by close");
    ok(err.code == A3S_ERR_INVALID && strstr(err.msg, "extra_json"),
       "as an invalid-argument error naming extra_json (%s)", err.msg);
    lines L;
    read_lines(path, &L);
    o = L.v.n == 1 ? parse_obj(L.v.v[0]) : NULL;
    ok(o && json_object_size(o) == 10 && !json_object_get(o, "a"),
       "the event was written anyway, without the invalid extra");
    json_decref(o);
    a3s_strv_free(&L.v);
    a3s_strv_free(&c.v);

    /* Not an object, a duplicate key, and counting of later errors. */
    ok(OPEN(&a, NULL, capture_fn, &c, &err) == 0, "open");
    a3s_audit_emit(a, "e1", "allow", NULL, NULL, "[1,2]");
    a3s_audit_emit(a, "e2", "allow", NULL, NULL, "{\"x\":1,\"x\":2}");
    a3s_audit_emit(a, "e3", "allow", NULL, NULL, "{\"ok\":1}");
    memset(&err, 0, sizeof err);
    ok(a3s_audit_close(a, &err) == -1, "non-object / duplicate-key extras are errors");
    ok(strstr(err.msg, "not an object") && strstr(err.msg, "and 1 more"),
       "the first error is kept, later ones counted (%s)", err.msg);
    ok(c.v.n == 3, "all three events delivered");
    o = c.v.n == 3 ? parse_obj(c.v.v[1]) : NULL;
    ok(o && !json_object_get(o, "x"), "the duplicate-key extra was ignored as a whole");
    json_decref(o);
    o = c.v.n == 3 ? parse_obj(c.v.v[2]) : NULL;
    ok(o && json_integer_value(json_object_get(o, "ok")) == 1,
       "a later valid extra still merges");
    json_decref(o);
    a3s_strv_free(&c.v);
}

static void test_refused_paths(void)
{
    a3s_error err = {0};
    a3s_audit *a = NULL;
    char target[PATH_MAX], link[PATH_MAX], dangling[PATH_MAX], missing[PATH_MAX];

    new_path(target, "real.jsonl");
    new_path(link, "link.jsonl");
    int fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ok(fd >= 0 && close(fd) == 0 && symlink(target, link) == 0, "fixture: symlink to a file");
    a = (a3s_audit *)&err;
    ok(OPEN(&a, link, NULL, NULL, &err) == -1 && a == NULL, "a symlink path is refused");
    ok(err.code == A3S_ERR_INVALID && strstr(err.msg, "symbolic link"),
       "... as a symbolic link (%s)", err.msg);
    ok(file_size(target) == 0, "the link's target was not written");

    new_path(dangling, "dangling.jsonl");
    new_path(missing, "never-created");
    ok(symlink(missing, dangling) == 0, "fixture: dangling symlink");
    ok(OPEN(&a, dangling, NULL, NULL, &err) == -1, "a dangling symlink is refused");
    ok(access(missing, F_OK) != 0, "and its target was not created");

    char dir[PATH_MAX];
    new_path(dir, "dir");
    ok(mkdir(dir, 0700) == 0, "fixture: directory");
    memset(&err, 0, sizeof err);
    ok(OPEN(&a, dir, NULL, NULL, &err) == -1, "a directory path is refused");
    ok(err.code == A3S_ERR_INVALID && strstr(err.msg, "not a regular file"), "(%s)", err.msg);

    char fifo[PATH_MAX];
    new_path(fifo, "fifo");
    ok(mkfifo(fifo, 0600) == 0, "fixture: fifo");
    alarm(10); /* a blocking open would hang here */
    memset(&err, 0, sizeof err);
    ok(OPEN(&a, fifo, NULL, NULL, &err) == -1, "a fifo without reader is refused, no block");
    ok(err.code == A3S_ERR_INVALID && strstr(err.msg, "not a regular file"), "(%s)", err.msg);
    int rfd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    memset(&err, 0, sizeof err);
    ok(rfd >= 0 && OPEN(&a, fifo, NULL, NULL, &err) == -1,
       "a fifo with a reader is refused too (fstat check)");
    ok(err.code == A3S_ERR_INVALID && strstr(err.msg, "not a regular file"), "(%s)", err.msg);
    char b;
    ok(rfd >= 0 && read(rfd, &b, 1) == 0, "nothing was written into the fifo");
    if (rfd >= 0)
        close(rfd);
    alarm(0);

    memset(&err, 0, sizeof err);
    ok(OPEN(&a, "/dev/null", NULL, NULL, &err) == -1, "a character device is refused");

    char nodir[PATH_MAX];
    fmt_path(nodir, "%s/no/such/dir/x.jsonl", root);
    memset(&err, 0, sizeof err);
    ok(OPEN(&a, nodir, NULL, NULL, &err) == -1 && err.code == A3S_ERR_SETUP &&
           strstr(err.msg, "No such file"),
       "a missing directory is a setup error with errno text (%s)", err.msg);
    ok(OPEN(&a, "", NULL, NULL, &err) == -1, "an empty path is refused");
}

static const char *target_of(const char *t, json_t **hold)
{
    a3s_error err = {0};
    a3s_audit *a = NULL;
    captured c = {0};
    *hold = NULL;
    if (OPEN(&a, NULL, capture_fn, &c, &err) != 0)
        return NULL;
    a3s_audit_emit(a, "exec", "allow", NULL, t, NULL);
    if (a3s_audit_close(a, &err) != 0 || c.v.n != 1) {
        a3s_strv_free(&c.v);
        return NULL;
    }
    *hold = parse_obj(c.v.v[0]);
    a3s_strv_free(&c.v);
    return *hold ? sget(*hold, "target") : NULL;
}

static void test_target_cap(void)
{
    char big[5001];
    memset(big, 'a', 5000);
    big[5000] = '\0';
    json_t *h;
    const char *t = target_of(big, &h);
    ok(t && strlen(t) == 1024 && strcmp(t + 1021, "...") == 0 &&
           strspn(t, "a") == 1021,
       "a 5000-byte target is cut to 1024 bytes ending in \"...\"");
    json_decref(h);

    big[1024] = '\0';
    t = target_of(big, &h);
    ok(t && strcmp(t, big) == 0, "a 1024-byte target is kept whole");
    json_decref(h);
    big[1024] = 'a';
    big[1025] = '\0';
    t = target_of(big, &h);
    ok(t && strlen(t) == 1024 && strcmp(t + 1021, "...") == 0, "a 1025-byte target is cut");
    json_decref(h);

    /* 600 x U+00E9 (2 bytes each): the cut falls inside a character and backs up. */
    char mb[1201];
    for (int i = 0; i < 600; i++)
        memcpy(mb + 2 * i, "\xC3\xA9", 2);
    mb[1200] = '\0';
    t = target_of(mb, &h);
    ok(t && strlen(t) == 1023 && strcmp(t + 1020, "...") == 0 && strncmp(t, mb, 1020) == 0,
       "a multi-byte target is cut on a character boundary (%zu bytes)", t ? strlen(t) : 0);
    json_decref(h);

    /* Bytes that are not UTF-8 (paths are bytes) are kept exactly, as base64. */
    t = target_of("/w/\xff\xfe-x/\xC3", &h);
    ok(t == NULL && b64_of(h, "target", "/w/\xff\xfe-x/\xC3"),
       "invalid UTF-8 in the target is the base64 object of the exact bytes");
    json_decref(h);
    t = target_of("\xED\xA0\x80|\xC0\xAF|\xF4\x90\x80\x80|\xF0\x9F\x98\x80", &h);
    ok(t == NULL && b64_of(h, "target", "\xED\xA0\x80|\xC0\xAF|\xF4\x90\x80\x80|\xF0\x9F\x98\x80"),
       "surrogates, overlong forms and > U+10FFFF make the target base64");
    json_decref(h);
    /* A long non-UTF-8 target is cut by bytes (at 1021) and keeps the "..." marker. */
    char bin[2001];
    memset(bin, '\xff', 2000);
    bin[2000] = '\0';
    char cut[1025];
    memset(cut, '\xff', 1021);
    memcpy(cut + 1021, "...", 4);
    t = target_of(bin, &h);
    ok(t == NULL && b64_of(h, "target", cut), "a long non-UTF-8 target is cut to 1024 bytes");
    json_decref(h);

    a3s_error err = {0};
    a3s_audit *a = NULL;
    captured c = {0};
    ok(a3s_audit_open(&a, NULL, capture_fn, &c, "id", "pol\xff", "d", "b", "/ws\xff\xfe",
                      &err) == 0,
       "open with a non-UTF-8 policy name and workspace");
    a3s_audit_emit(a, "ev\xfe", "allow", "r\xfd", NULL, NULL);
    ok(a3s_audit_close(a, &err) == 0, "close");
    json_t *o = c.v.n == 1 ? parse_obj(c.v.v[0]) : NULL;
    ok(b64_of(o, "policy", "pol\xff"), "policy kept as base64");
    ok(b64_of(o, "workspace", "/ws\xff\xfe"), "workspace kept as base64");
    ok(b64_of(o, "event", "ev\xfe"), "event kept as base64");
    ok(b64_of(o, "reason", "r\xfd"), "reason kept as base64");
    ok_streq(o ? sget(o, "decision") : NULL, "allow", "UTF-8 members stay strings");
    json_decref(o);
    a3s_strv_free(&c.v);
}

/* One writer process: its own audit on the shared file, 200 events with ~1 KiB lines. */
static int writer(const char *path, const char *id)
{
    a3s_error err = {0};
    a3s_audit *a = NULL;
    if (a3s_audit_open(&a, path, NULL, NULL, id, "baseline", "d", "bwrap", "/ws", &err) != 0)
        return 3;
    char target[1001];
    memset(target, id[0], 1000);
    target[1000] = '\0';
    for (int i = 0; i < 200; i++) {
        char extra[64];
        snprintf(extra, sizeof extra, "{\"seq\":%d}", i);
        a3s_audit_emit(a, "exec", "allow", "policy_allow", target, extra);
    }
    return a3s_audit_close(a, &err) == 0 ? 0 : 4;
}

static void test_concurrent(void)
{
    char path[PATH_MAX];
    new_path(path, "shared.jsonl");
    static const char *const ids[2] = {"11111111111111111111111111111111",
                                       "22222222222222222222222222222222"};
    pid_t pids[2];
    for (int k = 0; k < 2; k++) {
        pids[k] = fork();
        if (pids[k] == 0)
            _exit(writer(path, ids[k]));
    }
    bool children_ok = true;
    for (int k = 0; k < 2; k++) {
        int st;
        if (pids[k] < 0 || waitpid(pids[k], &st, 0) != pids[k] || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0)
            children_ok = false;
    }
    ok(children_ok, "two writer processes finished cleanly");

    lines L;
    read_lines(path, &L);
    ok(L.v.n == 400 && L.complete, "400 lines in the shared file (got %zu)", L.v.n);
    int next[2] = {0, 0};
    bool intact = true, ordered = true;
    for (size_t i = 0; i < L.v.n; i++) {
        json_t *o = parse_obj(L.v.v[i]);
        const char *id = o ? sget(o, "execution_id") : NULL;
        int k = id && strcmp(id, ids[0]) == 0 ? 0 : id && strcmp(id, ids[1]) == 0 ? 1 : -1;
        const char *t = o ? sget(o, "target") : NULL;
        if (k < 0 || !t || strlen(t) != 1000 || (size_t)strspn(t, ids[k]) != 1000)
            intact = false;
        else if (json_integer_value(json_object_get(o, "seq")) != next[k]++)
            ordered = false;
        json_decref(o);
    }
    ok(intact, "every line is an intact event of one of the writers");
    ok(ordered && next[0] == 200 && next[1] == 200, "each writer's 200 events, in order");
    a3s_strv_free(&L.v);
}

/* A write that fails (file size limit): emit keeps going, close reports it. */
static void test_write_error(void)
{
    char path[PATH_MAX];
    new_path(path, "fsize.jsonl");
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {.rlim_cur = 300, .rlim_max = 300};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(9);
        a3s_error err = {0};
        a3s_audit *a = NULL;
        if (OPEN(&a, path, NULL, NULL, &err) != 0)
            _exit(8);
        for (int i = 0; i < 5; i++)
            a3s_audit_emit(a, "exec", "allow", "policy_allow", "/some/target", NULL);
        if (a3s_audit_close(a, &err) != -1)
            _exit(1);
        if (err.code != A3S_ERR_INTERNAL || !strstr(err.msg, "audit:") ||
            !strstr(err.msg, "more audit errors"))
            _exit(2);
        _exit(0);
    }
    int st;
    ok(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
       "failed writes are reported by close (child status %d)",
       pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    ok(file_size(path) == 300, "the file stopped at the size limit");
}

int main(void)
{
    umask(022);
    const char *tmp = getenv("TMPDIR");
    fmt_path(root, "%s/a3s-audit-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 2;
    }
    int fds0 = count_fds();

    test_ids();
    test_null_and_no_sink();
    test_file_sink();
    test_callback();
    test_extra();
    test_refused_paths();
    test_target_cap();
    test_concurrent();
    test_write_error();

    int fds1 = count_fds();
    ok(fds0 > 0 && fds0 == fds1, "no fd leaked (%d before, %d after)", fds0, fds1);

    a3s_rmtree_at(AT_FDCWD, root);
    return tap_done();
}
