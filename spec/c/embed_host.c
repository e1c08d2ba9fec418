/* An embedding host in C: a program that uses only the public API (a3s_sandbox.h) and the
 * shared library, the way a tool embeds the sandbox. SIGPIPE stays at its default
 * disposition here (it kills), so a library write that raised it would kill the host.
 *
 * Each scenario runs in a child process (a host of its own); the parent checks that the
 * host survived (a normal exit, not a signal), then that nothing is left: no
 * a3s-sandbox-* scratch dir in the host's private TMPDIR, the workspace unchanged, no
 * process of the run (the commands carry a unique marker where they can).
 *
 *   embed_host                     stdin larger than a pipe (data, file, pipe, socket;
 *                                  and the process-host fallback, where the race is
 *                                  real) to commands that do not read it all; the output
 *                                  mirror (a reader that goes away, one that was never
 *                                  there, a normal run)
 *   embed_host --shared-mirror-fd  the mirror with ONE fd for both streams
 *   embed_host --stalled-mirror-reader  the mirror to a reader that does not read: the run
 *                                  is released by the deadline; the wait for the reader ends on cancel_fd
 *
 * Exit 77 (skip) when the sandbox boundary is unavailable, 1 when anything failed; with
 * A3S_MUST_WORK=1 a skip is a failure. */
#include <a3s_sandbox.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG (1u << 20) /* stdin size: far more than a pipe holds (64 KiB) */

static int n_tests, n_failed;
static char ws[256], tmp[256], marker[64];

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(int cond, const char *fmt, ...)
{
    va_list ap;
    n_tests++;
    if (!cond)
        n_failed++;
    printf("%s %d - ", cond ? "ok" : "not ok", n_tests);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* In a scenario (child): a failed expectation is a diagnostic line and a non-zero exit. */
static int bad;
#define expect(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            bad = 1;                                                                       \
            printf("#   %s:%d: expected %s: ", __FILE__, __LINE__, #cond);                 \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            fflush(stdout);                                                                \
        }                                                                                  \
    } while (0)

static unsigned long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000ULL + (unsigned long long)ts.tv_nsec / 1000000ULL;
}

/* ---- what is left on the host ----------------------------------------------------- */

/* Entries of the private TMPDIR whose name starts with "a3s-sandbox-". */
static int scratch_left(void)
{
    int n = 0;
    DIR *d = opendir(tmp);
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "a3s-sandbox-", 12) == 0) {
            printf("#   left in TMPDIR: %s\n", e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

/* Processes (other than this one) whose command line contains the run's marker. */
static int marked_procs(void)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || atoi(e->d_name) == getpid())
            continue;
        char path[64], buf[4096];
        if (snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name) >= (int)sizeof path)
            continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r <= 0)
            continue;
        for (ssize_t i = 0; i < r; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[r] = '\0';
        if (strstr(buf, marker)) {
            printf("#   still running: pid %s: %s\n", e->d_name, buf);
            n++;
        }
    }
    closedir(d);
    return n;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The workspace as text: names, types, sizes, modes and contents of its files. */
static void ws_snapshot(char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    struct stat st;
    if (stat(ws, &st) == 0)
        len += (size_t)snprintf(out + len, cap - len, "root %o\n", (unsigned)st.st_mode);
    DIR *d = opendir(ws);
    struct dirent *e;
    char names[32][256];
    int n = 0;
    while (d && (e = readdir(d)) != NULL && n < 32)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    if (d)
        closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    for (int i = 0; i < n && len < cap; i++) {
        char p[512], body[128] = "";
        if (snprintf(p, sizeof p, "%s/%s", ws, names[i]) >= (int)sizeof p || lstat(p, &st) < 0)
            continue;
        int fd = S_ISREG(st.st_mode) ? open(p, O_RDONLY | O_CLOEXEC) : -1;
        if (fd >= 0) {
            ssize_t r = read(fd, body, sizeof body - 1);
            body[r > 0 ? r : 0] = '\0';
            close(fd);
        }
        len += (size_t)snprintf(out + len, cap - len, "%s %o %lld %s\n", names[i],
                                (unsigned)st.st_mode, (long long)st.st_size, body);
    }
}

/* ---- scenarios (each runs in a child: a host of its own) ------------------------------ */

static char *big_data(void)
{
    char *d = malloc(BIG);
    if (d)
        memset(d, 'x', BIG);
    return d;
}

static a3s_sandbox *open_sandbox(void)
{
    a3s_options o = {0};
    o.workspace = ws;
    a3s_error err = {0};
    a3s_sandbox *sb = a3s_sandbox_new(&o, &err);
    expect(sb != NULL, "a3s_sandbox_new: %s", err.msg);
    return sb;
}

/* Runs req; checks A3S_OK and a normal, complete result (exit status 0). */
static int run_ok(a3s_sandbox *sb, const a3s_exec_request *req, a3s_result *r, const char *what)
{
    a3s_error err = {0};
    int rc = a3s_sandbox_exec(sb, req, r, &err);
    expect(rc == A3S_OK, "%s: exec returned %d: %s", what, rc, err.msg);
    if (rc != A3S_OK)
        return -1;
    expect(r->has_exit_code && r->exit_code == 0, "%s: exit status 0 (has_exit_code %d, %d)",
           what, r->has_exit_code, r->exit_code);
    expect(!r->timed_out, "%s: not timed out", what);
    expect(!r->output_closed, "%s: output_closed false", what);
    return 0;
}

/* 1 MiB of stdin_data to commands that read none or one byte of it. */
static void scen_stdin_data(a3s_sandbox *sb)
{
    char *d = big_data();
    const char *tru[] = {"true", marker, NULL};
    const char *head1[] = {"bash", "-c", "head -c1; :", marker, NULL};
    for (int i = 0; i < 10; i++) {
        a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
        req.argv = i % 2 ? head1 : tru;
        req.stdin_data = d;
        req.stdin_len = BIG;
        a3s_result r;
        if (run_ok(sb, &req, &r, i % 2 ? "head -c1" : "true") < 0)
            continue;
        if (i % 2)
            expect(r.stdout_len == 1 && r.stdout_text[0] == 'x', "head -c1 printed 'x' (%zu bytes)",
                   r.stdout_len);
        a3s_result_free(&r);
    }
    free(d);
}

/* Threads of one host, each with a sandbox of its own, running at once: nothing one
 * run makes may hold another up (a forked child that never execs must keep no copy of
 * another thread's pipes: two such children waited on each other for good). */
static void *thread_runs(void *arg)
{
    (void)arg;
    const char *cmd[] = {"true", marker, NULL};
    for (int i = 0; i < 15; i++) {
        a3s_sandbox *sb = open_sandbox(); /* made anew: its setup forks too */
        a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
        req.argv = cmd;
        a3s_result r;
        if (sb && run_ok(sb, &req, &r, "a thread's run") == 0)
            a3s_result_free(&r);
        a3s_sandbox_free(sb);
    }
    return NULL;
}

static void scen_threads(a3s_sandbox *sb)
{
    (void)sb;
    pthread_t th[4];
    int n = 0;
    for (; n < 4; n++)
        if (pthread_create(&th[n], NULL, thread_runs, NULL) != 0)
            break;
    expect(n == 4, "4 threads started (%d)", n);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/* The same through a session (a3s_session_*): 1 MiB of stdin_data to commands that read
 * none or one byte of it, each a command of one session; then the session is closed
 * (nothing of it may be left: checked after every scenario). */
static void scen_session(a3s_sandbox *sb)
{
    a3s_error err = {0};
    a3s_session *s = NULL;
    expect(a3s_session_open(sb, &s, &err) == A3S_OK, "a3s_session_open: %s", err.msg);
    if (!s)
        return;
    char *d = big_data();
    const char *tru[] = {"true", marker, NULL};
    const char *head1[] = {"bash", "-c", "head -c1; :", marker, NULL};
    for (int i = 0; i < 6; i++) {
        a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
        req.argv = i % 2 ? head1 : tru;
        req.stdin_data = d;
        req.stdin_len = BIG;
        a3s_result r;
        int rc = a3s_session_exec(s, &req, &r, &err);
        expect(rc == A3S_OK, "session exec returned %d: %s", rc, err.msg);
        if (rc != A3S_OK)
            continue;
        expect(r.has_exit_code && r.exit_code == 0, "session command %d: exit status 0", i);
        if (i % 2)
            expect(r.stdout_len == 1 && r.stdout_text[0] == 'x', "session head -c1 printed 'x'");
        a3s_result_free(&r);
    }
    free(d);
    a3s_session_close(s);
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = tru;
    a3s_result r;
    expect(a3s_session_exec(NULL, &req, &r, &err) == A3S_ERR_INVALID,
           "a closed (NULL) session refuses");
}

/* A regular file of 1 MiB as stdin_fd: the supervisor forwards it through a fresh pipe. */
static void scen_stdin_file(a3s_sandbox *sb)
{
    char path[300];
    snprintf(path, sizeof path, "%s/stdin-file", tmp);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    char *d = big_data();
    expect(fd >= 0 && d && write(fd, d, BIG) == (ssize_t)BIG, "the stdin file was written");
    unlink(path);
    (void)lseek(fd, 0, SEEK_SET);
    const char *tru[] = {"true", marker, NULL};
    const char *head1[] = {"bash", "-c", "head -c1; :", marker, NULL};
    for (int i = 0; i < 4; i++) {
        a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
        req.argv = i % 2 ? head1 : tru;
        req.stdin_fd = fd;
        a3s_result r;
        if (run_ok(sb, &req, &r, i % 2 ? "file to head -c1" : "file to true") < 0)
            continue;
        if (i % 2)
            expect(r.stdout_len == 1 && r.stdout_text[0] == 'x', "head -c1 printed 'x'");
        a3s_result_free(&r);
    }
    expect(lseek(fd, 0, SEEK_CUR) == 0, "the host's file offset is unchanged");
    close(fd);
    free(d);
}

/* A pipe the host filled (256 KiB, enlarged) and still holds open for writing: passed on
 * as it is; the command reads one byte or none and exits. */
static void scen_stdin_pipe(a3s_sandbox *sb)
{
    int p[2];
    expect(pipe2(p, O_CLOEXEC) == 0, "pipe");
    (void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    char *d = big_data();
    size_t fill = 256 * 1024;
    expect(fcntl(p[1], F_GETPIPE_SZ) >= (int)fill, "the pipe holds 256 KiB");
    expect(write(p[1], d, fill) == (ssize_t)fill, "256 KiB written into the pipe");
    const char *tru[] = {"true", marker, NULL};
    const char *head1[] = {"bash", "-c", "head -c1; :", marker, NULL};
    for (int i = 0; i < 2; i++) {
        a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
        req.argv = i ? head1 : tru;
        req.stdin_fd = p[0];
        a3s_result r;
        if (run_ok(sb, &req, &r, i ? "pipe to head -c1" : "pipe to true") < 0)
            continue;
        a3s_result_free(&r);
    }
    close(p[0]);
    close(p[1]);
    free(d);
}

/* A socket (forwarded by the supervisor) that a writer process feeds with 1 MiB. */
static void scen_stdin_socket(a3s_sandbox *sb)
{
    int sv[2];
    expect(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
    pid_t w = fork();
    if (w == 0) {
        close(sv[0]);
        char *d = big_data();
        size_t off = 0;
        while (d && off < BIG) {
            ssize_t n = send(sv[1], d + off, BIG - off, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            off += (size_t)n;
        }
        _exit(0);
    }
    close(sv[1]);
    const char *tru[] = {"true", marker, NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = tru;
    req.stdin_fd = sv[0];
    a3s_result r;
    if (run_ok(sb, &req, &r, "socket to true") == 0)
        a3s_result_free(&r);
    close(sv[0]); /* the writer ends (EPIPE, without a signal there) */
    (void)waitpid(w, NULL, 0);
}

/* The process-host fallback (allow_process_host with a bwrap that fails): there the
 * command is the only reader of its stdin pipe (no bwrap or launcher holding it too), so
 * a reader that stops midway while the supervisor is still writing meets the write with
 * EPIPE (a race that, with a plain write, kills the host within a few dozen runs). */
static void scen_stdin_process_host(a3s_sandbox *unused)
{
    (void)unused;
    a3s_options o = {0};
    o.workspace = ws;
    o.bwrap = "/bin/false";
    o.allow_process_host = true;
    o.allow_host_root = true; /* a root caller is host root there: its own opt-in */
    a3s_error err = {0};
    a3s_sandbox *sb = a3s_sandbox_new(&o, &err);
    expect(sb != NULL, "a3s_sandbox_new (process-host): %s", err.msg);
    if (!sb)
        return;
    expect(strcmp(a3s_sandbox_backend(sb), "process-host") == 0, "the fallback is in force");
    size_t n = 4u << 20;
    char *d = malloc(n);
    if (d)
        memset(d, 'x', n);
    const char *dd[] = {"dd", "bs=4k", "count=100", "of=/dev/null", "status=none", NULL};
    int good = 0;
    for (int i = 0; d && i < 60; i++) {
        a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
        req.argv = dd;
        req.stdin_data = d;
        req.stdin_len = n;
        a3s_result r;
        if (run_ok(sb, &req, &r, "dd reading 400 KiB of 4 MiB") == 0) {
            good++;
            a3s_result_free(&r);
        }
    }
    expect(good == 60, "60 runs gave a normal result (%d)", good);
    free(d);
    a3s_sandbox_free(sb);
}

/* The mirror's reader: reads up to the first newline, then closes its end. */
typedef struct reader {
    int fd;
    char line[256];
} reader;

static void *read_line_then_close(void *ud)
{
    reader *rd = ud;
    size_t n = 0;
    char c;
    while (n < sizeof rd->line - 1 && read(rd->fd, &c, 1) == 1) {
        rd->line[n++] = c;
        if (c == '\n')
            break;
    }
    rd->line[n] = '\0';
    close(rd->fd);
    return NULL;
}

/* mirror = true to a pipe whose reader reads one line and goes away (yes | head -1). */
static void scen_mirror_closed(a3s_sandbox *sb)
{
    int p[2];
    expect(pipe2(p, O_CLOEXEC) == 0, "pipe");
    reader rd = {p[0], ""};
    pthread_t th;
    pthread_create(&th, NULL, read_line_then_close, &rd);
    const char *yes[] = {"yes", marker, NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = yes;
    req.timeout_ms = 30000;
    req.mirror = true;
    req.mirror_fd[0] = p[1];
    req.mirror_fd[1] = -1;
    int fl = fcntl(p[1], F_GETFL);
    a3s_result r;
    a3s_error err = {0};
    unsigned long long t0 = now_ms();
    int rc = a3s_sandbox_exec(sb, &req, &r, &err);
    unsigned long long ms = now_ms() - t0;
    pthread_join(th, NULL);
    expect(rc == A3S_OK, "exec returned A3S_OK (%d: %s)", rc, err.msg);
    char want[80];
    snprintf(want, sizeof want, "%s\n", marker);
    expect(strcmp(rd.line, want) == 0, "the reader got the first line ('%s')", rd.line);
    expect(ms < 10000, "exec returned well before the 30 s deadline (%llu ms)", ms);
    expect(fcntl(p[1], F_GETFL) == fl, "the mirror fd's flags are unchanged");
    if (rc == A3S_OK) {
        expect(r.output_closed, "result.output_closed is true");
        expect(!r.timed_out, "not timed out");
        a3s_result_free(&r);
    }
    close(p[1]);
}

/* mirror = true to a pipe whose reader is gone before the run starts. */
static void scen_mirror_no_reader(a3s_sandbox *sb)
{
    int p[2];
    expect(pipe2(p, O_CLOEXEC) == 0, "pipe");
    close(p[0]);
    const char *cmd[] = {"bash", "-c", "echo hello; sleep 20", marker, NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = cmd;
    req.timeout_ms = 30000;
    req.mirror = true;
    req.mirror_fd[0] = p[1];
    req.mirror_fd[1] = -1;
    a3s_result r;
    a3s_error err = {0};
    unsigned long long t0 = now_ms();
    int rc = a3s_sandbox_exec(sb, &req, &r, &err);
    unsigned long long ms = now_ms() - t0;
    expect(rc == A3S_OK, "exec returned A3S_OK (%d: %s)", rc, err.msg);
    expect(ms < 10000, "the tree was killed at once, not at the deadline (%llu ms)", ms);
    if (rc == A3S_OK) {
        expect(r.output_closed, "result.output_closed is true");
        a3s_result_free(&r);
    }
    close(p[1]);
}

/* Reads what is in a pipe (the writer end is closed) into buf. */
static void drain(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
}

/* A normal mirrored run with 1 MiB of stdin: each stream to its own pipe, live. */
static void scen_mirror_normal(a3s_sandbox *sb)
{
    int po[2], pe[2];
    expect(pipe2(po, O_CLOEXEC) == 0 && pipe2(pe, O_CLOEXEC) == 0, "pipes");
    char *d = big_data();
    const char *cmd[] = {"bash", "-c", "head -c1; echo; echo err >&2", marker, NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = cmd;
    req.stdin_data = d;
    req.stdin_len = BIG;
    req.mirror = true;
    req.mirror_fd[0] = po[1];
    req.mirror_fd[1] = pe[1];
    a3s_result r;
    if (run_ok(sb, &req, &r, "mirrored run") == 0) {
        expect(strcmp(r.stdout_text, "x\n") == 0, "captured stdout 'x\\n' ('%s')", r.stdout_text);
        a3s_result_free(&r);
    }
    close(po[1]);
    close(pe[1]);
    char out[256], errb[256];
    drain(po[0], out, sizeof out);
    drain(pe[0], errb, sizeof errb);
    expect(strcmp(out, "x\n") == 0, "stdout mirrored once ('%s')", out);
    expect(strcmp(errb, "err\n") == 0, "stderr mirrored once ('%s')", errb);
    close(po[0]);
    close(pe[0]);
    free(d);
}

/* ONE fd for both streams (mirror_fd[0] == mirror_fd[1]), as an embedder interleaving
 * stdout and stderr into one pipe does. The command writes to both and exits at once;
 * exec must return at once too, with both lines mirrored. */
static void scen_mirror_shared_fd(a3s_sandbox *sb)
{
    int p[2];
    expect(pipe2(p, O_CLOEXEC) == 0, "pipe");
    const char *cmd[] = {"bash", "-c", "echo out; echo err >&2", marker, NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = cmd;
    req.timeout_ms = 20000;
    req.mirror = true;
    req.mirror_fd[0] = p[1];
    req.mirror_fd[1] = p[1];
    a3s_result r;
    unsigned long long t0 = now_ms();
    int rc = run_ok(sb, &req, &r, "shared mirror fd");
    unsigned long long ms = now_ms() - t0;
    expect(ms < 10000, "exec returned when the command ended, not at the 20 s deadline (%llu ms)",
           ms);
    if (rc == 0)
        a3s_result_free(&r);
    close(p[1]);
    char buf[256];
    drain(p[0], buf, sizeof buf);
    close(p[0]);
    expect(strcmp(buf, "out\nerr\n") == 0, "both streams mirrored, in order ('%s')", buf);
}

/* mirror = true to a pipe whose reader holds it open but does not read (yet). The command
 * prints 300 000 bytes (more than the output budget) and exits at once; the deadline is
 * 2 s. The contract: the tree is gone by the deadline and everything of the run is
 * released (no scratch dir, workspace as before) while exec still waits to hand the
 * rest to the reader, as a pager would want; the caller's cancel_fd ends that wait. A
 * watchdog thread checks the host side at 4 s, then cancels. */
typedef struct stall_check {
    int cancel_w;
    int procs, scratch;
    char snap[8192];
} stall_check;

static void *stall_watch(void *ud)
{
    stall_check *c = ud;
    struct timespec ts = {4, 0};
    nanosleep(&ts, NULL);
    c->procs = marked_procs();
    c->scratch = scratch_left();
    ws_snapshot(c->snap, sizeof c->snap);
    (void)!write(c->cancel_w, "c", 1);
    return NULL;
}

static void scen_mirror_stalled_reader(a3s_sandbox *sb)
{
    int p[2], cancel[2];
    expect(pipe2(p, O_CLOEXEC) == 0 && pipe2(cancel, O_CLOEXEC) == 0, "pipes");
    char before[8192];
    ws_snapshot(before, sizeof before);
    const char *cmd[] = {"bash", "-c", "head -c 300000 /dev/zero", marker, NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = cmd;
    req.timeout_ms = 2000;
    req.mirror = true;
    req.mirror_fd[0] = p[1];
    req.mirror_fd[1] = -1;
    req.cancel_fd = cancel[0];
    stall_check c = {.cancel_w = cancel[1], .procs = -1, .scratch = -1};
    pthread_t t;
    expect(pthread_create(&t, NULL, stall_watch, &c) == 0, "watchdog thread");
    a3s_result r;
    a3s_error err = {0};
    alarm(25);
    unsigned long long t0 = now_ms();
    int rc = a3s_sandbox_exec(sb, &req, &r, &err);
    unsigned long long ms = now_ms() - t0;
    alarm(0);
    pthread_join(t, NULL);
    expect(rc == A3S_OK, "exec returned A3S_OK (%d: %s)", rc, err.msg);
    expect(ms >= 3500 && ms < 10000,
           "exec waited for the reader and came back once cancelled (%llu ms)", ms);
    expect(c.procs == 0, "while it waited: nothing of the tree ran (%d)", c.procs);
    expect(c.scratch == 0, "while it waited: no scratch dir left (%d)", c.scratch);
    expect(strcmp(c.snap, before) == 0, "while it waited: the workspace was as before");
    if (rc == A3S_OK)
        a3s_result_free(&r);
    close(p[0]);
    close(p[1]);
    close(cancel[0]);
    close(cancel[1]);
}

typedef struct scenario {
    const char *name;
    void (*fn)(a3s_sandbox *);
} scenario;

/* Text as TAP diagnostics, one "#" line per line. */
static void print_diag(const char *text)
{
    const char *p = text, *nl;
    while (*p && (nl = strchr(p, '\n')) != NULL) {
        printf("#     %.*s\n", (int)(nl - p), p);
        p = nl + 1;
    }
}

static void run_scenario(const scenario *s)
{
    char before[8192], after[8192];
    ws_snapshot(before, sizeof before);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        a3s_sandbox *sb = open_sandbox();
        if (sb) {
            s->fn(sb);
            a3s_sandbox_free(sb);
        }
        fflush(stdout);
        _exit(bad ? 1 : 0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        ok(0, "%s: the host's call did not return (its 25 s watchdog fired)", s->name);
    else if (WIFSIGNALED(st))
        ok(0, "%s: the host survived (it was killed by signal %d, %s)", s->name, WTERMSIG(st),
           strsignal(WTERMSIG(st)));
    else
        ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "%s: the host survived (normal exit) and got the expected result", s->name);
    ok(scratch_left() == 0, "%s: no a3s-sandbox-* scratch dir left in the host's TMPDIR", s->name);
    ws_snapshot(after, sizeof after);
    ok(strcmp(before, after) == 0, "%s: the workspace is unchanged", s->name);
    if (strcmp(before, after)) {
        printf("#   before:\n");
        print_diag(before);
        printf("#   after:\n");
        print_diag(after);
    }
    ok(marked_procs() == 0, "%s: no process of the run is left", s->name);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : "";
    /* SIGPIPE at its default disposition and not blocked: it would kill this host. */
    signal(SIGPIPE, SIG_DFL);
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigprocmask(SIG_UNBLOCK, &pipe_set, NULL);

    const char *tmp_orig = getenv("TMPDIR") && getenv("TMPDIR")[0] == '/' ? getenv("TMPDIR") : "/tmp";
    snprintf(ws, sizeof ws, "%s/a3s-embed-ws-XXXXXX", tmp_orig);
    snprintf(tmp, sizeof tmp, "%s/a3s-embed-tmp-XXXXXX", tmp_orig);
    if (strlen(tmp_orig) > 200 || !mkdtemp(ws) || !mkdtemp(tmp)) {
        printf("Bail out! cannot make the temporary directories\n");
        return 1;
    }
    char path[300];
    snprintf(path, sizeof path, "%s/keep.txt", ws);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("workspace content\n", f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/sub", ws);
    mkdir(path, 0755);
    /* The library's scratch dirs go into this private TMPDIR. */
    setenv("TMPDIR", tmp, 1);
    snprintf(marker, sizeof marker, "a3s-embed-%ld-%ld", (long)getpid(), (long)time(NULL));

    int rc = 0;
    char cleanup[600];
    snprintf(cleanup, sizeof cleanup, "rm -rf '%s' '%s'", ws, tmp);
    {
        a3s_options o = {0};
        o.workspace = ws;
        a3s_error err = {0};
        a3s_sandbox *sb = a3s_sandbox_new(&o, &err);
        int usable = sb && a3s_sandbox_probe(sb, &err) == A3S_OK;
        a3s_sandbox_free(sb);
        if (!usable) {
            printf("SKIP: the sandbox boundary is unavailable here: %s\n", err.msg);
            rc = getenv("A3S_MUST_WORK") && !strcmp(getenv("A3S_MUST_WORK"), "1") ? 1 : 77;
            if (system(cleanup) != 0)
                rc = 1;
            return rc;
        }
    }

    static const scenario all[] = {
        {"stdin_data 1 MiB to true / head -c1", scen_stdin_data},
        {"session: stdin_data 1 MiB to true / head -c1, then closed", scen_session},
        {"stdin_fd regular file 1 MiB", scen_stdin_file},
        {"stdin_fd pipe holding 256 KiB, writer open", scen_stdin_pipe},
        {"stdin_fd socket fed 1 MiB", scen_stdin_socket},
        {"process-host: 4 MiB stdin_data to a reader that stops midway, 60 runs",
         scen_stdin_process_host},
        {"mirror: reader reads a line and goes away", scen_mirror_closed},
        {"mirror: reader gone before the run", scen_mirror_no_reader},
        {"mirror: normal run, 1 MiB stdin, both streams", scen_mirror_normal},
        {"threads: 4 at once, 15 runs each in a sandbox of its own", scen_threads},
    };
    static const scenario shared_fd[] = {
        {"mirror: one fd for both streams", scen_mirror_shared_fd},
    };
    static const scenario stalled[] = {
        {"mirror: a reader that does not read, output over budget", scen_mirror_stalled_reader},
    };
    const scenario *list = all;
    size_t n = sizeof all / sizeof *all;
    if (strcmp(only, "--shared-mirror-fd") == 0) {
        list = shared_fd;
        n = 1;
    } else if (strcmp(only, "--stalled-mirror-reader") == 0) {
        list = stalled;
        n = 1;
    } else if (*only) {
        printf("usage: embed_host [--shared-mirror-fd | --stalled-mirror-reader]\n");
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        run_scenario(&list[i]);

    if (system(cleanup) != 0)
        printf("# could not remove %s and %s\n", ws, tmp);
    printf("1..%d\n", n_tests);
    if (n_failed)
        printf("# %d of %d failed\n", n_failed, n_tests);
    return n_failed ? 1 : 0;
}
