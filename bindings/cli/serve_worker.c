/* a3s-sandbox serve: one request run in a worker process of its own (serve.c forks it),
 * with a sandbox of its own, its answers written to the server as tagged lines; and the
 * answer lines themselves. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "json.h"
#include "serve.h"

char *a3s_serve_answer(const json_t *id, json_t *result, const char *code, const char *message)
{
    json_t *m = json_object(), *e = NULL;
    bool ok = a3s_json_set(m, "id", id ? json_deep_copy(id) : json_null()) == 0;
    if (result) {
        ok = ok && a3s_json_set(m, "ok", json_true()) == 0 &&
             a3s_json_set(m, "result", json_incref(result)) == 0;
    } else {
        ok = ok && (e = json_object()) && a3s_json_set(e, "code", json_string(code)) == 0 &&
             a3s_json_set(e, "message", a3s_json_cstr(message)) == 0 &&
             a3s_json_set(m, "ok", json_false()) == 0 && a3s_json_set(m, "error", e) == 0;
        if (!ok && e && !json_object_get(m, "error"))
            json_decref(e);
    }
    char *s = ok ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    size_t n = s ? strlen(s) : 0;
    char *line = s ? realloc(s, n + 2) : NULL;
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    return line;
}

a3s_sandbox *a3s_serve_sandbox(const cli *c, const a3s_serve_req *r, bool defer, a3s_error *err)
{
    a3s_options o = {
        .workspace = c->workspace,
        .policy = c->policy,
        .defer_policy = defer,
        .audit_path = c->audit,
        .allow_process_host = c->allow_process_host ||
                              truthy(getenv("A3S_SANDBOX_ALLOW_PROCESS_HOST")) ||
                              truthy(getenv("A3S_CODE_ALLOW_PROCESS_HOST_SANDBOX")),
        .allow_host_root = c->allow_host_root || truthy(getenv("A3S_SANDBOX_ALLOW_HOST_ROOT")),
    };
    a3s_sandbox *sb = a3s_sandbox_new(&o, err);
    if (sb && r && r->ngrants &&
        a3s_sandbox_grant_set(sb, r->grants, r->ngrants, r->grant_digest, NULL, err) != A3S_OK) {
        a3s_sandbox_free(sb);
        sb = NULL;
    }
    return sb;
}

/* A worker never waits on the server without also watching its exec's deadline and
 * cancel fd: a client that stops reading must not keep a command alive (the library's
 * loop, which enforces the deadline, runs only when on_output returns). Until the
 * deadline an event waits for room, as the command's output would behind a pipe, and
 * nothing is lost; from the deadline on, output the server has no room for is dropped,
 * counted, and said in a "dropped" event where the gap is, and the library's own timer
 * kills the tree as ever. */
typedef struct worker {
    const json_t *id;
    int out;           /* the server's pipe (non-blocking) */
    int cancel_fd;     /* readable: cancelled or the server is ending */
    bool broken;       /* the server went away */
    bool late;         /* past the deadline: what cannot be written now is dropped */
    int64_t deadline;  /* CLOCK_MONOTONIC ms; -1: none (not an exec) */
    uint64_t seq;      /* the next event's number */
    uint64_t dropped[2]; /* bytes dropped of stdout, stderr, not yet said */
    char *buf;         /* what is not written yet: whole tagged lines, buf[off..len) */
    size_t off, len, cap;
} worker;

static int64_t mono_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes what the pipe takes now. */
static void flush_some(worker *w)
{
    while (w->off < w->len && !w->broken) {
        ssize_t k = write(w->out, w->buf + w->off, w->len - w->off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (k <= 0) {
            w->broken = true;
            break;
        }
        w->off += (size_t)k;
    }
    if (w->off == w->len || w->broken)
        w->off = w->len = 0;
}

/* One tagged line queued ('E' an event, 'F' the final message), then written as far as
 * it goes. */
static void queue_line(worker *w, char tag, const char *s)
{
    size_t n = strlen(s) + 1;
    if (w->broken)
        return;
    if (w->cap - w->len < n) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap - w->len < n)
            cap *= 2;
        char *b = realloc(w->buf, cap);
        if (!b) {
            w->broken = true; /* the server answers for a worker without a final message */
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    w->buf[w->len] = tag;
    memcpy(w->buf + w->len + 1, s, n - 1);
    w->len += n;
    flush_some(w);
}

enum { WAIT_DONE, WAIT_CANCEL, WAIT_LATE };

/* Waits until everything queued is written. During the exec (until_deadline) it stops
 * when the cancel fd becomes readable (left unread: run_exec's caller reads why) or at
 * the deadline; for the final message only a server that ends ('s', or its death) stops
 * it (the tree is dead by then, and a late 'c' is read and ignored). */
static int flush_all(worker *w, bool until_deadline)
{
    for (;;) {
        flush_some(w);
        if (w->off == w->len || w->broken)
            return WAIT_DONE;
        int wait = -1;
        if (until_deadline && w->deadline >= 0) {
            int64_t left = w->deadline - mono_ms();
            if (left <= 0)
                return WAIT_LATE;
            wait = left > 60000 ? 60000 : (int)left;
        }
        struct pollfd pf[2] = {{w->out, POLLOUT, 0}, {w->cancel_fd, POLLIN, 0}};
        int r = poll(pf, w->cancel_fd >= 0 ? 2 : 1, wait);
        if (r < 0 && errno != EINTR) {
            w->broken = true;
            return WAIT_DONE;
        }
        if (r <= 0 || !pf[1].revents || w->cancel_fd < 0)
            continue;
        if (until_deadline)
            return WAIT_CANCEL;
        char b;
        ssize_t k = read(w->cancel_fd, &b, 1);
        if ((k < 0 && errno != EINTR && errno != EAGAIN) || k == 0 || (k == 1 && b != 'c')) {
            w->broken = true; /* the server is ending: it answers for us */
            return WAIT_DONE;
        }
    }
}

/* One event of this exec as a JSON line (with its '\n'), or NULL (out of memory). */
static char *event_line(worker *w, const char *event, int stream, const char *data, size_t n,
                        uint64_t dropped)
{
    bool utf8 = data && a3s_json_is_utf8(data, n);
    char *b64 = data && !utf8 ? a3s_json_base64_encode(data, n) : NULL;
    json_t *m = json_object();
    char *s = NULL;
    bool ok = a3s_json_set(m, "id", json_deep_copy(w->id)) == 0 &&
              a3s_json_set(m, "event", json_string(event)) == 0 &&
              a3s_json_set(m, "stream",
                           json_string(stream == A3S_STDERR ? "stderr" : "stdout")) == 0 &&
              a3s_json_set(m, "seq", json_integer((json_int_t)w->seq)) == 0;
    if (ok && data)
        ok = a3s_json_set(m, utf8 ? "data" : "data_base64",
                          utf8 ? json_stringn(data, n) : b64 ? json_string(b64) : NULL) == 0;
    else if (ok)
        ok = a3s_json_set(m, "bytes", json_integer((json_int_t)dropped)) == 0;
    if (ok)
        s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    free(b64);
    size_t k = s ? strlen(s) : 0;
    char *line = s ? realloc(s, k + 2) : NULL;
    if (!line) {
        free(s);
        return NULL;
    }
    line[k] = '\n';
    line[k + 1] = '\0';
    w->seq++;
    return line;
}

/* The "dropped" events owed, before anything else of the exec is written. */
static bool say_dropped(worker *w)
{
    for (int k = 0; k < 2; k++) {
        if (!w->dropped[k])
            continue;
        char *line = event_line(w, "dropped", k + 1, NULL, 0, w->dropped[k]);
        if (!line)
            return false;
        queue_line(w, 'E', line);
        free(line);
        w->dropped[k] = 0;
    }
    return true;
}

/* Live output: each chunk as events of at most A3S_SERVE_MAX_CHUNK bytes, the bytes as
 * "data" when they are valid UTF-8, else "data_base64". Returning non-zero kills the
 * tree: done when the exec is cancelled or the server can no longer be told. */
static int on_output(void *ud, int stream, const char *data, size_t len, size_t head_len)
{
    (void)head_len; /* the events carry every byte; the result keeps its own capture */
    worker *w = ud;
    int k = stream == A3S_STDERR ? 1 : 0;
    while (len > 0 && !w->broken) {
        size_t n = len < A3S_SERVE_MAX_CHUNK ? len : A3S_SERVE_MAX_CHUNK;
        if (w->late) {
            flush_some(w);
            if (w->off < w->len) { /* no room, and no more waiting for it */
                w->dropped[k] += n;
                data += n;
                len -= n;
                continue;
            }
        }
        if (!say_dropped(w))
            return 1;
        char *line = event_line(w, "output", stream, data, n, 0);
        if (!line)
            return 1; /* out of memory: a lost chunk would break the stream's promise */
        queue_line(w, 'E', line);
        free(line);
        data += n;
        len -= n;
        if (w->late)
            continue;
        int why = flush_all(w, true);
        if (why == WAIT_CANCEL)
            return 1;
        if (why == WAIT_LATE)
            w->late = true; /* the library's timer kills the tree at once */
    }
    return w->broken ? 1 : 0;
}
/* JSON text from the library (a plan, a result) as a value, or NULL (out of memory). A
 * command's output may hold NUL bytes: \u0000 is kept. */
static json_t *parsed(char *text)
{
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
    free(text);
    return v;
}

/* The exec: the same request a run of the CLI makes, its result the same object as
 * --json prints (a3s_result_json). */
static int run_exec(worker *w, const a3s_serve_req *r, a3s_sandbox *sb, int cancel_fd,
                    json_t **result, a3s_error *err)
{
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = r->argv;
    req.shell_command = r->command;
    req.timeout_ms = r->timeout_ms;
    req.env = (const char *const *)r->env;
    req.stdin_data = r->stdin_data;
    req.stdin_len = r->stdin_len;
    req.cwd = r->cwd;
    req.on_output = on_output;
    req.output_ud = w;
    req.cancel_fd = cancel_fd;
    /* The deadline on_output keeps to while the server has no room: the one this exec's
     * own evaluation of the policy gives, written by the library before any output. */
    req.deadline_out = &w->deadline;
    a3s_result res;
    int st = a3s_sandbox_exec(sb, &req, &res, err);
    if (st == A3S_OK) {
        *result = parsed(a3s_result_json(&res));
        a3s_result_free(&res);
        if (!*result) {
            st = A3S_ERR_INTERNAL;
            snprintf(err->msg, sizeof err->msg, "cannot encode the result: out of memory");
        }
    }
    return st;
}

int a3s_serve_worker(const cli *c, const a3s_serve_req *r, int out, int cancel_fd)
{
    /* The server decides when its requests end (it writes to cancel_fd); a terminal's
     * ^C reaches the whole group, and is the server's to handle. */
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    worker w = {.id = r->id, .out = out, .cancel_fd = cancel_fd, .deadline = -1};
    a3s_error err;
    memset(&err, 0, sizeof err);
    json_t *result = NULL;
    int st;
    a3s_sandbox *sb = a3s_serve_sandbox(c, r, r->op == A3S_SERVE_EXEC, &err);
    if (!sb) {
        st = err.code;
    } else {
        char d[65];
        char *s;
        switch (r->op) {
        case A3S_SERVE_EXEC:
            st = run_exec(&w, r, sb, cancel_fd, &result, &err);
            break;
        case A3S_SERVE_PROBE:
            if ((st = a3s_sandbox_probe(sb, &err)) == A3S_OK)
                result = json_pack("{ss}", "backend", a3s_sandbox_backend(sb));
            break;
        case A3S_SERVE_DIGEST:
            if ((st = a3s_sandbox_digest(sb, d, &err)) == A3S_OK)
                result = json_pack("{ss}", "digest", d);
            break;
        case A3S_SERVE_PLAN:
        case A3S_SERVE_CAPABILITIES:
            s = r->op == A3S_SERVE_PLAN ? a3s_sandbox_plan_json(sb, &err)
                                        : a3s_sandbox_capabilities_json(sb, &err);
            st = s ? A3S_OK : err.code;
            result = parsed(s);
            break;
        default: /* cancel is the server's own */
            st = A3S_ERR_INTERNAL;
        }
        a3s_sandbox_free(sb);
    }
    if (st == A3S_OK && !result) {
        st = A3S_ERR_INTERNAL;
        snprintf(err.msg, sizeof err.msg, "cannot encode the result: out of memory");
    }
    /* Why an exec was aborted: what the server wrote to its cancel fd. */
    char why = 0;
    if (st == A3S_ERR_ABORTED && read(cancel_fd, &why, 1) != 1)
        why = 0;
    char *line = st == A3S_OK ? a3s_serve_answer(r->id, result, NULL, NULL)
                 : why == 'c'
                     ? a3s_serve_answer(r->id, NULL, "cancelled",
                                        "cancelled by a cancel request; the process tree was killed")
                 : why == 's' ? a3s_serve_answer(r->id, NULL, "aborted",
                                                 "the server is ending; the process tree was killed")
                              : a3s_serve_answer(r->id, NULL, a3s_json_status_name(st),
                                                 err.msg[0] ? err.msg : "failed");
    json_decref(result);
    /* What was dropped at the end is said before the final message. */
    if (line && say_dropped(&w)) {
        queue_line(&w, 'F', line);
        (void)flush_all(&w, false);
    }
    free(line);
    free(w.buf);
    return st == A3S_OK ? 0 : EXIT_REFUSED;
}
