/* Unit tests of backends/linux/exec.c on plain host processes (no sandbox): exit status, stream
 * identity, stdin, fd hygiene, rlimits, the deadline and the kill of the whole tree, and
 * which caller stdin fds the command may hold
 * (only a read-only pipe; a terminal, socket, file or writable fd is forwarded), and what
 * is read from bwrap's --json-status-fd lines. */
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "exec.h"
#include "tap.h"
#include "util.h"

static char dir[] = "/tmp/a3s-test-exec-XXXXXX";
static char *const empty_env[] = {(char *)"PATH=/usr/bin:/bin", NULL};

typedef struct run {
    a3s_outcome o;
    char *out, *err;
    int rc;
} run;

static void sh(run *r, const char *script, int64_t timeout_ms, const char *stdin_data)
{
    char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)script, NULL};
    a3s_launch l = {
        .path = "/bin/sh", .argv = argv, .envp = empty_env, .cwd = dir,
        .stdin_fd = -1, .stdin_data = stdin_data, .stdin_len = stdin_data ? strlen(stdin_data) : 0,
        .started_fd = -1, .status_fd = -1, .timeout_ms = timeout_ms, .output_budget = 102400,
        .nofile = 256, .core_bytes = 0, .cancel_fd = -1,
    };
    a3s_error err = {0};
    r->rc = a3s_exec_run(&l, &r->o, &err);
    r->out = r->err = NULL;
    if (r->rc == 0) {
        size_t n;
        a3s_capture_render(r->o.cap, 1, &r->out, &n, NULL, NULL);
        a3s_capture_render(r->o.cap, 2, &r->err, &n, NULL, NULL);
    } else {
        printf("# exec error: %s\n", err.msg);
    }
}

/* Like sh(), with the caller's fd as stdin. */
static void sh_fd(run *r, const char *script, int stdin_fd)
{
    char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)script, NULL};
    a3s_launch l = {
        .path = "/bin/sh", .argv = argv, .envp = empty_env, .cwd = dir, .stdin_fd = stdin_fd,
        .started_fd = -1, .status_fd = -1, .timeout_ms = 10000, .output_budget = 102400,
        .nofile = 256, .core_bytes = 0, .cancel_fd = -1,
    };
    a3s_error err = {0};
    r->rc = a3s_exec_run(&l, &r->o, &err);
    r->out = r->err = NULL;
    if (r->rc == 0) {
        size_t n;
        a3s_capture_render(r->o.cap, 1, &r->out, &n, NULL, NULL);
        a3s_capture_render(r->o.cap, 2, &r->err, &n, NULL, NULL);
    } else {
        printf("# exec error: %s\n", err.msg);
    }
}

static void run_free(run *r)
{
    a3s_capture_free(r->o.cap);
    free(r->out);
    free(r->err);
}

static bool exists_in_dir(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Timing checks must hold on a loaded machine, so none is an absolute figure: a bound is
 * what the check allows (its deadline) + 5x a plain run measured just before (it slows
 * down with the machine) + 2 s of slack. Each timed command would run on for 20 s if
 * what the check protects were broken (no kill at the deadline, abort or cancel), far
 * above any such bound: the check still fails then. scripts/bench.sh has the figures. */
static unsigned long long bound_ms(unsigned long long allowed)
{
    run p;
    unsigned long long t0 = a3s_now_ms();
    sh(&p, "exit 0", 5000, NULL);
    unsigned long long plain = a3s_now_ms() - t0;
    run_free(&p);
    return allowed + 5 * plain + 2000;
}

/* A writer process: after delay_ms, writes s to fd (the pty master), then exits. */
static pid_t write_later(int fd, int delay_ms, const char *s)
{
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(delay_ms);
        _exit(write(fd, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : 1);
    }
    return pid;
}

static bool sigpipe_pending(void)
{
    sigset_t p;
    return sigpending(&p) == 0 && sigismember(&p, SIGPIPE) == 1;
}

static int abort_after_first(void *ud, int stream, const char *d, size_t n, size_t h)
{
    (void)stream, (void)d, (void)n, (void)h;
    int *calls = ud;
    (*calls)++;
    return 1;
}

/* ---- bwrap's --json-status-fd: one JSON object a line, played by a script on fd 4 ---- */

typedef struct pid_log {
    pid_t v[16];
    size_t n;
} pid_log;

static void log_pid(void *ud, pid_t pid)
{
    pid_log *p = ud;
    if (p->n < sizeof p->v / sizeof p->v[0])
        p->v[p->n++] = pid;
}

static bool logged(const pid_log *p, pid_t pid)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i] == pid)
            return true;
    return false;
}

/* Run script with the write end of a status pipe on fd 4 and its read end as status_fd;
 * every pid given to on_pid goes to seen (the forked shell's first). */
static int status_run(const char *script, a3s_outcome *o, pid_log *seen)
{
    int sp[2];
    if (pipe2(sp, O_CLOEXEC) < 0)
        return -1;
    char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)script, NULL};
    a3s_launch l = {.path = "/bin/sh", .argv = argv, .envp = empty_env, .cwd = dir,
                    .stdin_fd = -1, .started_fd = -1, .status_fd = sp[0], .timeout_ms = 10000,
                    .output_budget = 1024, .nofile = -1, .core_bytes = -1, .cancel_fd = -1,
                    .on_pid = log_pid, .pid_ud = seen};
    l.keep[0] = (a3s_fdmap){sp[1], 4, false};
    l.nkeep = 1;
    memset(seen, 0, sizeof *seen);
    a3s_error err = {0};
    int rc = a3s_exec_run(&l, o, &err);
    if (rc < 0)
        printf("# exec error: %s\n", err.msg);
    close(sp[0]);
    return rc;
}

static void status_tests(void)
{
    a3s_outcome o;
    pid_log seen;

    /* A line split across reads (the writer pauses inside it) is parsed once complete. */
    int rc = status_run("printf '{ \"child-' >&4; sleep 0.3;"
                        " printf 'pid\": 4242, \"mnt-namespace\": 4026531841 }\\n{ \"exit-' >&4;"
                        " sleep 0.3; printf 'code\": 7 }\\n' >&4",
                        &o, &seen);
    ok(rc == 0 && o.ns_started && logged(&seen, 4242) && seen.n == 2,
       "status: a line split across reads gives the child pid once");
    ok(rc == 0 && o.reported_exit == 7, "status: split exit-code line read (got %d)",
       o.reported_exit);
    a3s_capture_free(o.cap);

    /* Unknown keys (bwrap's namespace ids, anything newer) are ignored. */
    rc = status_run("printf '{\"frob\": [1, {\"x\": null}], \"child-pid\": 4243,"
                    " \"pid-namespace\": 4026531836}\\n{\"unknown\": 5}\\n' >&4",
                    &o, &seen);
    ok(rc == 0 && o.ns_started && logged(&seen, 4243) && seen.n == 2 && o.reported_exit == -1,
       "status: unknown keys and lines ignored, the child pid still read");
    a3s_capture_free(o.cap);

    /* A child-pid that is not a positive integer (a pid_t) is no child pid: 42.5, a
     * string, a negative number, 2^32 + 4245 (a cut to int would make that 4245). */
    rc = status_run("printf '{\"child-pid\": 42.5}\\n{\"child-pid\": \"4244\"}\\n"
                    "{\"child-pid\": -1}\\n{\"child-pid\": 4294971541}\\n"
                    "{\"exit-code\": \"3\"}\\n' >&4",
                    &o, &seen);
    ok(rc == 0 && !o.ns_started && seen.n == 1 && !logged(&seen, 42) &&
           !logged(&seen, 4244) && !logged(&seen, 4245),
       "status: a non-integer child-pid is not a child pid (%zu pids)", seen.n);
    ok(rc == 0 && o.reported_exit == -1, "status: a non-integer exit-code is ignored (got %d)",
       o.reported_exit);
    a3s_capture_free(o.cap);

    /* "child-pid" inside another member's value, or in a nested object, is not the member. */
    rc = status_run("printf '{\"message\": \"child-pid\", \"pid\": 4245}\\n"
                    "{\"info\": {\"child-pid\": 4246}}\\n"
                    "{\"note\": \"exit-code\", \"code\": 9}\\n' >&4",
                    &o, &seen);
    ok(rc == 0 && !o.ns_started && seen.n == 1 && !logged(&seen, 4245) && !logged(&seen, 4246),
       "status: \"child-pid\" in another member's value is not the child pid");
    ok(rc == 0 && o.reported_exit == -1, "status: nor is \"exit-code\" (got %d)", o.reported_exit);
    a3s_capture_free(o.cap);

    /* Unparsable lines are ignored; the next good line still counts. */
    rc = status_run("printf '{\"child-pid\": 4247\\ngarbage \"child-pid\": 4248\\n\\n"
                    "{\"child-pid\": 4249} trailing\\n{\"child-pid\": 4250}\\n' >&4",
                    &o, &seen);
    ok(rc == 0 && o.ns_started && seen.n == 2 && logged(&seen, 4250),
       "status: unparsable lines ignored, the next good one read (%zu pids)", seen.n);
    a3s_capture_free(o.cap);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    run r;

    sh(&r, "printf stdout; printf stderr >&2; exit 17", 5000, NULL);
    ok(r.rc == 0, "spawned");
    ok(WIFEXITED(r.o.wait_status) && WEXITSTATUS(r.o.wait_status) == 17, "exit code 17 kept");
    ok_streq(r.out, "stdout", "stdout identity");
    ok_streq(r.err, "stderr", "stderr identity");
    ok(!r.o.timed_out, "not timed out");
    run_free(&r);

    sh(&r, "kill -TERM $$", 5000, NULL);
    ok(WIFSIGNALED(r.o.wait_status) && WTERMSIG(r.o.wait_status) == 15, "death by signal reported");
    run_free(&r);

    sh(&r, "cat", 5000, "hello from stdin");
    ok_streq(r.out, "hello from stdin", "stdin data is fed");
    run_free(&r);

    sh(&r, "cat", 5000, NULL);
    ok_streq(r.out, "", "no stdin data means /dev/null");
    run_free(&r);

    /* Only 0, 1, 2 are open in the child (ls itself opens one for the directory). */
    sh(&r, "ls /proc/self/fd | wc -l", 5000, NULL);
    ok(r.out && atoi(r.out) == 4, "child sees only fds 0-2 (got %s)", r.out ? r.out : "?");
    run_free(&r);

    sh(&r, "ulimit -c; ulimit -n", 5000, NULL);
    ok_streq(r.out, "0\n256\n", "core and nofile rlimits applied");
    run_free(&r);

    sh(&r, "echo \"$PATH|$HOME\"", 5000, NULL);
    ok_streq(r.out, "/usr/bin:/bin|\n", "environment is exactly envp");
    run_free(&r);

    /* Deadline: the background job must die with the tree. */
    unsigned long long bound = bound_ms(50);
    unsigned long long t0 = a3s_now_ms();
    sh(&r, "(sleep 0.30; touch timeout-leak) & sleep 20", 50, NULL);
    unsigned long long took = a3s_now_ms() - t0;
    ok(r.o.timed_out, "deadline reported");
    ok(took < bound, "returned soon after the deadline (%llu ms < %llu ms)", took, bound);
    run_free(&r);
    sleep_ms(450);
    ok(!exists_in_dir("timeout-leak"), "timed-out descendant never ran on");

    /* The deadline also covers the wait after both streams closed. */
    bound = bound_ms(50);
    t0 = a3s_now_ms();
    sh(&r, "exec 1>&- 2>&-; sleep 0.30; touch closed-leak; sleep 20", 50, NULL);
    took = a3s_now_ms() - t0;
    ok(r.o.timed_out && took < bound,
       "deadline covers wait after streams close (%llu ms < %llu ms)", took, bound);
    run_free(&r);
    sleep_ms(400);
    ok(!exists_in_dir("closed-leak"), "no leak after closed streams");

    /* A normal exit leaves no detached descendant of the group behind. The root waits for
     * the descendant to start (a fixed sleep could end first on a loaded machine). */
    sh(&r, "(touch descendant-started; exec 1>&- 2>&-; sleep 0.80; touch normal-exit-leak) & "
           "until [ -e descendant-started ]; do sleep 0.01; done; exit 0", 5000, NULL);
    ok(WIFEXITED(r.o.wait_status) && WEXITSTATUS(r.o.wait_status) == 0 && !r.o.timed_out,
       "root exits 0");
    run_free(&r);
    sleep_ms(1000);
    ok(exists_in_dir("descendant-started"), "descendant had started");
    ok(!exists_in_dir("normal-exit-leak"), "descendant killed after the root exited");

    /* An observer that asks to stop kills the tree. */
    int calls = 0;
    char *argv[] = {(char *)"/bin/sh", (char *)"-c",
                    (char *)"echo first; sleep 0.5; touch observer-leak; sleep 20", NULL};
    a3s_launch l = {.path = "/bin/sh", .argv = argv, .envp = empty_env, .cwd = dir,
                    .stdin_fd = -1, .started_fd = -1, .status_fd = -1, .timeout_ms = 60000,
                    .output_budget = 1024, .nofile = -1, .core_bytes = -1,
                    .on_output = abort_after_first, .output_ud = &calls,
                    .cancel_fd = -1};
    a3s_error err = {0};
    bound = bound_ms(0);
    t0 = a3s_now_ms();
    int rc = a3s_exec_run(&l, &r.o, &err);
    took = a3s_now_ms() - t0;
    ok(rc == 0 && r.o.aborted && calls == 1, "observer abort honoured");
    ok(took < bound, "abort is immediate (%llu ms < %llu ms)", took, bound);
    a3s_capture_free(r.o.cap);
    sleep_ms(700);
    ok(!exists_in_dir("observer-leak"), "aborted tree never ran on");

    /* A program that cannot be executed: nothing ran, clear error. */
    char *bad[] = {(char *)"/nonexistent/prog", NULL};
    a3s_launch lb = {.path = "/nonexistent/prog", .argv = bad, .envp = empty_env,
                     .stdin_fd = -1, .started_fd = -1, .status_fd = -1, .timeout_ms = 1000,
                     .output_budget = 1024, .nofile = -1, .core_bytes = -1,
                     .cancel_fd = -1};
    rc = a3s_exec_run(&lb, &r.o, &err);
    ok(rc < 0 && err.code == A3S_ERR_SETUP && strstr(err.msg, "/nonexistent/prog"),
       "exec failure is an error: %s", err.msg);

    /* Keep fds arrive at their target numbers with CLOEXEC cleared, and are consumed. */
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return 1;
    char *kargv[] = {(char *)"/bin/sh", (char *)"-c", (char *)"echo via-fd-7 >&7", NULL};
    a3s_launch lk = {.path = "/bin/sh", .argv = kargv, .envp = empty_env, .stdin_fd = -1,
                     .started_fd = -1, .status_fd = -1, .timeout_ms = 5000,
                     .output_budget = 1024, .nofile = -1, .core_bytes = -1,
                     .cancel_fd = -1};
    lk.keep[0] = (a3s_fdmap){p[1], 7, false};
    lk.nkeep = 1;
    rc = a3s_exec_run(&lk, &r.o, &err);
    char buf[64] = {0};
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    ok(rc == 0 && n > 0 && strcmp(buf, "via-fd-7\n") == 0, "keep fd mapped to 7");
    ok(fcntl(p[1], F_GETFD) < 0 && errno == EBADF, "keep fd consumed by a3s_exec_run");
    close(p[0]);
    a3s_capture_free(r.o.cap);

    /* A readable cancel fd kills the tree at once (the CLI's signal self-pipe). */
    int cp[2];
    if (pipe2(cp, O_CLOEXEC) < 0)
        return 1;
    char *cargv[] = {(char *)"/bin/sh", (char *)"-c",
                     (char *)"sleep 0.5; touch cancel-leak; sleep 20", NULL};
    a3s_launch lc = {.path = "/bin/sh", .argv = cargv, .envp = empty_env, .cwd = dir,
                     .stdin_fd = -1, .started_fd = -1, .status_fd = -1, .timeout_ms = 60000,
                     .output_budget = 1024, .nofile = -1, .core_bytes = -1,
                     .cancel_fd = cp[0]};
    if (write(cp[1], "x", 1) != 1)
        return 1;
    bound = bound_ms(0);
    t0 = a3s_now_ms();
    rc = a3s_exec_run(&lc, &r.o, &err);
    took = a3s_now_ms() - t0;
    ok(rc == 0 && r.o.aborted && !r.o.timed_out, "cancel fd aborts the run");
    ok(took < bound, "cancel is immediate (%llu ms < %llu ms)", took, bound);
    a3s_capture_free(r.o.cap);
    close(cp[0]);
    close(cp[1]);
    sleep_ms(700);
    ok(!exists_in_dir("cancel-leak"), "cancelled tree never ran on");

    /* ---- stdin: the command never holds the caller's terminal, socket, file ---------- */
    /* A terminal: the command sees a pipe, what is typed arrives, ^D is its EOF, and the
     * caller's terminal (settings, status flags) is left as it was. */
    int master = -1, slave = -1;
    if (openpty(&master, &slave, NULL, NULL, NULL) < 0) {
        perror("openpty");
        return 1;
    }
    struct termios tio_before, tio_after;
    int fl_before = fcntl(slave, F_GETFL);
    if (tcgetattr(slave, &tio_before) < 0 || write(master, "hello\n", 6) != 6)
        return 1;
    pid_t w1 = write_later(master, 300, "world\n");
    pid_t w2 = write_later(master, 600, "\x04");
    sh_fd(&r,
          "if [ -t 0 ]; then echo tty; fi; if [ -p /dev/stdin ]; then echo fifo; fi; "
          "if stty 2>/dev/null; then echo stty-works; fi; echo x >&0 || echo no-write; cat",
          slave);
    (void)waitpid(w1, NULL, 0);
    (void)waitpid(w2, NULL, 0);
    ok(r.rc == 0 && !r.o.timed_out, "tty stdin: ran, EOF (^D) ended cat before the deadline");
    ok_streq(r.out, "fifo\nno-write\nhello\nworld\n",
             "tty stdin: the command gets a pipe, and the typed lines through it");
    ok(tcgetattr(slave, &tio_after) == 0 && memcmp(&tio_before, &tio_after, sizeof tio_before) == 0,
       "tty stdin: terminal settings unchanged");
    ok(fcntl(slave, F_GETFL) == fl_before, "tty stdin: the terminal's status flags unchanged");
    run_free(&r);

    /* Even when the caller has a controlling terminal, the tree does not: it runs in a
     * session of its own, so /dev/tty cannot be opened (in a child that makes the pty
     * its controlling terminal first). */
    pid_t ct = fork();
    if (ct == 0) {
        if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
            _exit(2);
        /* Field 6 of /proc/PID/stat is the session id ("sh" has no space in it). */
        sh_fd(&r,
              "if (exec </dev/tty) 2>/dev/null; then echo ctty; else echo none; fi; "
              "cut -d' ' -f6 /proc/$$/stat",
              slave);
        bool no_ctty = r.rc == 0 && r.out && strncmp(r.out, "none\n", 5) == 0;
        bool own_session = no_ctty && atoi(r.out + 5) > 0 && atoi(r.out + 5) != (int)getpid();
        _exit(no_ctty && own_session ? 0 : 1);
    }
    int cst = -1;
    ok(ct > 0 && waitpid(ct, &cst, 0) == ct && WIFEXITED(cst) && WEXITSTATUS(cst) == 0,
       "tty stdin: the command has no controlling terminal, in a session of its own");

    /* The same for input that comes before the command reads: it waits in the pipe. */
    if (write(master, "early\n\x04", 7) != 7)
        return 1;
    sh_fd(&r, "sleep 0.2; cat", slave);
    ok_streq(r.out, "early\n", "tty stdin: input typed ahead is forwarded");
    run_free(&r);
    close(master);
    close(slave);

    /* A socket: readable through the pipe, but nothing written to fd 0 reaches the peer. */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return 1;
    if (write(sv[0], "via-socket", 10) != 10 || shutdown(sv[0], SHUT_WR) < 0)
        return 1;
    sh_fd(&r,
          "echo leak >&0 2>/dev/null || echo no-write; if [ -S /dev/stdin ]; then echo sock; "
          "fi; cat",
          sv[1]);
    char sbuf[64];
    ssize_t got = recv(sv[0], sbuf, sizeof sbuf, MSG_DONTWAIT);
    ok_streq(r.out, "no-write\nvia-socket", "socket stdin: forwarded, not writable, not a socket");
    ok(got < 0 && errno == EAGAIN, "socket stdin: nothing came back to the peer");
    run_free(&r);
    close(sv[0]);
    close(sv[1]);

    /* A regular file opened read-only: forwarded (a reopen of /proc/self/fd/0 could write
     * the file otherwise), and the caller's offset does not move. */
    char fpath[256];
    snprintf(fpath, sizeof fpath, "%s/stdin.txt", dir);
    int wf = open(fpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (wf < 0 || write(wf, "skip|file-data\n", 15) != 15)
        return 1;
    close(wf);
    int rf = open(fpath, O_RDONLY | O_CLOEXEC);
    if (rf < 0 || lseek(rf, 5, SEEK_SET) != 5)
        return 1;
    sh_fd(&r, "if [ -p /dev/stdin ]; then echo fifo; fi; cat; echo pwned >/proc/self/fd/0", rf);
    char fbuf[64] = {0};
    ssize_t fn = pread(rf, fbuf, sizeof fbuf - 1, 0);
    ok_streq(r.out, "fifo\nfile-data\n", "file stdin: read from the caller's offset, as a pipe");
    ok(fn == 15 && strcmp(fbuf, "skip|file-data\n") == 0, "file stdin: the file is unchanged");
    ok(lseek(rf, 0, SEEK_CUR) == 5, "file stdin: the caller's offset did not move");
    run_free(&r);
    close(rf);

    /* A read-only pipe is the one fd the command may hold itself. */
    int ip[2];
    if (pipe2(ip, O_CLOEXEC) < 0 || write(ip[1], "piped", 5) != 5)
        return 1;
    close(ip[1]);
    struct stat pst;
    if (fstat(ip[0], &pst) < 0)
        return 1;
    char want[64];
    snprintf(want, sizeof want, "%lu\npiped", (unsigned long)pst.st_ino);
    sh_fd(&r, "stat -L -c %i /dev/stdin; cat", ip[0]);
    ok_streq(r.out, want, "pipe stdin: passed directly (same pipe inode)");
    run_free(&r);
    close(ip[0]);

    /* A pipe's write end as stdin is open for writing: never handed over. */
    if (pipe2(ip, O_CLOEXEC) < 0)
        return 1;
    sh_fd(&r, "echo leak >&0 2>/dev/null || echo no-write; cat", ip[1]);
    close(ip[1]);
    char pbuf[16];
    ssize_t pn = read(ip[0], pbuf, sizeof pbuf);
    ok_streq(r.out, "no-write\n", "write-end stdin: not writable inside, reads as empty");
    ok(!r.o.timed_out, "write-end stdin: EOF at once, not at the deadline");
    ok(pn == 0, "write-end stdin: nothing reached the caller's pipe");
    run_free(&r);
    close(ip[0]);

    /* /dev/null opened read-write becomes a fresh read-only /dev/null. */
    int nf = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nf < 0)
        return 1;
    sh_fd(&r,
          "echo x >&0 2>/dev/null || echo no-write; if [ -c /dev/stdin ]; then echo chr; fi; "
          "cat",
          nf);
    ok_streq(r.out, "no-write\nchr\n", "/dev/null stdin: a read-only /dev/null");
    run_free(&r);
    close(nf);

    /* A command that closes its stdin early: no SIGPIPE in the host process (default
     * disposition here, so a raised SIGPIPE would kill this test), none left pending. */
    struct sigaction dfl = {.sa_handler = SIG_DFL}, old_pipe;
    sigemptyset(&dfl.sa_mask);
    if (sigaction(SIGPIPE, &dfl, &old_pipe) < 0)
        return 1;
    size_t big_len = 4u << 20;
    char *big = malloc(big_len + 1);
    if (!big)
        return 1;
    memset(big, 'z', big_len);
    big[big_len] = '\0';
    sh(&r, "exec 0<&-; sleep 0.2; echo closed", 10000, big);
    ok_streq(r.out, "closed\n", "stdin_data: a command closing stdin early gets no more");
    ok(!sigpipe_pending(), "stdin_data: no SIGPIPE raised or left pending");
    run_free(&r);
    int bf = open(fpath, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (bf < 0 || a3s_write_all(bf, big, big_len) < 0)
        return 1;
    close(bf);
    bf = open(fpath, O_RDONLY | O_CLOEXEC);
    if (bf < 0)
        return 1;
    sh_fd(&r, "head -c 10; exec 0<&-; sleep 0.2; echo closed", bf);
    ok_streq(r.out, "zzzzzzzzzzclosed\n", "forwarded stdin: stops when the command closes it");
    ok(!sigpipe_pending(), "forwarded stdin: no SIGPIPE raised or left pending");
    run_free(&r);
    close(bf);
    free(big);
    (void)sigaction(SIGPIPE, &old_pipe, NULL);

    status_tests();

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("# cleanup failed\n");
    return tap_done();
}
