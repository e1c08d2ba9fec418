/* a3s-sandbox: the command-line front end (SPEC §2). The only place that prints and
 * chooses exit codes; the command line is read in options.c. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "json.h"

static bool truthy(const char *v)
{
    if (!v)
        return false;
    while (isspace((unsigned char)*v))
        v++;
    size_t n = strlen(v);
    while (n > 0 && isspace((unsigned char)v[n - 1]))
        n--;
    const char *yes[] = {"1", "true", "yes", "on"};
    for (size_t i = 0; i < 4; i++)
        if (strlen(yes[i]) == n && strncasecmp(v, yes[i], n) == 0)
            return true;
    return false;
}

static int sig_pipe[2];
static volatile sig_atomic_t got_signal;

/* Returns false when the reader went away (EPIPE: SIGPIPE is ignored here). */
static bool write_out(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (got_signal)
            return false; /* a signal ends the wait for our reader (exit 128+N) */
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                /* Someone else made the shared file description non-blocking: wait for
                 * room (or a signal) instead of cutting the output short. */
                struct pollfd pf[2] = {{fd, POLLOUT, 0}, {sig_pipe[0], POLLIN, 0}};
                (void)poll(pf, sig_pipe[0] >= 0 ? 2 : 1, -1);
                continue;
            }
            return errno != EPIPE;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static int fail(const char *what, const a3s_error *err)
{
    fprintf(stderr, "a3s-sandbox: %s: %s\n", what, err->msg);
    json_error(a3s_json_status_name(err->code), "%s: %s", what, err->msg);
    return EXIT_REFUSED;
}

/* Signals that end the CLI end the sandboxed tree first (through the library's cancel
 * fd), so pins and the scratch dir are released instead of leaked. */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    got_signal = sig;
    (void)!write(sig_pipe[1], "s", 1);
    errno = saved;
}

static void install_signal_pipe(void)
{
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return; /* without it, the default actions apply (PDEATHSIG still kills the tree) */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        (void)sigaction(sigs[i], &sa, NULL);
}

static int exit_status(const a3s_result *r)
{
    if (r->timed_out)
        return EXIT_TIMEOUT;
    if (r->has_exit_code)
        return r->exit_code;
    if (r->has_signal)
        return 128 + r->signal;
    return EXIT_REFUSED;
}

int main(int argc, char **argv)
{
    /* A closed 0, 1 or 2 would be taken by the next fd we open (the signal pipe), and
     * then read as stdin or written as output: they become /dev/null first (remembered:
     * a closed output is not mirrored). */
    bool closed_std[3];
    for (int fd = 0; fd < 3; fd++) {
        closed_std[fd] = fcntl(fd, F_GETFD) < 0;
        if (closed_std[fd]) {
            int nfd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (nfd != fd)
                return EXIT_REFUSED; /* cannot happen: the lowest free fd is this one */
        }
    }
    cli c;
    memset(&c, 0, sizeof c);
    json_errors = cli_argv_wants_json(argc, argv);
    cli_parse(&c, argc, argv);
    /* A vanished reader of our stdout must not kill the supervisor mid-run. */
    signal(SIGPIPE, SIG_IGN);

    if (c.grant_digest && !c.ngrants) {
        fprintf(stderr, "a3s-sandbox: --grant-digest needs at least one --grant\n");
        json_error("usage", "--grant-digest needs at least one --grant");
        return EXIT_REFUSED;
    }

    a3s_error err;
    memset(&err, 0, sizeof err);
    a3s_options o = {
        .workspace = c.workspace,
        .policy = !strcmp(c.cmd, "check") ? c.check_policy : c.policy,
        .defer_policy = !strcmp(c.cmd, "run"), /* the run evaluates it once, fail-closed */
        .audit_path = c.audit,
        .allow_process_host = c.allow_process_host ||
                              truthy(getenv("A3S_SANDBOX_ALLOW_PROCESS_HOST")) ||
                              truthy(getenv("A3S_CODE_ALLOW_PROCESS_HOST_SANDBOX")),
        .allow_host_root = c.allow_host_root || truthy(getenv("A3S_SANDBOX_ALLOW_HOST_ROOT")),
    };
    a3s_sandbox *sb = a3s_sandbox_new(&o, &err);
    if (!sb) {
        if (!strcmp(c.cmd, "check")) {
            fprintf(stderr, "a3s-sandbox: check: %s\n", err.msg);
            return 1;
        }
        return fail("cannot create the sandbox", &err);
    }
    /* The grants as one set, checked against --grant-digest as a whole: the approval
     * covers the policy and exactly these grants (what `digest --grant ...` prints), so
     * one approval never runs another grant set. Anything else refuses; nothing runs. */
    if (c.ngrants &&
        a3s_sandbox_grant_set(sb, c.grants, c.ngrants, c.grant_digest, NULL, &err) != A3S_OK) {
        fprintf(stderr, "a3s-sandbox: --grant: %s\n", err.msg);
        json_error(a3s_json_status_name(err.code), "--grant: %s", err.msg);
        a3s_sandbox_free(sb);
        free(c.env);
        free(c.grants);
        return EXIT_REFUSED;
    }
    if (a3s_sandbox_fallback_reason(sb))
        fprintf(stderr,
                "a3s-sandbox: warning: NO LOCAL SANDBOX BOUNDARY IS IN FORCE: running on the "
                "host (process-host backend) because the native boundary is unusable: %s\n",
                a3s_sandbox_fallback_reason(sb));

    int rc = 0;
    if (!strcmp(c.cmd, "probe")) {
        if (a3s_sandbox_probe(sb, &err) != A3S_OK)
            rc = fail("probe", &err);
        else
            printf("ok backend=%s\n", a3s_sandbox_backend(sb));
    } else if (!strcmp(c.cmd, "digest")) {
        char d[65];
        if (a3s_sandbox_digest(sb, d, &err) != A3S_OK)
            rc = fail("digest", &err);
        else
            printf("%s\n", d);
    } else if (!strcmp(c.cmd, "plan") || !strcmp(c.cmd, "capabilities")) {
        char *s = !strcmp(c.cmd, "plan") ? (c.explain ? a3s_sandbox_plan_explain(sb, &err)
                                                      : a3s_sandbox_plan_json(sb, &err))
                                         : a3s_sandbox_capabilities_json(sb, &err);
        if (!s)
            rc = fail(c.cmd, &err);
        else
            printf("%s\n", s);
        free(s);
    } else if (!strcmp(c.cmd, "check")) {
        char d[65];
        if (a3s_sandbox_digest(sb, d, &err) != A3S_OK) {
            fprintf(stderr, "a3s-sandbox: check: %s\n", err.msg);
            rc = 1;
        } else {
            printf("ok: policy %s is valid (digest %s)\n", a3s_sandbox_policy_name(sb), d);
        }
    } else {
        a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
        req.argv = (const char *const *)c.argv;
        req.shell_command = c.shell_command;
        req.timeout_ms = c.has_timeout ? (int64_t)ceil(c.timeout_s * 1000.0) : -1;
        req.env = c.env;
        /* Forward our stdin when we have one; a closed fd 0 becomes /dev/null. */
        req.stdin_fd = closed_std[0] ? -1 : 0;
        /* The library prints the output live, never blocking past the deadline; when our
         * reader goes away (yes | head -1) it kills the tree: exit 141, like a shell. */
        if (!c.json) {
            req.mirror = true;
            req.mirror_fd[0] = closed_std[1] ? -1 : 1;
            req.mirror_fd[1] = closed_std[2] ? -1 : 2;
        }
        install_signal_pipe();
        req.cancel_fd = sig_pipe[0];
        a3s_result r;
        if (a3s_sandbox_exec(sb, &req, &r, &err) != A3S_OK) {
            if (got_signal) {
                fprintf(stderr, "a3s-sandbox: interrupted by %s; the process tree was killed\n",
                        strsignal(got_signal));
                json_error(a3s_json_status_name(A3S_ERR_ABORTED),
                           "interrupted by %s; the process tree was killed",
                           strsignal(got_signal));
                rc = 128 + got_signal;
            } else {
                rc = fail("run", &err);
            }
        } else {
            if (r.identity && !strcmp(r.identity, "host-root") &&
                !strcmp(a3s_sandbox_backend(sb), "process-host"))
                fprintf(stderr, "a3s-sandbox: warning: THE COMMAND RAN AS HOST ROOT, "
                                "UNCONFINED (the process-host fallback runs it as the "
                                "caller)\n");
            else if (r.identity && !strcmp(r.identity, "host-root"))
                fprintf(stderr, "a3s-sandbox: warning: THE COMMAND RAN AS HOST ROOT (uid 0, no "
                                "capabilities): the unprivileged mapped id was not available "
                                "here and --allow-host-root was given\n");
            bool closed = r.output_closed;
            if (c.json) {
                char *s = a3s_result_json(&r);
                if (s) {
                    closed = !write_out(1, s, strlen(s)) || !write_out(1, "\n", 1) || closed;
                    free(s);
                } else {
                    /* The command ran (its status stands) but has no object: say so. */
                    fprintf(stderr, "a3s-sandbox: run: cannot encode the result: out of memory\n");
                    json_error("internal", "run: cannot encode the result: out of memory");
                }
            } else if (r.timed_out && !closed) {
                fprintf(stderr, "a3s-sandbox: command timed out; the process tree was killed\n");
            }
            rc = closed ? EXIT_OUTPUT_CLOSED : exit_status(&r);
            if (got_signal) /* it came while the rest of the output was being written */
                rc = 128 + got_signal;
            a3s_result_free(&r);
        }
    }
    a3s_sandbox_free(sb);
    free(c.env);
    free(c.grants);
    fflush(stdout);
    return rc;
}
