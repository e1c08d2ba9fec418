/* a3s-sandbox: the command-line front end (SPEC §2). The only place that prints and
 * chooses exit codes. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "a3s_sandbox.h"
#include "json.h"
#include "tty.h"

#define EXIT_TIMEOUT 124
#define EXIT_REFUSED 125
#define EXIT_OUTPUT_CLOSED (128 + SIGPIPE) /* what a shell pipeline reports */

static const char usage_text[] =
    "usage: a3s-sandbox [run] [OPTIONS] -- PROGRAM [ARG...]\n"
    "       a3s-sandbox [run] [OPTIONS] -c 'SHELL COMMAND'\n"
    "       a3s-sandbox probe        [--policy P] [-w DIR]\n"
    "       a3s-sandbox plan         [--policy P] [-w DIR] [--grant H[:P]]... [--explain]\n"
    "       a3s-sandbox digest       [--policy P] [-w DIR] [--grant H[:P]]...\n"
    "       a3s-sandbox capabilities [--policy P] [-w DIR]\n"
    "       a3s-sandbox check POLICY [-w DIR] [--neutral]\n"
    "       a3s-sandbox --version | --help\n"
    "\n"
    "Run options:\n"
    "  -p, --policy NAME|FILE   policy (default: baseline)\n"
    "  -w, --workspace DIR      writable workspace (default: current directory)\n"
    "  -t, --timeout SECONDS    deadline (decimal; capped by the policy ceiling)\n"
    "  -e, --env NAME=VALUE     explicit environment entry (repeatable)\n"
    "  -c COMMAND               run COMMAND with the trusted bash\n"
    "      --json               print one JSON object on stdout: the result, or\n"
    "                           {\"error\":{\"code\",\"message\"}} when refused\n"
    "      --audit FILE         append JSON-lines audit events of the run to FILE\n"
    "      --grant HOST[:PORT]  mediated network access to exactly this origin (repeatable,\n"
    "                           at most 256)\n"
    "      --grant-digest HEX   the approved digest of the policy with exactly these grants\n"
    "                           (what `digest --grant ...` prints for them)\n"
    "      --allow-process-host run unconfined on the host if no sandbox is possible\n"
    "      --allow-host-root    (root callers) run the command as host uid 0 where it cannot\n"
    "                           run under the unprivileged mapped id\n"
    "\n"
    "Values go in the next word or attached: -pNAME, --policy=NAME. Long options are\n"
    "spelled in full. Every word after -- is PROGRAM's, as given.\n"
    "\n"
    "Exit status: the command's own; 128+N when it died of signal N; 124 deadline;\n"
    "125 the sandbox could not be set up or the request was refused (nothing ran);\n"
    "141 the reader of our output went away (the process tree was killed);\n"
    "126/127 the program is not executable / not found inside the sandbox.\n";

/* --json promises exactly one JSON object on stdout (README): with it, every refusal of
 * a command whose output is JSON (run, plan, capabilities) also prints
 * {"error": {"code", "message"}} there. Decided from argv before parsing, since a usage
 * error can come before --json is read. */
static bool json_errors;

/* Every option of every subcommand, read with getopt_long; which of them a subcommand
 * accepts is decided after reading one (accepts()), so an option's value is consumed the
 * same way whatever the subcommand: the value of an option is never an option (`-c --json`
 * runs the command "--json"). All short options take a value (attached or the next word),
 * so short options never group. "+": stop at the first operand, never permute argv (what
 * follows `--` is the command's, untouched). ":": a missing value is reported as such. */
enum {
    OPT_GRANT = 256,
    OPT_GRANT_DIGEST,
    OPT_AUDIT,
    OPT_JSON,
    OPT_EXPLAIN,
    OPT_ALLOW_PROCESS_HOST,
    OPT_ALLOW_HOST_ROOT,
    OPT_NEUTRAL,
    OPT_TTY,
};
static const char short_opts[] = "+:p:w:t:e:c:";
static const struct option long_opts[] = {
    {"policy", required_argument, NULL, 'p'},
    {"workspace", required_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, 't'},
    {"env", required_argument, NULL, 'e'},
    {"grant", required_argument, NULL, OPT_GRANT},
    {"grant-digest", required_argument, NULL, OPT_GRANT_DIGEST},
    {"audit", required_argument, NULL, OPT_AUDIT},
    {"json", no_argument, NULL, OPT_JSON},
    {"explain", no_argument, NULL, OPT_EXPLAIN},
    {"allow-process-host", no_argument, NULL, OPT_ALLOW_PROCESS_HOST},
    {"allow-host-root", no_argument, NULL, OPT_ALLOW_HOST_ROOT},
    {"neutral", no_argument, NULL, OPT_NEUTRAL},
    {"tty", no_argument, NULL, OPT_TTY},
    {NULL, 0, NULL, 0},
};

/* Whether subcommand cmd takes option opt (what it did before getopt). */
static bool accepts(const char *cmd, int opt)
{
    switch (opt) {
    case 't':
    case 'e':
    case 'c':
    case OPT_AUDIT:
    case OPT_TTY:
        return !strcmp(cmd, "run");
    case OPT_EXPLAIN:
        return !strcmp(cmd, "plan");
    case OPT_NEUTRAL:
        return !strcmp(cmd, "check");
    default:
        return true;
    }
}

/* The long option spelled in full by arg ("--name" or "--name=VALUE"), or NULL. */
static const struct option *long_opt_exact(const char *arg)
{
    if (strncmp(arg, "--", 2) || !arg[2])
        return NULL;
    const char *name = arg + 2;
    size_t n = strcspn(name, "=");
    for (const struct option *o = long_opts; o->name; o++)
        if (strlen(o->name) == n && !strncmp(o->name, name, n))
            return o;
    return NULL;
}

typedef enum {
    TOK_END,         /* no more words */
    TOK_DASHDASH,    /* `--`: *next is the first word after it */
    TOK_OPERAND,     /* a word that is not an option (arg) */
    TOK_OPTION,      /* opt, with value when it takes one */
    TOK_UNKNOWN,     /* arg is no option (abbreviations included) */
    TOK_NO_VALUE,    /* opt needs a value and arg is the last word */
    TOK_EXTRA_VALUE, /* --opt=VALUE for an option that takes none */
} tok_kind;

typedef struct tok {
    tok_kind kind;
    int opt;
    const char *value, *arg; /* arg: the word as written */
} tok;

/* Reads the option (or operand) that starts at argv[*next] and moves *next past it (and
 * past its value). Each word is read by a fresh getopt_long over the rest of argv, so
 * nothing carries over between words and a caller may skip a word it refuses. Long
 * options must be spelled in full: getopt_long's abbreviations (`--allow-h`) are refused
 * here, an unknown option and not a guess. */
static tok next_token(int argc, char **argv, int *next)
{
    int k = *next;
    tok t = {.kind = TOK_END};
    if (k >= argc)
        return t;
    t.arg = argv[k];
    if (!strcmp(t.arg, "--")) {
        t.kind = TOK_DASHDASH;
        *next = k + 1;
        return t;
    }
    if (!strncmp(t.arg, "--", 2)) {
        const struct option *o = long_opt_exact(t.arg);
        if (!o || (o->has_arg == no_argument && strchr(t.arg, '='))) {
            t.kind = o ? TOK_EXTRA_VALUE : TOK_UNKNOWN;
            t.opt = o ? o->val : 0;
            *next = k + 1;
            return t;
        }
    }
    /* argv + k - 1 stands in for argv[0]: getopt_long starts at its index 1. */
    opterr = 0;
    optind = 0; /* a full reset: no state from an earlier word or an earlier scan */
    int r = getopt_long(argc - (k - 1), argv + (k - 1), short_opts, long_opts, NULL);
    int used = optind > 1 ? optind - 1 : 1;
    if (r == -1) {
        t.kind = TOK_OPERAND; /* "-" or a word without a leading '-' */
        used = 1;
    } else if (r == '?') {
        t.kind = TOK_UNKNOWN;
        used = 1;
    } else if (r == ':') {
        t.kind = TOK_NO_VALUE;
        t.opt = optopt;
    } else {
        t.kind = TOK_OPTION;
        t.opt = r;
        t.value = optarg;
    }
    *next = k + used;
    return t;
}

/* How an option was named in arg: "--name" (without =VALUE) or "-x". */
static const char *opt_name(const char *arg, char *buf, size_t size)
{
    size_t n = !strncmp(arg, "--", 2) ? strcspn(arg, "=") : 2;
    snprintf(buf, size, "%.*s", (int)n, arg);
    return buf;
}

/* --json before `--`, for run (the default command), plan or capabilities. Read the way
 * parse() reads the words, so a value is never taken for --json; words parse() will
 * refuse are skipped (the refusal is then printed as JSON when --json follows). */
static bool argv_wants_json(int argc, char **argv)
{
    int i = 1;
    if (i < argc && (!strcmp(argv[i], "probe") || !strcmp(argv[i], "digest") ||
                     !strcmp(argv[i], "check") || !strcmp(argv[i], "--help") ||
                     !strcmp(argv[i], "-h") || !strcmp(argv[i], "help") ||
                     !strcmp(argv[i], "--version")))
        return false;
    if (i < argc && (!strcmp(argv[i], "run") || !strcmp(argv[i], "plan") ||
                     !strcmp(argv[i], "capabilities")))
        i++;
    for (;;) {
        tok t = next_token(argc, argv, &i);
        if (t.kind == TOK_END || t.kind == TOK_DASHDASH)
            return false;
        if (t.kind == TOK_OPTION && t.opt == OPT_JSON)
            return true;
    }
}

/* The refusal object on stdout when --json was given (code: an a3s_status name, or
 * "usage"); the caller prints the human message on stderr as before. */
static void json_error(const char *code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void json_error(const char *code, const char *fmt, ...)
{
    if (!json_errors)
        return;
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    char *s = msg ? a3s_json_error(code, msg) : NULL;
    free(msg);
    /* Out of memory still yields one object, never none. */
    fputs(s ? s : "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}", stdout);
    fputc('\n', stdout);
    free(s);
    fflush(stdout);
    json_errors = false; /* exactly one object */
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    fprintf(stderr, "a3s-sandbox: %s\n(run 'a3s-sandbox --help' for usage)\n",
            msg ? msg : "invalid command line (out of memory)");
    json_error("usage", "%s", msg ? msg : "invalid command line (out of memory)");
    free(msg);
    exit(EXIT_REFUSED);
}

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

typedef struct cli {
    const char *cmd; /* run, probe, plan, digest, capabilities, check */
    const char *policy, *workspace, *shell_command, *check_policy, *audit;
    double timeout_s;
    bool has_timeout, json, allow_process_host, allow_host_root, explain, neutral, tty;
    const char **env;
    size_t nenv;
    char **argv;
    const char **grants;
    size_t ngrants;
    const char *grant_digest;
} cli;

static void parse(cli *c, int argc, char **argv)
{
    int i = 1;
    c->cmd = "run";
    if (i < argc) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "help")) {
            fputs(usage_text, stdout);
            exit(0);
        }
        if (!strcmp(a, "--version")) {
            printf("a3s-sandbox %s\n", a3s_version());
            exit(0);
        }
        if (!strcmp(a, "run") || !strcmp(a, "probe") || !strcmp(a, "plan") ||
            !strcmp(a, "digest") || !strcmp(a, "capabilities") || !strcmp(a, "check")) {
            c->cmd = a;
            i++;
        }
    }
    c->env = calloc((size_t)argc + 1, sizeof *c->env);
    c->grants = calloc((size_t)argc + 1, sizeof *c->grants);
    if (!c->env || !c->grants) {
        fprintf(stderr, "a3s-sandbox: out of memory\n");
        json_error("internal", "out of memory");
        exit(EXIT_REFUSED);
    }
    bool run = !strcmp(c->cmd, "run");
    for (;;) {
        tok t = next_token(argc, argv, &i);
        char name[64];
        if (t.kind == TOK_END)
            break;
        if (t.kind == TOK_DASHDASH) {
            if (!run)
                die_usage("'--' is only valid for run, not '%s'", c->cmd);
            c->argv = argv + i;
            if (!c->argv[0])
                die_usage("%s", "missing PROGRAM after --");
            break;
        }
        if (t.kind == TOK_OPERAND) {
            if (!strcmp(c->cmd, "check") && !c->check_policy && t.arg[0] != '-') {
                c->check_policy = t.arg;
                continue;
            }
            die_usage(t.arg[0] == '-' ? "unknown option '%s'"
                                      : "unexpected argument '%s' (use -- before the command)",
                      t.arg);
        }
        if (t.kind == TOK_UNKNOWN)
            die_usage("unknown option '%s'", t.arg);
        if (!accepts(c->cmd, t.opt))
            die_usage("unknown option '%s'", opt_name(t.arg, name, sizeof name));
        if (t.kind == TOK_NO_VALUE)
            die_usage("option %s needs a value", opt_name(t.arg, name, sizeof name));
        if (t.kind == TOK_EXTRA_VALUE)
            die_usage("option %s takes no value", opt_name(t.arg, name, sizeof name));
        const char *v = t.value;
        switch (t.opt) {
        case 'p':
            c->policy = v;
            break;
        case 'w':
            c->workspace = v;
            break;
        case OPT_GRANT:
            c->grants[c->ngrants++] = v;
            break;
        case OPT_GRANT_DIGEST:
            c->grant_digest = v;
            break;
        case 't': {
            char *end = NULL;
            errno = 0;
            c->timeout_s = strtod(v, &end);
            if (errno || !end || *end || end == v || !isfinite(c->timeout_s) || c->timeout_s < 0)
                die_usage("invalid timeout '%s' (seconds, decimal allowed)", v);
            if (c->timeout_s * 1000.0 < 1.0)
                die_usage("invalid timeout '%s': the command timeout must be greater than zero", v);
            if (c->timeout_s > 86400.0)
                die_usage("invalid timeout '%s': at most 86400 seconds", v);
            c->has_timeout = true;
            break;
        }
        case 'e':
            c->env[c->nenv++] = v;
            break;
        case 'c':
            c->shell_command = v;
            break;
        case OPT_EXPLAIN:
            c->explain = true;
            break;
        case OPT_AUDIT:
            c->audit = v;
            break;
        case OPT_JSON:
            c->json = true;
            break;
        case OPT_ALLOW_PROCESS_HOST:
            c->allow_process_host = true;
            break;
        case OPT_ALLOW_HOST_ROOT:
            c->allow_host_root = true;
            break;
        case OPT_NEUTRAL:
            c->neutral = true;
            break;
        case OPT_TTY:
            c->tty = true;
            break;
        default: /* not in short_opts/long_opts: unreachable */
            die_usage("unknown option '%s'", t.arg);
        }
    }
    if (run) {
        if (c->argv && c->shell_command)
            die_usage("%s", "give either -c COMMAND or -- PROGRAM, not both");
        if (!c->argv && !c->shell_command)
            die_usage("%s", "missing command: use -- PROGRAM [ARG...] or -c 'COMMAND'");
        if (c->tty && c->json)
            die_usage("%s", "--tty and --json cannot be combined (a terminal session's output "
                            "is not one JSON object)");
    }
    if (!strcmp(c->cmd, "check") && !c->check_policy)
        die_usage("%s", "check needs a POLICY");
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
    json_errors = argv_wants_json(argc, argv);
    parse(&c, argc, argv);
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
        /* the run evaluates it once, fail-closed; check evaluates what it is asked to */
        .defer_policy = !strcmp(c.cmd, "run") || !strcmp(c.cmd, "check"),
        .audit_path = c.audit,
        .allow_process_host = c.allow_process_host ||
                              truthy(getenv("A3S_SANDBOX_ALLOW_PROCESS_HOST")) ||
                              truthy(getenv("A3S_CODE_ALLOW_PROCESS_HOST_SANDBOX")),
        .allow_host_root = c.allow_host_root || truthy(getenv("A3S_SANDBOX_ALLOW_HOST_ROOT")),
    };
    a3s_sandbox *sb = a3s_sandbox_new(&o, &err);
    if (!sb) {
        if (!strcmp(c.cmd, "check"))
            return fail("check", &err);
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
        /* What a run would refuse, refused the same way: 125 and the reason. */
        char d[65];
        if (a3s_sandbox_check(sb, c.neutral, &err) != A3S_OK ||
            a3s_sandbox_digest(sb, d, &err) != A3S_OK) {
            rc = fail("check", &err);
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
        /* --tty: the command gets a pty of ours, never our terminal (see tty.h). */
        if (c.tty && (req.tty_fd = cli_tty_open()) < 0) {
            fprintf(stderr, "a3s-sandbox: --tty: cannot open a pseudo-terminal: %s\n",
                    strerror(errno));
            a3s_sandbox_free(sb);
            free(c.env);
            free(c.grants);
            return EXIT_REFUSED;
        }
        install_signal_pipe();
        req.cancel_fd = sig_pipe[0];
        if (c.tty)
            cli_tty_start();
        a3s_result r;
        int st = a3s_sandbox_exec(sb, &req, &r, &err);
        if (c.tty)
            cli_tty_end(); /* before anything more is printed, on every path */
        if (st != A3S_OK) {
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
