/* a3s-sandbox serve: a JSON bridge for any language (docs/PROTOCOL.md).
 *
 * The main thread reads request lines from stdin (bounded: A3S_SERVE_MAX_LINE) and
 * answers malformed ones and cancels itself; every other request runs in a thread of its
 * own with a sandbox of its own (the library's sandbox is not shared between threads, and
 * the grants of one request must not reach another). Each answer is one line written
 * whole under out_lock, so the lines of concurrent requests interleave but never tear.
 * An exec's cancel fd is a pipe of its job: a cancel (or a signal to the server) writes
 * to it and the library kills the tree. At the end of stdin the running requests finish,
 * then the server exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "json.h"
#include "serve.h"

typedef struct job {
    a3s_serve_req req;
    json_t *id;        /* a copy of the request's id, owned */
    const cli *c;      /* the server's options */
    int cancel[2];     /* exec: the library's cancel fd and its write end */
    bool cancelled;    /* a cancel request reached it (under jobs_lock) */
    bool finishing;    /* its answer is being written: no more cancels (under jobs_lock) */
    uint64_t seq;      /* the next output event's number */
} job;

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool out_broken; /* our reader went away: nothing more can be answered */

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static job *jobs[A3S_SERVE_MAX_INFLIGHT];
static int done_pipe[2] = {-1, -1}; /* a job that ended writes a byte to it */
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_signal;

/* ------------------------------------------------------------------ answers */

/* One line, whole, or nothing: a reader that went away stops every answer. */
static void put_line(const char *s, size_t n)
{
    pthread_mutex_lock(&out_lock);
    while (n > 0 && !atomic_load(&out_broken)) {
        ssize_t w = write(1, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* someone made the shared file description non-blocking: wait for room */
            struct pollfd pf = {1, POLLOUT, 0};
            (void)poll(&pf, 1, -1);
            continue;
        }
        if (w <= 0) {
            atomic_store(&out_broken, true);
            break;
        }
        s += w;
        n -= (size_t)w;
    }
    pthread_mutex_unlock(&out_lock);
}

/* Writes msg (stolen) as one line. Out of memory still answers, without the details. */
static void emit(json_t *msg)
{
    char *s = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    size_t n = s ? strlen(s) : 0;
    char *line = s ? realloc(s, n + 2) : NULL;
    if (!line) {
        free(s);
        static const char oom[] =
            "{\"id\":null,\"ok\":false,\"error\":{\"code\":\"internal\",\"message\":\"out of "
            "memory\"}}\n";
        put_line(oom, sizeof oom - 1);
        return;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    put_line(line, n + 1);
    free(line);
}

static json_t *head(const json_t *id)
{
    json_t *m = json_object();
    if (a3s_json_set(m, "id", id ? json_deep_copy(id) : json_null()) < 0) {
        json_decref(m);
        return NULL;
    }
    return m;
}

static void answer_error(const json_t *id, const char *code, const char *message)
{
    json_t *m = head(id), *e = json_object();
    if (a3s_json_set(e, "code", json_string(code)) < 0 ||
        a3s_json_set(e, "message", a3s_json_cstr(message)) < 0 ||
        a3s_json_set(m, "ok", json_false()) < 0 || a3s_json_set(m, "error", e) < 0) {
        json_decref(m);
        m = NULL;
    }
    emit(m);
}

/* result is stolen; NULL (out of memory) answers an error instead. */
static void answer_ok(const json_t *id, json_t *result)
{
    json_t *m = result ? head(id) : NULL;
    if (!m || a3s_json_set(m, "ok", json_true()) < 0 || a3s_json_set(m, "result", result) < 0) {
        json_decref(m);
        if (!m)
            json_decref(result);
        answer_error(id, "internal", "cannot encode the result: out of memory");
        return;
    }
    emit(m);
}

/* JSON text from the library (a plan, a result) as a value, or NULL (out of memory). A
 * command's output may hold NUL bytes: \u0000 is kept. */
static json_t *parsed(char *text)
{
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
    free(text);
    return v;
}

/* ------------------------------------------------------------------ requests */

/* Live output: each chunk as events of at most A3S_SERVE_MAX_CHUNK bytes, the bytes as
 * "data" when they are valid UTF-8, else "data_base64". Returning non-zero kills the
 * tree: done when nobody reads the answers any more. */
static int on_output(void *ud, int stream, const char *data, size_t len, size_t head_len)
{
    (void)head_len; /* the events carry every byte; the result keeps its own capture */
    job *j = ud;
    while (len > 0 && !atomic_load(&out_broken)) {
        size_t n = len < A3S_SERVE_MAX_CHUNK ? len : A3S_SERVE_MAX_CHUNK;
        json_t *m = head(j->id);
        bool utf8 = a3s_json_is_utf8(data, n);
        char *b64 = utf8 ? NULL : a3s_json_base64_encode(data, n);
        if (a3s_json_set(m, "event", json_string("output")) < 0 ||
            a3s_json_set(m, "stream", json_string(stream == A3S_STDERR ? "stderr" : "stdout")) < 0 ||
            a3s_json_set(m, "seq", json_integer((json_int_t)j->seq++)) < 0 ||
            a3s_json_set(m, utf8 ? "data" : "data_base64",
                         utf8 ? json_stringn(data, n) : b64 ? json_string(b64) : NULL) < 0) {
            json_decref(m);
            free(b64);
            return 1; /* out of memory: a lost chunk would break the stream's promise */
        }
        free(b64);
        emit(m);
        data += n;
        len -= n;
    }
    return atomic_load(&out_broken) ? 1 : 0;
}

static a3s_sandbox *open_sandbox(const job *j, bool defer, a3s_error *err)
{
    const cli *c = j->c;
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
    if (sb && j->req.ngrants &&
        a3s_sandbox_grant_set(sb, j->req.grants, j->req.ngrants, j->req.grant_digest, NULL,
                              err) != A3S_OK) {
        a3s_sandbox_free(sb);
        sb = NULL;
    }
    return sb;
}

/* The exec: the same request a run of the CLI makes, its result the same object as
 * --json prints (a3s_result_json). */
static void run_exec(job *j, a3s_sandbox *sb, a3s_error *err, json_t **result, int *st)
{
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = j->req.argv;
    req.shell_command = j->req.command;
    req.timeout_ms = j->req.timeout_ms;
    req.env = (const char *const *)j->req.env;
    req.stdin_data = j->req.stdin_data;
    req.stdin_len = j->req.stdin_len;
    req.cwd = j->req.cwd;
    req.on_output = on_output;
    req.output_ud = j;
    req.cancel_fd = j->cancel[0];
    a3s_result r;
    *st = a3s_sandbox_exec(sb, &req, &r, err);
    if (*st == A3S_OK) {
        *result = parsed(a3s_result_json(&r));
        a3s_result_free(&r);
    }
}

static void *job_main(void *arg)
{
    job *j = arg;
    a3s_error err;
    memset(&err, 0, sizeof err);
    json_t *result = NULL;
    int st = A3S_ERR_INTERNAL;
    a3s_sandbox *sb = open_sandbox(j, j->req.op == A3S_SERVE_EXEC, &err);
    if (sb) {
        char d[65];
        switch (j->req.op) {
        case A3S_SERVE_EXEC:
            run_exec(j, sb, &err, &result, &st);
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
        case A3S_SERVE_CAPABILITIES: {
            char *s = j->req.op == A3S_SERVE_PLAN ? a3s_sandbox_plan_json(sb, &err)
                                                  : a3s_sandbox_capabilities_json(sb, &err);
            st = s ? A3S_OK : err.code;
            result = parsed(s);
            break;
        }
        case A3S_SERVE_CANCEL: /* answered by the main thread */
            break;
        }
        a3s_sandbox_free(sb);
    } else {
        st = err.code;
    }
    /* From here no cancel reaches it; a cancel answered before comes first. */
    pthread_mutex_lock(&jobs_lock);
    j->finishing = true;
    bool cancelled = j->cancelled;
    pthread_mutex_unlock(&jobs_lock);
    if (st == A3S_OK)
        answer_ok(j->id, result);
    else if (st == A3S_ERR_ABORTED && cancelled)
        answer_error(j->id, "cancelled", "cancelled by a cancel request; the process tree was killed");
    else
        answer_error(j->id, a3s_json_status_name(st), err.msg[0] ? err.msg : "failed");

    pthread_mutex_lock(&jobs_lock);
    for (size_t i = 0; i < A3S_SERVE_MAX_INFLIGHT; i++)
        if (jobs[i] == j)
            jobs[i] = NULL;
    pthread_mutex_unlock(&jobs_lock);
    a3s_serve_req_free(&j->req);
    json_decref(j->id);
    close(j->cancel[0]);
    close(j->cancel[1]);
    free(j);
    (void)!write(done_pipe[1], "d", 1);
    return NULL;
}

static size_t running(void)
{
    size_t n = 0;
    pthread_mutex_lock(&jobs_lock);
    for (size_t i = 0; i < A3S_SERVE_MAX_INFLIGHT; i++)
        n += jobs[i] != NULL;
    pthread_mutex_unlock(&jobs_lock);
    return n;
}

/* Every running exec's tree killed (a signal to the server, or no reader left). */
static void cancel_all(void)
{
    pthread_mutex_lock(&jobs_lock);
    for (size_t i = 0; i < A3S_SERVE_MAX_INFLIGHT; i++)
        if (jobs[i] && jobs[i]->cancel[1] >= 0)
            (void)!write(jobs[i]->cancel[1], "c", 1);
    pthread_mutex_unlock(&jobs_lock);
}

/* cancel: answered under jobs_lock, so that its answer comes before the exec's own. */
static void cancel_one(const a3s_serve_req *r)
{
    pthread_mutex_lock(&jobs_lock);
    job *t = NULL;
    for (size_t i = 0; i < A3S_SERVE_MAX_INFLIGHT && !t; i++)
        if (jobs[i] && jobs[i]->req.op == A3S_SERVE_EXEC && !jobs[i]->finishing &&
            json_equal(jobs[i]->id, r->target))
            t = jobs[i];
    if (t) {
        t->cancelled = true;
        (void)!write(t->cancel[1], "c", 1);
        answer_ok(r->id, json_pack("{sO}", "target", r->target));
    } else {
        answer_error(r->id, "not_found", "no exec with that id is running");
    }
    pthread_mutex_unlock(&jobs_lock);
}

/* Takes a slot and starts the request's thread; the request is the job's from here. */
static void start(const cli *c, a3s_serve_req *r)
{
    job *j = calloc(1, sizeof *j);
    if (!j || !(j->id = json_deep_copy(r->id))) {
        free(j);
        answer_error(r->id, "internal", "out of memory");
        return;
    }
    j->c = c;
    j->cancel[0] = j->cancel[1] = -1;
    if (pipe2(j->cancel, O_CLOEXEC | O_NONBLOCK) < 0) {
        answer_error(r->id, "internal", "cannot make the cancel pipe");
        json_decref(j->id);
        free(j);
        return;
    }
    pthread_mutex_lock(&jobs_lock);
    const char *refused = NULL;
    size_t slot = A3S_SERVE_MAX_INFLIGHT;
    for (size_t i = 0; i < A3S_SERVE_MAX_INFLIGHT && !refused; i++) {
        if (!jobs[i] && slot == A3S_SERVE_MAX_INFLIGHT)
            slot = i;
        if (jobs[i] && json_equal(jobs[i]->id, r->id))
            refused = "duplicate_id";
    }
    if (!refused && slot == A3S_SERVE_MAX_INFLIGHT)
        refused = "busy";
    if (!refused) {
        j->req = *r;
        memset(r, 0, sizeof *r);
        jobs[slot] = j;
        /* The thread runs with the server's signals blocked: they are the main thread's. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_attr_t at;
        pthread_t th;
        int e = pthread_attr_init(&at);
        if (!e)
            e = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        (void)pthread_sigmask(SIG_BLOCK, &all, &old);
        if (!e)
            e = pthread_create(&th, &at, job_main, j);
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        (void)pthread_attr_destroy(&at);
        if (!e) {
            pthread_mutex_unlock(&jobs_lock);
            return;
        }
        jobs[slot] = NULL;
        *r = j->req; /* the caller frees it */
        refused = "internal";
    }
    pthread_mutex_unlock(&jobs_lock);
    answer_error(r->id, refused,
                 !strcmp(refused, "busy")           ? "too many requests are running (at most 16)"
                 : !strcmp(refused, "duplicate_id") ? "a request with this id is running"
                                                    : "cannot start a thread for the request");
    close(j->cancel[0]);
    close(j->cancel[1]);
    json_decref(j->id);
    free(j);
}

static void handle_line(const cli *c, const char *line, size_t len)
{
    a3s_serve_req r;
    char msg[512];
    const char *code = a3s_serve_req_parse(line, len, &r, msg, sizeof msg);
    if (code)
        answer_error(r.id, code, msg);
    else if (r.op == A3S_SERVE_CANCEL)
        cancel_one(&r);
    else
        start(c, &r);
    a3s_serve_req_free(&r);
}

/* ------------------------------------------------------------------ the loop */

static void on_signal(int sig)
{
    int saved = errno;
    got_signal = sig;
    (void)!write(sig_pipe[1], "s", 1);
    errno = saved;
}

/* Reads stdin line by line until its end, a signal or the loss of our reader. A line
 * longer than A3S_SERVE_MAX_LINE is answered once, when it ends, and never kept. */
static void read_requests(const cli *c, char *buf)
{
    static char chunk[65536];
    size_t have = 0;
    bool skipping = false;
    for (;;) {
        if (got_signal || atomic_load(&out_broken))
            return;
        struct pollfd p[2] = {{0, POLLIN, 0}, {sig_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (!p[0].revents)
            continue;
        ssize_t n = read(0, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) { /* the end (a last line without '\n' still counts) */
            if (skipping)
                answer_error(NULL, "too_large", "the request line is longer than 1048576 bytes");
            else if (have)
                handle_line(c, buf, have);
            return;
        }
        const char *p0 = chunk, *end = chunk + n;
        while (p0 < end) {
            const char *nl = memchr(p0, '\n', (size_t)(end - p0));
            size_t seg = (size_t)((nl ? nl : end) - p0);
            if (!skipping && have + seg > A3S_SERVE_MAX_LINE) {
                skipping = true;
                have = 0;
            }
            if (!skipping) {
                memcpy(buf + have, p0, seg);
                have += seg;
            }
            if (!nl)
                break;
            if (skipping)
                answer_error(NULL, "too_large", "the request line is longer than 1048576 bytes");
            else if (have)
                handle_line(c, buf, have);
            have = 0;
            skipping = false;
            p0 = nl + 1;
        }
    }
}

int cli_serve_main(const cli *c)
{
    signal(SIGPIPE, SIG_IGN); /* a reader that went away is a write error, not a death */
    a3s_error err;
    memset(&err, 0, sizeof err);
    /* The workspace and the policy checked once before serving: a server that could
     * answer nothing refuses at once, as a run would. */
    job probe_job = {.c = c};
    a3s_sandbox *sb = open_sandbox(&probe_job, false, &err);
    if (!sb)
        return fail_at("opening the workspace and finding the policy",
                       "cannot create the sandbox", &err);
    if (a3s_sandbox_fallback_reason(sb))
        fprintf(stderr,
                "a3s-sandbox: warning: NO LOCAL SANDBOX BOUNDARY IS IN FORCE: running on the "
                "host (process-host backend) because the native boundary is unusable: %s\n",
                a3s_sandbox_fallback_reason(sb));
    describe(sb, c);
    a3s_sandbox_free(sb);

    char *buf = malloc(A3S_SERVE_MAX_LINE);
    if (!buf || pipe2(done_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
        pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        fprintf(stderr, "a3s-sandbox: serve: cannot start: %s\n", strerror(errno));
        free(buf);
        return EXIT_REFUSED;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        (void)sigaction(sigs[i], &sa, NULL);

    read_requests(c, buf);
    free(buf);
    /* The end of stdin: the running requests finish. A signal (or no reader) ends them. */
    bool cancelled = false;
    while (running() > 0) {
        if ((got_signal || atomic_load(&out_broken)) && !cancelled) {
            cancel_all();
            cancelled = true;
        }
        struct pollfd p[2] = {{done_pipe[0], POLLIN, 0}, {sig_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        char drain[64];
        while (read(done_pipe[0], drain, sizeof drain) > 0) {
        }
        while (read(sig_pipe[0], drain, sizeof drain) > 0) {
        }
    }
    if (got_signal)
        return 128 + got_signal;
    return atomic_load(&out_broken) ? EXIT_OUTPUT_CLOSED : 0;
}
