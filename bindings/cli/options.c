/* a3s-sandbox: reading the command line (getopt_long) and the --help text. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "instdir.h"

static const char usage_text[] =
    "usage: a3s-sandbox [run] [OPTIONS] -- PROGRAM [ARG...]\n"
    "       a3s-sandbox [run] [OPTIONS] -c 'SHELL COMMAND'\n"
    "       a3s-sandbox probe        [--policy P] [-w DIR] [-v]\n"
    "       a3s-sandbox plan         [--policy P] [-w DIR] [--grant H[:P]]... [--explain]\n"
    "                                [--backend B] [-v]\n"
    "       a3s-sandbox digest       [--policy P] [-w DIR] [--grant H[:P]]... [-v]\n"
    "       a3s-sandbox capabilities [--policy P] [-w DIR] [--backend B] [-v]\n"
    "       a3s-sandbox check POLICY [-w DIR] [--neutral]\n"
    "       a3s-sandbox session start [--policy P] [-w DIR] [--audit FILE] [--owner PID]\n"
    "       a3s-sandbox session exec ID [-t S] [-e N=V]... [--json] [-v] (-- PROGRAM [ARG...] | -c CMD)\n"
    "       a3s-sandbox session stop ID | session list\n"
    "       a3s-sandbox serve        [--policy P] [-w DIR] [--audit FILE] [-v]\n"
    "       a3s-sandbox --version | --help\n"
    "\n"
    "Options (run takes all but --explain; the other subcommands, those shown above):\n"
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
    "      --tty                run the command on a pseudo-terminal of its own (interactive\n"
    "                           programs; not with --json)\n"
    "      --allow-host-root    (root callers) run the command as host uid 0 where it cannot\n"
    "                           run under the unprivileged mapped id\n"
    "  -v, --verbose            say on stderr what was resolved (policy and its file, digest,\n"
    "                           backend, workspace, timeout) and, on a refusal, at which stage\n"
    "      --explain            (plan) the plan as readable text instead of JSON\n"
    "      --backend NAME       (plan, capabilities) describe the plan or the capabilities\n"
    "                           of this backend instead of the host's own: linux-bwrap,\n"
    "                           macos-seatbelt (plan prints its Seatbelt profile; it runs\n"
    "                           only on macOS), process-host (with --allow-process-host)\n"
    "\n"
    "Values go in the next word or attached: -pNAME, --policy=NAME; a value is never\n"
    "'--'. Long options are spelled in full. Every word after -- is PROGRAM's, as given.\n"
    "\n"
    "Exit status: the command's own; 128+N when it died of signal N; 124 deadline;\n"
    "125 the sandbox could not be set up or the request was refused (nothing ran);\n"
    "141 the reader of our output went away (the process tree was killed);\n"
    "126/127 the program is not executable / not found inside the sandbox.\n"
    "\n"
    "Environment:\n"
    "  A3S_SANDBOX_BWRAP        bubblewrap (default /usr/bin/bwrap)\n"
    "  A3S_SANDBOX_LAUNCHER     the launcher that runs first inside the sandbox\n"
    "  A3S_SANDBOX_RELAY        the network relay inside the sandbox (runs with --grant)\n"
    "  A3S_SANDBOX_MEDIATOR     the network mediator on the host (runs with --grant); these\n"
    "                           three are built in by default (given by path for tests and\n"
    "                           debugging; a path inside the workspace is refused)\n"
    "  A3S_SANDBOX_POLICY_PATH  more policy directories, ':'-separated, searched last\n"
    "  A3S_SANDBOX_MAPPED_ID    (root callers) the unprivileged host id the command runs as\n"
    "                           (default 2139095040; it must belong to no one)\n"
    "  A3S_SANDBOX_CGROUP_ROOT  the cgroup filesystem's mount point for quotas\n"
    "                           (default /sys/fs/cgroup)\n"
    "  A3S_SANDBOX_AHEAD        0: start bubblewrap only once the run is prepared (by\n"
    "                           default it starts while the policy is evaluated)\n"
    "  A3S_SANDBOX_ALLOW_PROCESS_HOST, A3S_CODE_ALLOW_PROCESS_HOST_SANDBOX\n"
    "                           1|true|yes|on: as --allow-process-host\n"
    "  A3S_SANDBOX_ALLOW_HOST_ROOT  1|true|yes|on: as --allow-host-root\n"
    "  TMPDIR                   where scratch dirs are made (default /tmp; the state dir\n"
    "                           is in /tmp, here only when /tmp is unusable); hidden\n"
    "                           inside the sandbox\n"
    "  HOME                     the caller's home, hidden inside the sandbox (default: the\n"
    "                           passwd entry's)\n"
    "  PATH                     where this program was found when run by name: an entry\n"
    "                           inside the workspace is protected like the program\n"
    "  A3S_SANDBOX_TRACE        set: phase times on stderr (tracing builds only, made with\n"
    "                           cmake -DA3S_TRACE=ON; ignored by a normal build)\n";

/* The policy search path in the engine's order (engine/sandbox.c: directories the caller
 * gives, none from the CLI; this installation's policies, found as the composition root
 * finds them; the shipped policies built in; then $A3S_SANDBOX_POLICY_PATH). One
 * directory a line, so that the bash completion can read it. */
static void print_search_path(void)
{
    printf("\nPolicy search path, in order (-p NAME reads NAME.lua from the first directory\n"
           "that has it; a value with a '/' or ending in .lua is a file; directories inside\n"
           "the workspace are not searched):\n");
    char *inst = a3s_instdir_policies();
    if (inst)
        printf("  %s  (installed)\n", inst);
    free(inst);
    printf("  %s  (built in: the shipped policies)\n", a3s_instdir_builtin());
    const char *env = getenv("A3S_SANDBOX_POLICY_PATH");
    for (const char *d = env; d && *d;) {
        size_t n = strcspn(d, ":");
        if (d[0] == '/') /* relative entries are ignored, as the engine does */
            printf("  %.*s  (A3S_SANDBOX_POLICY_PATH)\n", (int)n, d);
        d += n + (d[n] == ':');
    }
}

/* Every option of every subcommand, read with getopt_long; which of them a subcommand
 * accepts is decided after reading one (accepts()), so an option's value is consumed the
 * same way whatever the subcommand: the value of an option is never an option (`-c --json`
 * runs the command "--json"). All short options but -v take a value (attached or the next
 * word), and -v is taken only as a word of its own (next_token), so short options never
 * group. "+": stop at the first operand, never permute argv (what
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
    OPT_BACKEND,
};
static const char short_opts[] = "+:p:w:t:e:c:v";
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
    {"verbose", no_argument, NULL, 'v'},
    {"neutral", no_argument, NULL, OPT_NEUTRAL},
    {"tty", no_argument, NULL, OPT_TTY},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {NULL, 0, NULL, 0},
};

/* Whether subcommand cmd takes option opt (what it did before getopt). */
static bool accepts(const char *cmd, int opt)
{
    switch (opt) {
    case 't':
    case 'e':
    case 'c':
        return !strcmp(cmd, "run");
    case OPT_AUDIT:
        return !strcmp(cmd, "run") || !strcmp(cmd, "serve");
    case OPT_GRANT:
    case OPT_GRANT_DIGEST:
    case OPT_JSON:
        return strcmp(cmd, "serve") != 0; /* serve: each request says its own */
    case OPT_EXPLAIN:
        return !strcmp(cmd, "plan");
    case 'v':
        return strcmp(cmd, "check") != 0;
    case OPT_NEUTRAL:
        return !strcmp(cmd, "check");
    case OPT_TTY:
        return !strcmp(cmd, "run");
    case OPT_BACKEND:
        return !strcmp(cmd, "plan") || !strcmp(cmd, "capabilities");
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
    /* -v takes no value: "-vX" would be -v then -X to getopt, which the words below do not
     * do (grouping); it is refused as a value given to -v. */
    if (!strncmp(t.arg, "-v", 2) && t.arg[2]) {
        t.kind = TOK_EXTRA_VALUE;
        t.opt = 'v';
        *next = k + 1;
        return t;
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

/* A value of exactly "--" is a mistake, never a value: `--policy -- true` would otherwise
 * take "--" as the policy and "true" as an operand. */
static bool dashdash_value(const tok *t)
{
    return t->kind == TOK_OPTION && t->value && !strcmp(t->value, "--");
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
bool cli_argv_wants_json(int argc, char **argv)
{
    int i = 1;
    if (i < argc && (!strcmp(argv[i], "probe") || !strcmp(argv[i], "digest") ||
                     !strcmp(argv[i], "check") || !strcmp(argv[i], "serve") || !strcmp(argv[i], "--help") ||
                     !strcmp(argv[i], "-h") || !strcmp(argv[i], "help") ||
                     !strcmp(argv[i], "--version")))
        return false;
    if (i < argc && (!strcmp(argv[i], "run") || !strcmp(argv[i], "plan") ||
                     !strcmp(argv[i], "capabilities")))
        i++;
    for (;;) {
        tok t = next_token(argc, argv, &i);
        /* parse() refuses a value of "--": what follows may be the program's words */
        if (t.kind == TOK_END || t.kind == TOK_DASHDASH || dashdash_value(&t))
            return false;
        if (t.kind == TOK_OPTION && t.opt == OPT_JSON)
            return true;
    }
}


void cli_parse(cli *c, int argc, char **argv)
{
    int i = 1;
    c->cmd = "run";
    if (i < argc) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "help")) {
            fputs(usage_text, stdout);
            print_search_path();
            exit(0);
        }
        if (!strcmp(a, "--version")) {
            printf("a3s-sandbox %s\n", a3s_version());
            exit(0);
        }
        if (!strcmp(a, "run") || !strcmp(a, "probe") || !strcmp(a, "plan") ||
            !strcmp(a, "digest") || !strcmp(a, "capabilities") || !strcmp(a, "check") ||
            !strcmp(a, "serve")) {
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
        if (dashdash_value(&t))
            die_usage("option %s needs a value, not '--' (which ends the options): give its "
                      "value first, e.g. --policy NAME -- PROGRAM",
                      opt_name(t.arg, name, sizeof name));
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
        case 'v':
            c->verbose = true;
            break;
        case OPT_NEUTRAL:
            c->neutral = true;
            break;
        case OPT_TTY:
            c->tty = true;
            break;
        case OPT_BACKEND:
            c->backend = v;
            break;
        default: /* not in short_opts/long_opts: unreachable */
            die_usage("unknown option '%s'", t.arg);
        }
    }
    if (c->tty && c->json)
        die_usage("%s", "--tty and --json cannot be combined (a terminal session's output "
                        "is not one JSON object)");
    if (run) {
        if (c->argv && c->shell_command)
            die_usage("%s", "give either -c COMMAND or -- PROGRAM, not both");
        if (!c->argv && !c->shell_command)
            die_usage("%s", "missing command: use -- PROGRAM [ARG...] or -c 'COMMAND'");
    }
    if (!strcmp(c->cmd, "check") && !c->check_policy)
        die_usage("%s", "check needs a POLICY");
}
