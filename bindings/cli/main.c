/* a3s-sandbox: the command-line front end (README "CLI"). The only place that prints and
 * chooses exit codes; the command line is read in options.c. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
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
#include "cli.h"
#include "compose.h"
#include "serve.h"
#include "tty.h"
#include "json.h"
#include "trace.h"

bool truthy(const char *v)
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

/* The Seatbelt profile of a plan (its "sbpl_profile" member), as sandbox-exec reads it. */
static int print_profile(const char *plan_json)
{
    json_error_t je;
    json_t *p = json_loads(plan_json, 0, &je);
    size_t n = 0;
    char *text = p ? a3s_json_bytes(json_object_get(p, "sbpl_profile"), &n) : NULL;
    json_decref(p);
    if (!text) {
        fprintf(stderr, "a3s-sandbox: plan: no Seatbelt profile in the plan\n");
        return EXIT_REFUSED;
    }
    int rc = fwrite(text, 1, n, stdout) == n ? 0 : EXIT_REFUSED;
    free(text);
    return rc;
}

int main(int argc, char **argv)
{
    a3s_trace_mark("start");
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
    if (argc > 1 && !strcmp(argv[1], "session"))
        return cli_session_main(argc - 1, argv + 1);
    cli c;
    memset(&c, 0, sizeof c);
    json_errors = cli_argv_wants_json(argc, argv);
    cli_parse(&c, argc, argv);
    verbose = c.verbose;
    if (!strcmp(c.cmd, "serve")) { /* a sandbox of its own for each request */
        int rc = cli_serve_main(&c);
        free(c.env);
        free(c.grants);
        return rc;
    }
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
    a3s_sandbox *sb = a3s_compose_new(&o, c.backend, &err);
    if (!sb) {
        if (!strcmp(c.cmd, "check"))
            return fail_at("opening the workspace and finding the policy", "check", &err);
        return fail_at("opening the workspace and finding the policy", "cannot create the sandbox",
                       &err);
    }
    /* The grants as one set, checked against --grant-digest as a whole: the approval
     * covers the policy and exactly these grants (what `digest --grant ...` prints), so
     * one approval never runs another grant set. Anything else refuses; nothing runs. */
    if (c.ngrants &&
        a3s_sandbox_grant_set(sb, c.grants, c.ngrants, c.grant_digest, NULL, &err) != A3S_OK) {
        fprintf(stderr, "a3s-sandbox: --grant: %s\n", err.msg);
        json_error(a3s_json_status_name(err.code), "--grant: %s", err.msg);
        say("refused at stage 'approving the grants' (error class %s)",
            a3s_json_status_name(err.code));
        a3s_sandbox_free(sb);
        free(c.env);
        free(c.grants);
        return EXIT_REFUSED;
    }
    if (a3s_sandbox_fallback_reason(sb) && c.backend)
        fprintf(stderr, "a3s-sandbox: warning: NO LOCAL SANDBOX BOUNDARY IS IN FORCE: the "
                        "process-host backend was chosen by name (--backend)\n");
    else if (a3s_sandbox_fallback_reason(sb))
        fprintf(stderr,
                "a3s-sandbox: warning: NO LOCAL SANDBOX BOUNDARY IS IN FORCE: running on the "
                "host (process-host backend) because the native boundary is unusable: %s\n",
                a3s_sandbox_fallback_reason(sb));
    describe(sb, &c);

    int rc = 0;
    if (!strcmp(c.cmd, "probe")) {
        if (a3s_sandbox_probe(sb, &err) != A3S_OK)
            rc = fail_at("probe", "probe", &err);
        else
            printf("ok backend=%s\n", a3s_sandbox_backend(sb));
    } else if (!strcmp(c.cmd, "digest")) {
        char d[65];
        if (a3s_sandbox_digest(sb, d, &err) != A3S_OK)
            rc = fail_at("digest", "digest", &err);
        else
            printf("%s\n", d);
    } else if (!strcmp(c.cmd, "plan") || !strcmp(c.cmd, "capabilities")) {
        char *s = !strcmp(c.cmd, "plan") ? (c.explain ? a3s_sandbox_plan_explain(sb, &err)
                                                      : a3s_sandbox_plan_json(sb, &err))
                                         : a3s_sandbox_capabilities_json(sb, &err);
        if (!s)
            rc = fail_at(c.cmd, c.cmd, &err);
        else if (!strcmp(c.cmd, "plan") && !c.json && !c.explain &&
                 !strcmp(a3s_sandbox_backend(sb), "macos-seatbelt"))
            rc = print_profile(s);
        else
            printf("%s\n", s);
        free(s);
    } else if (!strcmp(c.cmd, "check")) {
        /* What a run would refuse, refused the same way: 125 and the reason. */
        char d[65];
        if (a3s_sandbox_check(sb, c.neutral, &err) != A3S_OK ||
            a3s_sandbox_digest(sb, d, &err) != A3S_OK) {
            rc = fail_at("check", "check", &err);
        } else {
            printf("ok: policy %s is valid (digest %s)\n", a3s_sandbox_policy_name(sb), d);
        }
    } else {
        rc = cli_run(sb, NULL, &c, closed_std, -1);
    }
    a3s_sandbox_free(sb);
    free(c.env);
    free(c.grants);
    fflush(stdout);
    return rc;
}
