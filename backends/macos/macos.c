/* The macos-seatbelt backend (backend.h): a frozen plan and the workspace scan become a
 * Seatbelt profile (sbpl.c), run with `/usr/bin/sandbox-exec -p` on macOS (macos_exec.c).
 * Elsewhere it describes plans only: unusable() says so, and the engine refuses every run
 * before anything of it is made, never falling back to a weaker backend. */
#include "macos_backend.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "macos_exec.h"
#include "sbpl.h"
#include "util.h"

#define SANDBOX_EXEC "/usr/bin/sandbox-exec"

typedef struct macos_backend {
    a3s_backend base;
    a3s_backend_host h;
    char *why_unusable;
    a3s_quota_caps caps;
} macos_backend;

struct a3s_backend_run {
    const a3s_plan *plan;
    char *scratch;
    bool scratch_made; /* a directory of ours to remove (macOS runs only) */
    char *profile;
    char *cwd;          /* the workspace, or the request's directory below it */
    a3s_strv env, argv; /* the command's environment; sandbox-exec and its arguments */
};

static void mb_free(a3s_backend *base)
{
    macos_backend *be = (macos_backend *)base;
    if (!be)
        return;
    free(be->why_unusable);
    free(be);
}

static const char *mb_unusable(const a3s_backend *base)
{
    return ((const macos_backend *)base)->why_unusable;
}

static const char *mb_program(const a3s_backend *base)
{
    return ((const macos_backend *)base)->why_unusable ? NULL : SANDBOX_EXEC;
}

static const a3s_quota_caps *mb_quota_caps(a3s_backend *base)
{
    return &((macos_backend *)base)->caps;
}

static int mb_plan_check(a3s_backend *base, const a3s_plan *p, bool host, a3s_error *err)
{
    (void)base;
    (void)host;
    return a3s_sbpl_check(p, err);
}

static void mb_run_close(a3s_backend *base, a3s_backend_run *run)
{
    (void)base;
    if (!run)
        return;
#ifdef __APPLE__
    if (run->scratch_made)
        a3s_macos_scratch_remove(run->scratch);
#endif
    free(run->scratch);
    free(run->profile);
    free(run->cwd);
    a3s_strv_free(&run->env);
    a3s_strv_free(&run->argv);
    free(run);
}

/* A run's scratch dir: made on macOS; elsewhere (a described plan) a name of its shape
 * stands in, and nothing is created. */
static int mb_run_open(a3s_backend *base, a3s_backend_run **out, const char **scratch,
                       bool sweep, a3s_error *err)
{
    macos_backend *be = (macos_backend *)base;
    (void)sweep; /* nothing outlives a run here: no records to sweep */
    *out = NULL;
    a3s_backend_run *run = calloc(1, sizeof *run);
    if (!run)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
#ifdef __APPLE__
    if (a3s_macos_scratch_make(be->h.tmp, &run->scratch, err) < 0) {
        free(run);
        return -1;
    }
    run->scratch_made = true;
#else
    if (asprintf(&run->scratch, "%s/a3s-sandbox-XXXXXX", be->h.tmp) < 0) {
        run->scratch = NULL;
        free(run);
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
#endif
    *out = run;
    *scratch = run->scratch;
    return 0;
}

/* Where the command starts: the workspace, or the request's directory below it, resolved
 * for a run (and then still inside the workspace); a described plan only names it. */
static int resolve_cwd(macos_backend *be, a3s_backend_run *run, const char *cwd, bool host,
                       a3s_error *err)
{
    if (!cwd) {
        run->cwd = a3s_strdup(be->h.workspace);
        return run->cwd ? 0 : a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    char *joined = NULL;
    if (asprintf(&joined, "%s/%s", be->h.workspace, cwd) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    if (!host) {
        run->cwd = joined;
        return 0;
    }
    char real[PATH_MAX];
    bool ok = realpath(joined, real) != NULL;
    free(joined);
    if (!ok || !a3s_path_within(real, be->h.workspace))
        return a3s_fail(err, A3S_ERR_INVALID,
                        "exec: the working directory '%s' does not exist in the workspace", cwd);
    run->cwd = a3s_strdup(real);
    return run->cwd ? 0 : a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
}

/* sandbox-exec -p PROFILE -- bash -c CMD, or -- PROGRAM ARG... */
static int build_argv(a3s_backend_run *run, const a3s_run_spec *spec)
{
    static const char *const probe[] = {"true", NULL};
    if (a3s_strv_push(&run->argv, SANDBOX_EXEC) < 0 || a3s_strv_push(&run->argv, "-p") < 0 ||
        a3s_strv_push(&run->argv, run->profile) < 0 || a3s_strv_push(&run->argv, "--") < 0)
        return -1;
    if (spec->shell_command)
        return a3s_strv_push(&run->argv, "/bin/bash") < 0 ||
                       a3s_strv_push(&run->argv, "-c") < 0 ||
                       a3s_strv_push(&run->argv, spec->shell_command) < 0
                   ? -1
                   : 0;
    char *const *argv = spec->argv ? spec->argv : (char *const *)probe;
    for (size_t i = 0; argv[i]; i++)
        if (a3s_strv_push(&run->argv, argv[i]) < 0)
            return -1;
    return 0;
}

static int mb_run_prepare(a3s_backend *base, a3s_backend_run *run, const a3s_run_spec *spec,
                          a3s_error *err)
{
    macos_backend *be = (macos_backend *)base;
    run->plan = spec->plan;
    /* The network mediator is a Linux program: a grant has nothing to reach it through. */
    if (spec->ngrants)
        return a3s_fail(err, A3S_ERR_SETUP, "network grants are not supported by "
                        "macos-seatbelt: its profile denies all network (the mediator runs "
                        "on Linux only)");
    const a3s_limits *l = &spec->plan->limits;
    if (spec->pin && (l->processes || l->memory_bytes || l->cpu_millicores))
        return a3s_fail(err, A3S_ERR_SETUP, "macos-seatbelt cannot enforce the plan's process, "
                        "memory or CPU quota (no cgroups on macOS): refused");
    a3s_sbpl_input in = {.plan = spec->plan, .scan = spec->scan,
                         .workspace = be->h.workspace, .scratch = run->scratch};
    if (a3s_sbpl_profile(&in, &run->profile, err) < 0 ||
        resolve_cwd(be, run, spec->cwd, spec->pin, err) < 0)
        return -1;
    for (size_t i = 0; i < spec->env->n; i++)
        if (a3s_strv_push(&run->env, spec->env->v[i]) < 0)
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    if (build_argv(run, spec) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    return 0;
}

static int mb_run_describe(a3s_backend *base, a3s_backend_run *run, json_t *extra)
{
    (void)base;
    return a3s_json_set(extra, "sbpl_profile", a3s_json_cstr(run->profile));
}

static int mb_run_exec(a3s_backend *base, a3s_backend_run *run, const a3s_run_io *io,
                       a3s_outcome *o, a3s_error *err)
{
    macos_backend *be = (macos_backend *)base;
    memset(o, 0, sizeof *o);
    if (be->why_unusable)
        return a3s_fail(err, A3S_ERR_SETUP, "%s", be->why_unusable);
#ifdef __APPLE__
    const a3s_limits *l = &run->plan->limits;
    a3s_macos_cmd cmd = {.argv = run->argv.v, .envp = run->env.v, .cwd = run->cwd,
                         .output_bytes = l->output_bytes, .nofile = l->nofile,
                         .core_bytes = l->core_bytes, .file_size_bytes = l->file_size_bytes};
    int rc = a3s_macos_exec(&cmd, io, o, err);
    o->identity = "caller";
    return rc;
#else
    (void)run;
    (void)io;
    return a3s_fail(err, A3S_ERR_SETUP, "macos-seatbelt runs on macOS only");
#endif
}

/* Capability keys (the capabilities report) this backend never provides: Seatbelt has no
 * namespaces and no syscall filter, and the deadline kills a process group, which a
 * command can leave (setsid). */
static const char *const not_provided[] = {"private_network_namespace", "seccomp_filter",
                                           "pid_namespace", "deadline_kill_tree",
                                           "mediated_http", "mediated_socks", NULL};

static const a3s_backend_ops macos_ops = {
    .name = "macos-seatbelt",
    .boundary = true,
    .not_provided = not_provided,
    .unusable = mb_unusable,
    .program = mb_program,
    .plan_check = mb_plan_check,
    .run_open = mb_run_open,
    .scan_hooks = NULL,
    .run_prepare = mb_run_prepare,
    .run_describe = mb_run_describe,
    .run_exec = mb_run_exec,
    .run_close = mb_run_close,
    .quota_caps = mb_quota_caps,
    .probe_mediation = NULL,
    .free = mb_free,
};

int a3s_macos_backend_new(const a3s_backend_host *h, a3s_backend **out, a3s_error *err)
{
    *out = NULL;
    macos_backend *be = calloc(1, sizeof *be);
    if (!be)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    be->base.ops = &macos_ops;
    be->h = *h;
    for (int q = 0; q < A3S_QUOTA_COUNT; q++)
        snprintf(be->caps.why_not[q], sizeof be->caps.why_not[q],
                 "macos-seatbelt: no cgroups on macOS (a plan asking for it is refused)");
#ifdef __APPLE__
    const char *why = access(SANDBOX_EXEC, X_OK) == 0 ? NULL
                                                      : SANDBOX_EXEC " is missing or not executable";
#else
    const char *why = "macos-seatbelt runs on macOS only (" SANDBOX_EXEC "): here it describes "
                      "its profile (a3s-sandbox plan --backend macos-seatbelt) and runs nothing";
#endif
    if (why && !(be->why_unusable = a3s_strdup(why))) {
        mb_free(&be->base);
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    *out = &be->base;
    return 0;
}
