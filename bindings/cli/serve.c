/* a3s-sandbox serve: a JSON bridge for any language (docs/PROTOCOL.md).
 *
 * The server is one thread: it reads request lines from stdin (bounded:
 * A3S_SERVE_MAX_LINE), answers malformed ones and cancels itself, and forks a worker
 * process for every other request (serve_worker.c). Not threads: the library forks its
 * helpers with pipes it waits on, and a fork made by one thread while another thread's
 * pipes are open holds them, so two execs of one process at once can wait on each other
 * forever. A worker is forked from this single thread and closes every descriptor of the
 * server it does not need, so it holds nothing of the others.
 *
 * A worker writes its answers to a pipe of its own, one line each behind a tag byte ('E'
 * an event, 'F' the final message); the server copies each whole line to stdout, so the
 * lines of concurrent requests interleave but never tear. An exec's cancel fd is a pipe
 * from the server: a byte kills the tree ('c' a cancel request, 's' the server ending),
 * and so does the server's death (the pipe hangs up). At the end of stdin the running
 * requests finish, then the server exits 0.
 *
 * Nothing here ever waits on the client: stdout is written without blocking from a
 * queue, and the loop polls it with everything else (the signal pipe above all). A client
 * that does not read fills the queue; past OUT_RELAY_CAP the workers' pipes are no longer
 * read (their execs then wait, as behind a pipe, but never past their deadline:
 * serve_worker.c), past OUT_INPUT_CAP no more requests are read. A signal ends the
 * server whatever the client does: every tree is killed, and the answers still queued get
 * OUT_GRACE_MS to be read. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "json.h"
#include "serve.h"

/* Slots: the running requests (at most A3S_SERVE_MAX_INFLIGHT) and the workers that
 * wrote their final message and are ending. */
#define MAX_SLOTS (2 * A3S_SERVE_MAX_INFLIGHT)

typedef struct job {
    json_t *id;      /* the request's id (a copy, owned) */
    bool exec;       /* only an exec can be cancelled */
    bool finished;   /* its final message was written: its id and place are free */
    pid_t pid;       /* the worker */
    int out;         /* read end of the worker's answers, -1 once at its end */
    int cancel;      /* write end of the exec's cancel fd */
    char *buf;       /* what was read of the worker's answers, not yet a whole line */
    size_t len, cap;
} job;

static job *jobs[MAX_SLOTS];
static bool out_broken; /* our reader went away: nothing more can be answered */
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_signal;

/* ------------------------------------------------------------------ answers */

/* Bytes of answers queued for a client that is not reading: past the first the workers'
 * pipes wait, past the second the requests do (a cancel still gets through before). */
#define OUT_RELAY_CAP (1024 * 1024)
#define OUT_INPUT_CAP (2 * 1024 * 1024)
#define OUT_GRACE_MS 2000 /* after a signal: for the client to read what is queued */

enum out_kind { OUT_SOCKET, OUT_NONBLOCK, OUT_POLLED };

/* stdout, written without blocking. Its file description may be shared (a terminal, a
 * pipe another process holds), so its flags are never changed: a socket takes
 * MSG_DONTWAIT per call, a pipe is opened again non-blocking through /proc (a description
 * of our own), anything else is written only when poll says it has room (a regular file
 * always has; a pipe takes PIPE_BUF bytes then). */
static struct {
    int fd;
    enum out_kind kind;
    bool fifo;
    char *buf;
    size_t off, len, cap; /* buf[off..len) is queued */
} out = {1, OUT_POLLED, false, NULL, 0, 0, 0};

static void out_open(void)
{
    struct stat st;
    if (fstat(1, &st) < 0)
        return; /* the first write says what is wrong with it */
    if (S_ISSOCK(st.st_mode)) {
        out.kind = OUT_SOCKET;
    } else if (S_ISFIFO(st.st_mode)) {
        out.fifo = true;
        int fd = open("/proc/self/fd/1", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            out.fd = fd;
            out.kind = OUT_NONBLOCK;
        }
    }
}

static size_t out_queued(void)
{
    return out.len - out.off;
}

/* Writes what it can of the queue now; a write error means the reader went away. */
static void out_flush(void)
{
    while (out_queued() > 0 && !out_broken) {
        const char *p = out.buf + out.off;
        size_t n = out_queued();
        ssize_t w;
        if (out.kind == OUT_SOCKET) {
            w = send(out.fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else if (out.kind == OUT_NONBLOCK) {
            w = write(out.fd, p, n);
        } else {
            struct pollfd pf = {out.fd, POLLOUT, 0};
            int r = poll(&pf, 1, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0)
                return;
            if (out.fifo && n > PIPE_BUF)
                n = PIPE_BUF;
            w = write(out.fd, p, n);
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (w <= 0) {
            out_broken = true;
            break;
        }
        out.off += (size_t)w;
    }
    if (out_queued() == 0 || out_broken)
        out.off = out.len = 0;
}

/* One line, whole, queued; a reader that went away stops every answer. */
static void put_line(const char *s, size_t n)
{
    if (out_broken)
        return;
    if (out.off > 0 && out.off >= out.len / 2) { /* keep the queue at the buffer's start */
        memmove(out.buf, out.buf + out.off, out.len - out.off);
        out.len -= out.off;
        out.off = 0;
    }
    if (out.cap - out.len < n) {
        size_t cap = out.cap ? out.cap : 65536;
        while (cap - out.len < n)
            cap *= 2;
        char *b = realloc(out.buf, cap);
        if (!b) {
            out_broken = true; /* an answer lost would break the protocol: end it all */
            return;
        }
        out.buf = b;
        out.cap = cap;
    }
    memcpy(out.buf + out.len, s, n);
    out.len += n;
    out_flush();
}

/* The server's own answer: an error about a request that runs nowhere. */
static void answer_error(const json_t *id, const char *code, const char *message)
{
    char *s = a3s_serve_answer(id, NULL, code, message);
    if (s) {
        put_line(s, strlen(s));
        free(s);
        return;
    }
    static const char oom[] = "{\"id\":null,\"ok\":false,\"error\":{\"code\":\"internal\","
                              "\"message\":\"out of memory\"}}\n";
    put_line(oom, sizeof oom - 1);
}

/* A second request with a running request's id: answered with "id": null (the id has
 * exactly one final message, the running request's), the id it reused said beside. */
static void answer_duplicate(const json_t *id)
{
    json_t *m = json_pack("{s:n, s:b, s:{s:s, s:s, s:O}}", "id", "ok", 0, "error", "code",
                          "duplicate_id", "message", "a request with this id is running",
                          "duplicate_of", id);
    char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    char *line = s ? realloc(s, strlen(s) + 2) : NULL;
    if (!line) {
        free(s);
        answer_error(NULL, "internal", "out of memory");
        return;
    }
    strcat(line, "\n");
    put_line(line, strlen(line));
    free(line);
}

/* ------------------------------------------------------------------ workers */

static size_t count(bool running_only)
{
    size_t n = 0;
    for (size_t i = 0; i < MAX_SLOTS; i++)
        n += jobs[i] && (!running_only || !jobs[i]->finished);
    return n;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Every running exec's tree killed: the server is ending. A cancel pipe is non-blocking
 * and one byte makes it readable; a failed write means the worker has ended already. */
static void cancel_all(void)
{
    for (size_t i = 0; i < MAX_SLOTS; i++)
        if (jobs[i] && !jobs[i]->finished && jobs[i]->cancel >= 0)
            (void)!write(jobs[i]->cancel, "s", 1);
}

static void cancel_one(const a3s_serve_req *r)
{
    for (size_t i = 0; i < MAX_SLOTS; i++) {
        job *j = jobs[i];
        if (j && j->exec && !j->finished && json_equal(j->id, r->target)) {
            (void)!write(j->cancel, "c", 1);
            json_t *res = json_pack("{sO}", "target", r->target);
            char *s = res ? a3s_serve_answer(r->id, res, NULL, NULL) : NULL;
            json_decref(res);
            if (s)
                put_line(s, strlen(s));
            else
                answer_error(r->id, "internal", "out of memory");
            free(s);
            return;
        }
    }
    answer_error(r->id, "not_found", "no exec with that id is running");
}

/* The worker's end of things: the server's descriptors are not its own. */
static void worker_fds(void)
{
    for (size_t i = 0; i < MAX_SLOTS; i++)
        if (jobs[i]) {
            close_fd(&jobs[i]->out);
            close_fd(&jobs[i]->cancel);
        }
    close_fd(&sig_pipe[0]);
    close_fd(&sig_pipe[1]);
    if (out.fd != 1)
        close_fd(&out.fd);
    free(out.buf);
    out.buf = NULL;
    out.off = out.len = out.cap = 0;
    /* Nothing of the worker reads the requests or writes the answers' stream directly. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0)
        _exit(EXIT_REFUSED);
    close(null);
}

static bool running_id(const json_t *id)
{
    for (size_t i = 0; i < MAX_SLOTS; i++)
        if (jobs[i] && !jobs[i]->finished && json_equal(jobs[i]->id, id))
            return true;
    return false;
}

static void start(const cli *c, a3s_serve_req *r)
{
    size_t slot = MAX_SLOTS;
    for (size_t i = 0; i < MAX_SLOTS; i++) {
        if (!jobs[i] && slot == MAX_SLOTS)
            slot = i;
    }
    if (count(true) >= A3S_SERVE_MAX_INFLIGHT || slot == MAX_SLOTS) {
        answer_error(r->id, "busy", "too many requests are running (at most 16)");
        return;
    }
    job *j = calloc(1, sizeof *j);
    int outp[2] = {-1, -1}, canp[2] = {-1, -1};
    /* Non-blocking: the worker polls its writes with its deadline (serve_worker.c). */
    if (!j || !(j->id = json_deep_copy(r->id)) || pipe2(outp, O_CLOEXEC | O_NONBLOCK) < 0 ||
        pipe2(canp, O_CLOEXEC | O_NONBLOCK) < 0) {
        answer_error(r->id, "internal", "cannot start the request: out of resources");
        goto fail;
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        answer_error(r->id, "internal", "cannot start the request: fork failed");
        goto fail;
    }
    if (pid == 0) {
        close(outp[0]);
        close(canp[1]);
        worker_fds();
        _exit(a3s_serve_worker(c, r, outp[1], canp[0]));
    }
    close(outp[1]);
    close(canp[0]);
    j->exec = r->op == A3S_SERVE_EXEC;
    j->pid = pid;
    j->out = outp[0];
    j->cancel = canp[1];
    jobs[slot] = j;
    return;
fail:
    for (int k = 0; k < 2; k++) {
        close_fd(&outp[k]);
        close_fd(&canp[k]);
    }
    if (j)
        json_decref(j->id);
    free(j);
}

/* Copies the worker's whole lines to stdout (without their tag); at its end, reaps it
 * and answers for it if it ended without its final message. */
static void relay(size_t slot)
{
    job *j = jobs[slot];
    if (j->cap - j->len < 65536) {
        size_t cap = j->cap ? j->cap * 2 : 131072;
        char *b = realloc(j->buf, cap);
        if (!b) {
            (void)!write(j->cancel, "s", 1); /* cannot read it: end it */
            close_fd(&j->out);
        } else {
            j->buf = b;
            j->cap = cap;
        }
    }
    ssize_t n = j->out >= 0 ? read(j->out, j->buf + j->len, j->cap - j->len) : 0;
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n > 0) {
        j->len += (size_t)n;
        size_t done = 0;
        char *nl;
        while ((nl = memchr(j->buf + done, '\n', j->len - done))) {
            size_t ln = (size_t)(nl - (j->buf + done)) + 1;
            if (ln > 1)
                put_line(j->buf + done + 1, ln - 1);
            if (j->buf[done] == 'F')
                j->finished = true;
            done += ln;
        }
        memmove(j->buf, j->buf + done, j->len - done);
        j->len -= done;
        return;
    }
    /* Its end: the worker exits right after its last line. */
    close_fd(&j->out);
    close_fd(&j->cancel);
    int st;
    while (waitpid(j->pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!j->finished)
        answer_error(j->id, "internal", "the request's worker ended without an answer");
    json_decref(j->id);
    free(j->buf);
    free(j);
    jobs[slot] = NULL;
}

/* ------------------------------------------------------------------ requests */

typedef struct reader {
    char *buf;
    size_t have;
    bool skipping; /* inside a line over the limit */
    bool eof;
} reader;

static void handle_line(const cli *c, const char *line, size_t len)
{
    a3s_serve_req r;
    char msg[512];
    const char *code = a3s_serve_req_parse(line, len, &r, msg, sizeof msg);
    /* Whatever the line asks, its id may not name a second final message of a running
     * request: refused as a duplicate first (a malformed line, a cancel, any op). */
    if (r.id && running_id(r.id))
        answer_duplicate(r.id);
    else if (code)
        answer_error(r.id, code, msg);
    else if (r.op == A3S_SERVE_CANCEL)
        cancel_one(&r);
    else
        start(c, &r);
    a3s_serve_req_free(&r);
}

static void too_large(void)
{
    char msg[96];
    snprintf(msg, sizeof msg, "the request line is longer than %d bytes", A3S_SERVE_MAX_LINE);
    answer_error(NULL, "too_large", msg);
}

/* One read of stdin, and the lines it completes. A line longer than A3S_SERVE_MAX_LINE
 * is answered once, when it ends, and never kept. */
static void read_requests(const cli *c, reader *rd)
{
    static char chunk[65536];
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) { /* the end (a last line without '\n' still counts) */
        if (rd->skipping)
            too_large();
        else if (rd->have)
            handle_line(c, rd->buf, rd->have);
        rd->eof = true;
        return;
    }
    const char *p = chunk, *end = chunk + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t seg = (size_t)((nl ? nl : end) - p);
        if (!rd->skipping && rd->have + seg > A3S_SERVE_MAX_LINE) {
            rd->skipping = true;
            rd->have = 0;
        }
        if (!rd->skipping) {
            memcpy(rd->buf + rd->have, p, seg);
            rd->have += seg;
        }
        if (!nl)
            break;
        if (rd->skipping)
            too_large();
        else if (rd->have) /* an empty line is skipped */
            handle_line(c, rd->buf, rd->have);
        rd->have = 0;
        rd->skipping = false;
        p = nl + 1;
    }
}

/* ------------------------------------------------------------------ the loop */

static int64_t now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_signal(int sig)
{
    int saved = errno;
    got_signal = sig;
    (void)!write(sig_pipe[1], "s", 1);
    errno = saved;
}

int cli_serve_main(const cli *c)
{
    signal(SIGPIPE, SIG_IGN); /* a reader that went away is a write error, not a death */
    a3s_error err;
    memset(&err, 0, sizeof err);
    /* The workspace and the policy checked once before serving: a server that could
     * answer nothing refuses at once, as a run would. */
    a3s_sandbox *sb = a3s_serve_sandbox(c, NULL, false, &err);
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

    reader rd = {.buf = malloc(A3S_SERVE_MAX_LINE)};
    if (!rd.buf || pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        fprintf(stderr, "a3s-sandbox: serve: cannot start: %s\n", strerror(errno));
        free(rd.buf);
        return EXIT_REFUSED;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        (void)sigaction(sigs[i], &sa, NULL);

    out_open();
    bool ending = false; /* a signal or no reader: every running exec was cancelled */
    int64_t give_up = -1; /* after a signal, every worker ended: when to stop writing */
    for (;;) {
        if ((got_signal || out_broken) && !ending) {
            cancel_all();
            ending = true;
        }
        bool reading = !rd.eof && !ending;
        int wait_ms = -1;
        if (!reading && count(false) == 0) {
            if (out_queued() == 0 || out_broken)
                break;
            if (got_signal) { /* the answers queued get a bounded time to be read */
                if (give_up < 0)
                    give_up = now_ms() + OUT_GRACE_MS;
                if (now_ms() >= give_up)
                    break;
                wait_ms = (int)(give_up - now_ms());
            }
        }
        struct pollfd p[3 + MAX_SLOTS];
        size_t slot_of[3 + MAX_SLOTS], np = 0;
        int in_at = -1, out_at = -1;
        p[np++] = (struct pollfd){sig_pipe[0], POLLIN, 0};
        if (reading && out_queued() < OUT_INPUT_CAP) {
            in_at = (int)np;
            p[np++] = (struct pollfd){0, POLLIN, 0};
        }
        if (out_queued() > 0) {
            out_at = (int)np;
            p[np++] = (struct pollfd){out.fd, POLLOUT, 0};
        }
        /* Past the cap the workers wait (as behind a pipe), except when ending: they must
         * be able to end whatever the client does. */
        size_t first_job = np;
        if (out_queued() < OUT_RELAY_CAP || ending)
            for (size_t i = 0; i < MAX_SLOTS; i++)
                if (jobs[i]) {
                    slot_of[np] = i;
                    p[np++] = (struct pollfd){jobs[i]->out, POLLIN, 0};
                }
        if (poll(p, np, wait_ms) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents) {
            char drain[64];
            while (read(sig_pipe[0], drain, sizeof drain) > 0) {
            }
        }
        if (out_at >= 0 && p[out_at].revents)
            out_flush();
        /* The workers first: their answers may free what the next request needs. */
        for (size_t k = first_job; k < np; k++)
            if (p[k].revents)
                relay(slot_of[k]);
        if (in_at >= 0 && p[in_at].revents && !got_signal && !out_broken)
            read_requests(c, &rd);
    }
    free(rd.buf);
    free(out.buf);
    if (out.fd != 1)
        close_fd(&out.fd);
    close_fd(&sig_pipe[0]);
    close_fd(&sig_pipe[1]);
    if (got_signal)
        return 128 + got_signal;
    return out_broken ? EXIT_OUTPUT_CLOSED : 0;
}
