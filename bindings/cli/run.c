/* a3s-sandbox: running one command and reporting it as the CLI does (output, --json,
 * exit status, messages), fresh or in a session (session.c); and the messages the other
 * subcommands share. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "json.h"
#include "sandbox.h"
#include "tty.h"

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_signal, abandoned;

void cli_run_abandon_output(void)
{
    abandoned = 1;
}

/* Returns false when the reader went away (EPIPE: SIGPIPE is ignored here). */
static bool write_out(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (got_signal || abandoned)
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

/* -v: what was resolved, on stderr only (stdout is the command's output or the JSON).
 * Names, paths, digests and numbers: never a value of the environment or of -e. */
bool verbose;

void say(const char *fmt, ...)
{
    if (!verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("a3s-sandbox: verbose: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A refusal, and with -v the stage it came from: the step of the CLI, and for a run the
 * library's error class, which says which part of the run refused. */
int fail_at(const char *stage, const char *what, const a3s_error *err)
{
    int rc = fail(what, err);
    if (!strcmp(stage, "run"))
        stage = err->code == A3S_ERR_INVALID  ? "run: checking the request"
                : err->code == A3S_ERR_POLICY ? "run: evaluating and validating the policy"
                : err->code == A3S_ERR_SETUP  ? "run: setting up the sandbox"
                                              : "run";
    say("refused at stage '%s' (error class %s)", stage, a3s_json_status_name(err->code));
    return rc;
}

/* Seconds as the operator writes them: "120", "0.3", "1.25". */
static const char *secs(int64_t ms, char buf[32])
{
    if (ms % 1000 == 0) {
        snprintf(buf, 32, "%lld", (long long)(ms / 1000));
    } else {
        snprintf(buf, 32, "%.3f", (double)ms / 1000.0);
        char *e = buf + strlen(buf);
        while (e[-1] == '0')
            *--e = '\0';
    }
    return buf;
}

/* -v: the policy, its file and digest, the backend (and why the fallback), the
 * workspace. A failing digest is said and left to the step that refuses. */
void describe(a3s_sandbox *sb, const cli *c)
{
    if (!verbose)
        return;
    say("policy %s (%s)", a3s_sandbox_policy_name(sb), a3s_sandbox_policy_file(sb));
    char d[65];
    a3s_error e = {0};
    if (a3s_sandbox_digest(sb, d, &e) != A3S_OK)
        say("digest unavailable: %s", e.msg);
    else if (c->ngrants)
        say("approval digest %s (the policy with its %zu grant(s))", d, c->ngrants);
    else
        say("policy digest %s", d);
    const char *why = a3s_sandbox_fallback_reason(sb);
    say("backend %s%s%s%s", a3s_sandbox_backend(sb), why ? " (fallback, because: " : "",
        why ? why : "", why ? ")" : "");
    say("workspace %s", a3s_sandbox_workspace(sb));
}

/* The deadline a run gets is the smaller of -t and the policy's ceiling: -v says which,
 * and a -t above the ceiling gets a note whether or not -v is given (it is capped). */
static void timeout_note(a3s_sandbox *sb, const cli *c, int64_t req_ms)
{
    if (!c->has_timeout && !verbose)
        return;
    int64_t ceiling;
    a3s_error e = {0};
    char b1[32], b2[32];
    if (a3s_sandbox_timeout_ceiling(sb, &ceiling, &e) != A3S_OK) {
        say("timeout unknown: the policy did not evaluate"); /* the run refuses, saying why */
        return;
    }
    if (c->has_timeout && req_ms > ceiling) {
        fprintf(stderr,
                "a3s-sandbox: note: the requested timeout of %s s is capped at %s s, the "
                "deadline ceiling of policy %s\n",
                secs(req_ms, b1), secs(ceiling, b2), a3s_sandbox_policy_name(sb));
        say("timeout %s s (the policy's ceiling; -t asked for %s s)", secs(ceiling, b2),
            secs(req_ms, b1));
    } else if (c->has_timeout) {
        say("timeout %s s (-t; the policy's ceiling is %s s)", secs(req_ms, b1), secs(ceiling, b2));
    } else {
        say("timeout %s s (the policy's ceiling; no -t)", secs(ceiling, b2));
    }
}

/* The deadline that killed the run: the limit of the result's deadline denial, which is
 * -t's when it equals what -t asked for, else the policy's ceiling. */
static void timed_out_message(a3s_sandbox *sb, const a3s_result *r, const cli *c, int64_t req_ms)
{
    int64_t limit = -1;
    json_t *a = r->denials_json ? json_loads(r->denials_json, 0, NULL) : NULL;
    size_t i;
    json_t *d;
    json_array_foreach(a, i, d)
    {
        const char *kind = json_string_value(json_object_get(d, "kind"));
        if (kind && !strcmp(kind, "deadline"))
            limit = json_integer_value(json_object_get(d, "limit_ms"));
    }
    json_decref(a);
    char b1[32], b2[32];
    if (limit < 0)
        fprintf(stderr,
                "a3s-sandbox: command timed out after %s s; the process tree was "
                "killed\n",
                secs((int64_t)r->duration_ms, b1));
    else if (c->has_timeout && limit == req_ms)
        fprintf(stderr,
                "a3s-sandbox: command timed out after %s s: the -t deadline of %s s "
                "was reached; the process tree was killed\n",
                secs((int64_t)r->duration_ms, b1), secs(limit, b2));
    else
        fprintf(stderr,
                "a3s-sandbox: command timed out after %s s: the deadline ceiling of "
                "policy %s (%s s) was reached; the process tree was killed\n",
                secs((int64_t)r->duration_ms, b1),
                r->policy[0] ? r->policy : a3s_sandbox_policy_name(sb), secs(limit, b2));
}

/* Signals that end the CLI end the sandboxed tree first (through the library's cancel
 * fd), so pins and the scratch dir are released instead of leaked. */

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

int cli_run(a3s_sandbox *sb, a3s_session *sess, const cli *c, const bool closed_std[3],
            int cancel_fd)
{
    int rc = 0;
    a3s_error err;
    memset(&err, 0, sizeof err);
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = (const char *const *)c->argv;
    req.shell_command = c->shell_command;
    req.timeout_ms = c->has_timeout ? (int64_t)ceil(c->timeout_s * 1000.0) : -1;
    req.env = c->env;
    timeout_note(sb, c, req.timeout_ms);
    /* Forward our stdin when we have one; a closed fd 0 becomes /dev/null. */
    req.stdin_fd = closed_std[0] ? -1 : 0;
    /* The library prints the output live, never blocking past the deadline; when our
     * reader goes away (yes | head -1) it kills the tree: exit 141, like a shell. */
    if (!c->json) {
        req.mirror = true;
        req.mirror_fd[0] = closed_std[1] ? -1 : 1;
        req.mirror_fd[1] = closed_std[2] ? -1 : 2;
    }
    /* --tty: the command gets a pty of ours, never our terminal (see tty.h). */
    if (c->tty && (req.tty_fd = cli_tty_open()) < 0) {
        fprintf(stderr, "a3s-sandbox: --tty: cannot open a pseudo-terminal: %s\n",
                strerror(errno));
        a3s_sandbox_free(sb);
        free(c->env);
        free(c->grants);
        return EXIT_REFUSED;
    }
    if (cancel_fd >= 0) {
        req.cancel_fd = cancel_fd;
    } else {
        install_signal_pipe();
        req.cancel_fd = sig_pipe[0];
    }
    if (c->tty)
        cli_tty_start();
    a3s_result r;
    int st = sess ? a3s_session_exec(sess, &req, &r, &err) : a3s_sandbox_exec(sb, &req, &r, &err);
    if (c->tty)
        cli_tty_end(); /* before anything more is printed, on every path */
    /* A session's run put off past its answer (a3s_session_linger) is released before
     * anything is written here: a reader that does not read must not hold it. */
    bool quiet = st == A3S_OK && !c->json && !r.timed_out &&
                 !(r.identity && !strcmp(r.identity, "host-root"));
    if (sess && !quiet)
        a3s_session_release(sess);
    if (st != A3S_OK) {
        if (got_signal) {
            fprintf(stderr, "a3s-sandbox: interrupted by %s; the process tree was killed\n",
                    strsignal(got_signal));
            json_error(a3s_json_status_name(A3S_ERR_ABORTED),
                       "interrupted by %s; the process tree was killed",
                       strsignal(got_signal));
            rc = 128 + got_signal;
        } else if (cancel_fd >= 0 && st == A3S_ERR_ABORTED) {
            rc = 128 + SIGTERM; /* the caller (a session's client) says why */
        } else {
            rc = fail_at("run", "run", &err);
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
        if (c->json) {
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
            timed_out_message(sb, &r, c, req.timeout_ms);
        }
        rc = closed ? EXIT_OUTPUT_CLOSED : exit_status(&r);
        if (got_signal) /* it came while the rest of the output was being written */
            rc = 128 + got_signal;
        a3s_result_free(&r);
    }
    return rc;
}
