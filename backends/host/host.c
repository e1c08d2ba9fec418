/* The process-host backend (README "Fail closed"): no local boundary at all. The command runs as the
 * caller, on the host's filesystem and network, with the same deadline, bounded output,
 * sanitized environment and quotas as a sandboxed one; its kill reaches the command's
 * process group only (no pid namespace: a descendant that left the group with setsid
 * is not reached). Only an
 * explicit opt-in (allow_process_host) selects it, and every report names it. On Linux it
 * reuses the Linux run resources and supervisor (backends/linux). */
#include "host_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bwrap.h"
#include "linux_backend.h"
#include "a3s_seccomp.h"

typedef struct host_backend {
    a3s_backend base;
    a3s_backend_host h;
    char *shell;
    a3s_linux_quota quota;
} host_backend;

static void hb_free(a3s_backend *base)
{
    host_backend *be = (host_backend *)base;
    if (!be)
        return;
    free(be->shell);
    free(be->quota.root);
    free(be);
}

static const char *hb_unusable(const a3s_backend *base)
{
    (void)base;
    return NULL;
}

static const char *hb_program(const a3s_backend *base)
{
    (void)base;
    return NULL;
}

static const a3s_quota_caps *hb_quota_caps(a3s_backend *base)
{
    return a3s_linux_quota_caps(&((host_backend *)base)->quota);
}

static int hb_run_open(a3s_backend *base, a3s_backend_run **out, const char **scratch,
                       bool sweep, a3s_error *err)
{
    return a3s_linux_run_new(((host_backend *)base)->h.tmp, sweep, out, scratch, err);
}

static void hb_run_close(a3s_backend *base, a3s_backend_run *run)
{
    (void)base;
    if (!run)
        return;
    a3s_strv_free(&run->env);
    free(run->host_argv);
    free(run->host_cwd);
    if (run->host_cwd_fd >= 0)
        close(run->host_cwd_fd);
    a3s_runres_close(&run->res);
    free(run);
}

/* bash -c CMD, or bash -c 'exec "$@"' a3s-sandbox ARGV... */
static int host_argv(host_backend *be, a3s_backend_run *run, const a3s_run_spec *spec,
                     a3s_error *err)
{
    static const char *const probe_argv[] = {"true", NULL};
    char *const *argv = spec->argv ? spec->argv : spec->shell_command ? NULL
                                                                      : (char *const *)probe_argv;
    size_t m = 0;
    while (argv && argv[m])
        m++;
    char **v = calloc(m + 5, sizeof *v);
    if (!v)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    v[0] = be->shell;
    v[1] = (char *)"-c";
    if (!argv) {
        v[2] = (char *)"--"; /* a command starting with '-' is no option */
        v[3] = (char *)spec->shell_command;
    } else {
        v[2] = (char *)"exec \"$@\"";
        v[3] = (char *)"a3s-sandbox";
        memcpy(v + 4, argv, m * sizeof *v);
    }
    run->host_argv = v;
    return 0;
}

static int hb_run_prepare(a3s_backend *base, a3s_backend_run *run, const a3s_run_spec *spec,
                          a3s_error *err)
{
    host_backend *be = (host_backend *)base;
    run->plan = spec->plan;
    if (spec->ngrants)
        return a3s_fail(err, A3S_ERR_SETUP, "network grants need the native sandbox: the "
                        "process-host fallback has no network boundary to mediate");
    /* No user namespace here: a root caller's command would be host root. That is the
     * host-root opt-in's to allow, as on the native backend, never the fallback's. */
    if (geteuid() == 0 && !be->h.allow_host_root && !spec->plan->allow_host_root)
        return a3s_fail(err, A3S_ERR_SETUP,
                        "process-host would run the command as host root (no user namespace "
                        "maps it to an unprivileged id): refused unless --allow-host-root "
                        "(allow_host_root = true) is given too");
    if (a3s_runres_pin(&run->res, be->h.ws_fd, be->h.workspace, spec->scan, spec->pin, err) < 0)
        return -1;
    for (size_t i = 0; i < spec->env->n; i++)
        if (a3s_strv_push(&run->env, spec->env->v[i]) < 0)
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    /* The command starts there: opened beneath the workspace and entered by fd, so a link
     * swapped in after the check leads nowhere else. */
    if (spec->cwd) {
        if (spec->pin && (run->host_cwd_fd = a3s_linux_open_cwd(be->h.ws_fd, spec->cwd, err)) < 0)
            return -1;
        size_t n = strlen(be->h.workspace) + strlen(spec->cwd) + 2;
        if (!(run->host_cwd = malloc(n)))
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        snprintf(run->host_cwd, n, "%s/%s", be->h.workspace, spec->cwd);
    }
    return host_argv(be, run, spec, err);
}

static int hb_run_describe(a3s_backend *base, a3s_backend_run *run, json_t *extra)
{
    (void)base;
    char *sc = a3s_seccomp_describe_json(&run->plan->seccomp);
    json_error_t je;
    int rc = sc && json_object_set_new(extra, "seccomp_filter", json_loads(sc, 0, &je)) == 0
                 ? 0
                 : -1;
    free(sc);
    return rc;
}

static int hb_run_exec(a3s_backend *base, a3s_backend_run *run, const a3s_run_io *io,
                       a3s_outcome *o, a3s_error *err)
{
    host_backend *be = (host_backend *)base;
    memset(o, 0, sizeof *o);
    a3s_launch l;
    a3s_linux_launch_init(&l, run->plan, io, run->host_cwd ? run->host_cwd : be->h.workspace,
                          &run->res);
    if (run->host_cwd_fd >= 0) {
        l.use_cwd_fd = true;
        l.cwd_fd = run->host_cwd_fd;
    }
    bool refused = false;
    if (a3s_runres_quota(&run->res, &be->quota, run->plan, io->id, &l, &refused, err) < 0) {
        o->quota_refused = refused;
        return -1;
    }
    l.tty_ctty = l.tty; /* no launcher here: bash is the session leader */
    l.path = be->shell;
    l.argv = run->host_argv;
    l.envp = run->env.v;
    int rc = a3s_exec_run(&l, o, err);
    a3s_runres_quota_end(&run->res, rc == 0 ? o : NULL);
    if (rc == 0)
        o->started = true;
    o->identity = geteuid() == 0 ? "host-root" : "caller";
    return rc;
}

/* The same refusals as linux-bwrap: a plan is not weakened because it runs here. */
static int hb_plan_check(a3s_backend *base, const a3s_plan *p, bool host, a3s_error *err)
{
    return a3s_linux_plan_check(&((host_backend *)base)->h, p, host, err);
}

static const a3s_backend_ops host_ops = {
    .name = "process-host",
    .boundary = false,
    .unusable = hb_unusable,
    .program = hb_program,
    .plan_check = hb_plan_check,
    .run_open = hb_run_open,
    .scan_hooks = a3s_linux_run_scan_hooks,
    .run_prepare = hb_run_prepare,
    .run_describe = hb_run_describe,
    .run_exec = hb_run_exec,
    .run_close = hb_run_close,
    .quota_caps = hb_quota_caps,
    .probe_mediation = NULL,
    .free = hb_free,
};

int a3s_host_backend_new(const a3s_backend_host *h, a3s_backend **out, a3s_error *err)
{
    *out = NULL;
    if (a3s_linux_check_state_root(h, err) < 0)
        return -1;
    host_backend *be = calloc(1, sizeof *be);
    if (!be)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    be->base.ops = &host_ops;
    be->h = *h;
    const char *cgr = a3s_linux_getenv(h, "A3S_SANDBOX_CGROUP_ROOT");
    if ((cgr && *cgr && !(be->quota.root = a3s_strdup(cgr)))) {
        hb_free(&be->base);
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    if (a3s_bwrap_resolve_exe("/bin/bash", h->workspace, "trusted bash", &be->shell, err) < 0) {
        hb_free(&be->base);
        return -1;
    }
    *out = &be->base;
    return 0;
}
