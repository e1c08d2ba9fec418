/* Unit tests of engine/exec.c on plain host processes (no sandbox): exit status, stream
 * identity, stdin, fd hygiene, rlimits, the deadline and the kill of the whole tree
 * (reference §6.12 process.rs tests). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static int abort_after_first(void *ud, int stream, const char *d, size_t n, size_t h)
{
    (void)stream, (void)d, (void)n, (void)h;
    int *calls = ud;
    (*calls)++;
    return 1;
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

    /* Deadline: the background job must die with the tree (§6.12). */
    unsigned long long t0 = a3s_now_ms();
    sh(&r, "(sleep 0.30; touch timeout-leak) & wait", 50, NULL);
    unsigned long long took = a3s_now_ms() - t0;
    ok(r.o.timed_out, "deadline reported");
    ok(took < 400, "returned soon after the deadline (%llu ms)", took);
    run_free(&r);
    sleep_ms(450);
    ok(!exists_in_dir("timeout-leak"), "timed-out descendant never ran on");

    /* The deadline also covers the wait after both streams closed. */
    t0 = a3s_now_ms();
    sh(&r, "exec 1>&- 2>&-; sleep 0.30; touch closed-leak", 50, NULL);
    took = a3s_now_ms() - t0;
    ok(r.o.timed_out && took < 250, "deadline covers wait after streams close (%llu ms)", took);
    run_free(&r);
    sleep_ms(400);
    ok(!exists_in_dir("closed-leak"), "no leak after closed streams");

    /* A normal exit leaves no detached descendant of the group behind. */
    sh(&r, "(touch descendant-started; exec 1>&- 2>&-; sleep 0.80; touch normal-exit-leak) & "
           "sleep 0.1; exit 0", 5000, NULL);
    ok(WIFEXITED(r.o.wait_status) && WEXITSTATUS(r.o.wait_status) == 0 && !r.o.timed_out,
       "root exits 0");
    run_free(&r);
    sleep_ms(1000);
    ok(exists_in_dir("descendant-started"), "descendant had started");
    ok(!exists_in_dir("normal-exit-leak"), "descendant killed after the root exited");

    /* An observer that asks to stop kills the tree. */
    int calls = 0;
    char *argv[] = {(char *)"/bin/sh", (char *)"-c",
                    (char *)"echo first; sleep 0.5; touch observer-leak", NULL};
    a3s_launch l = {.path = "/bin/sh", .argv = argv, .envp = empty_env, .cwd = dir,
                    .stdin_fd = -1, .started_fd = -1, .status_fd = -1, .timeout_ms = 5000,
                    .output_budget = 1024, .nofile = -1, .core_bytes = -1,
                    .on_output = abort_after_first, .output_ud = &calls,
                    .cancel_fd = -1};
    a3s_error err = {0};
    t0 = a3s_now_ms();
    int rc = a3s_exec_run(&l, &r.o, &err);
    took = a3s_now_ms() - t0;
    ok(rc == 0 && r.o.aborted && calls == 1, "observer abort honoured");
    ok(took < 400, "abort is immediate (%llu ms)", took);
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
    lk.keep[0] = (a3s_fdmap){p[1], 7};
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
                     (char *)"sleep 0.5; touch cancel-leak", NULL};
    a3s_launch lc = {.path = "/bin/sh", .argv = cargv, .envp = empty_env, .cwd = dir,
                     .stdin_fd = -1, .started_fd = -1, .status_fd = -1, .timeout_ms = 5000,
                     .output_budget = 1024, .nofile = -1, .core_bytes = -1,
                     .cancel_fd = cp[0]};
    if (write(cp[1], "x", 1) != 1)
        return 1;
    t0 = a3s_now_ms();
    rc = a3s_exec_run(&lc, &r.o, &err);
    took = a3s_now_ms() - t0;
    ok(rc == 0 && r.o.aborted && !r.o.timed_out, "cancel fd aborts the run");
    ok(took < 400, "cancel is immediate (%llu ms)", took);
    a3s_capture_free(r.o.cap);
    close(cp[0]);
    close(cp[1]);
    sleep_ms(700);
    ok(!exists_in_dir("cancel-leak"), "cancelled tree never ran on");

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("# cleanup failed\n");
    return tap_done();
}
