/* The linux-bwrap backend (backend.h): a frozen plan becomes a bubblewrap command line,
 * setup records for the trusted setup step, a seccomp filter, and, for grants, a relay
 * inside and a mediator outside. This file: the backend object (trusted programs, the
 * root callers' mapped identity, quota capabilities) and preparing a run; running it is
 * backend_exec.c. */
#include "linux_backend.h"
#include "trace.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bwrap.h"
#include "helpers.h"
#include "json.h"
#include "protocol.h"
#include "a3s_seccomp.h"
#include "ahead.h"
#include "stale.h"

static const char *getenv_of(const a3s_backend_host *h, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; h->host_env && h->host_env[i]; i++)
        if (!strncmp(h->host_env[i], name, n) && h->host_env[i][n] == '=')
            return h->host_env[i] + n + 1;
    return NULL;
}

const char *a3s_linux_getenv(const a3s_backend_host *h, const char *name)
{
    return getenv_of(h, name);
}

int a3s_linux_check_cwd(int ws_fd, const char *cwd, a3s_error *err)
{
    int fd = a3s_linux_open_cwd(ws_fd, cwd, err);
    if (fd < 0)
        return -1;
    (void)close(fd);
    return 0;
}

int a3s_linux_open_cwd(int ws_fd, const char *cwd, a3s_error *err)
{
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    int fd = -1;
    /* RESOLVE_* lookups return EAGAIN when a rename raced with them: retry a little. */
    for (int i = 0; i < 64; i++) {
        fd = (int)syscall(SYS_openat2, ws_fd, cwd, &how, sizeof how);
        if (fd >= 0 || errno != EAGAIN)
            break;
    }
    if (fd >= 0)
        return fd;
    const char *why = errno == ENOENT    ? "does not exist in the workspace"
                      : errno == ENOTDIR ? "is not a directory"
                      : errno == EXDEV   ? "leads out of the workspace"
                                         : strerror(errno);
    return a3s_fail(err, A3S_ERR_INVALID, "exec: the working directory '%s' %s", cwd, why);
}

/* The workspace must not hold the state records (pins, scratch owners) that later runs
 * act on: a command could forge them. */
int a3s_linux_check_state_root(const a3s_backend_host *h, a3s_error *err)
{
    const char *state_root = a3s_stale_root(h->tmp);
    if (a3s_path_within(state_root, h->workspace) ||
        a3s_path_within(a3s_stale_fallback_root(), h->workspace))
        return a3s_fail(err, A3S_ERR_INVALID,
                        "the workspace %s contains the temporary directory %s or the sandbox's "
                        "state directory in %s: choose a workspace below them, or set TMPDIR "
                        "elsewhere",
                        h->workspace, h->tmp, state_root);
    return 0;
}

/* ---- the backend object --------------------------------------------------------------- */

static void lb_free(a3s_backend *base)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    if (!be)
        return;
    a3s_rootid_close(&be->rootid);
    free(be->rootid_error);
    free(be->bwrap);
    free(be->shell);
    free(be->launcher);
    free(be->relay);
    free(be->relay_why);
    free(be->mediator);
    for (size_t i = 0; i < sizeof be->image / sizeof be->image[0]; i++)
        if (be->image[i] >= 0)
            close(be->image[i]);
    free(be->mediator_why);
    free(be->why_unusable);
    free(be->quota.root);
    free(be);
}

static const char *lb_unusable(const a3s_backend *base)
{
    return ((const a3s_linux_backend *)base)->why_unusable;
}

static const char *lb_program(const a3s_backend *base)
{
    return ((const a3s_linux_backend *)base)->bwrap;
}

static const a3s_quota_caps *lb_quota_caps(a3s_backend *base)
{
    return a3s_linux_quota_caps(&((a3s_linux_backend *)base)->quota);
}

/* A helper program given by path ($ENV, for tests and debugging), resolved and vetted:
 * absolute, executable, never from the workspace, which the command can rewrite. 0 with
 * *out NULL when none is given: the embedded image is used. */
static int helper_override(const a3s_backend_host *h, const char *env, const char *what,
                           char **out, a3s_error *err)
{
    *out = NULL;
    const char *p = getenv_of(h, env);
    if (!p || !*p)
        return 0;
    return a3s_bwrap_resolve_exe(p, h->workspace, what, out, err);
}

int a3s_linux_image(a3s_linux_backend *be, int h, a3s_error *err)
{
    /* Above the fixed numbers of every protocol (protocol.h): no dup2 placing another fd
     * in a child can overwrite it before it is used. */
    if (be->image[h] < 0)
        be->image[h] = a3s_helpers_memfd((a3s_helper)h, A3S_FD_RELAY_IMAGE + 1, err);
    return be->image[h];
}

/* ---- one run ---------------------------------------------------------------------------- */

int a3s_linux_run_new(const char *tmp, bool sweep, a3s_backend_run **out, const char **scratch,
                      a3s_error *err)
{
    a3s_backend_run *run = calloc(1, sizeof *run);
    if (!run)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    run->ws_mnt = run->scratch_mnt = run->host_cwd_fd = run->held_mnt = run->late_pidfd = -1;
    run->ahead = (a3s_warm)A3S_WARM_NONE;
    if (a3s_runres_open(&run->res, tmp, sweep, err) < 0) {
        free(run);
        return -1;
    }
    *out = run;
    *scratch = run->res.scratch;
    return 0;
}

const a3s_scan_hooks *a3s_linux_run_scan_hooks(a3s_backend_run *run)
{
    return &run->res.hooks;
}

static int lb_run_open(a3s_backend *base, a3s_backend_run **out, const char **scratch,
                       bool sweep, a3s_error *err)
{
    return a3s_linux_run_new(((a3s_linux_backend *)base)->h.tmp, sweep, out, scratch, err);
}

static void lb_run_close(a3s_backend *base, a3s_backend_run *run)
{
    (void)base;
    if (!run)
        return;
    a3s_warm_discard(&run->ahead); /* a sandbox started for a run that never executed */
    a3s_strv_free(&run->setup);
    a3s_strv_free(&run->host);
    a3s_strv_free(&run->env);
    a3s_strv_free(&run->args);
    a3s_strv_free(&run->cmd);
    free(run->identity_note);
    if (run->ws_mnt >= 0)
        close(run->ws_mnt);
    if (run->scratch_mnt >= 0)
        close(run->scratch_mnt);
    if (run->held_mnt >= 0)
        close(run->held_mnt); /* the command's mounts torn down now, all at once */
    if (run->late_pidfd >= 0) {
        /* Its launcher, done with a command that ended: it exits on its own. */
        siginfo_t si;
        while (waitid((idtype_t)P_PIDFD, (id_t)run->late_pidfd, &si, WEXITED) < 0 &&
               errno == EINTR) {
        }
        close(run->late_pidfd);
    }
    a3s_runres_close(&run->res);
    free(run);
}

static void lb_run_settle(a3s_backend *base, a3s_backend_run *run)
{
    (void)base;
    if (run)
        a3s_runres_settle(&run->res);
}

/* Mediated runs: the command reaches the relay's loopback proxies; whatever the policy
 * and the request said about proxies, these are the only ones (README "Network grants"). */
static int set_proxy_env(a3s_strv *env)
{
    static const char *const drop[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
                                       "http_proxy", "https_proxy", "all_proxy", "no_proxy"};
    size_t w = 0;
    for (size_t i = 0; i < env->n; i++) {
        bool keep = true;
        for (size_t d = 0; d < sizeof drop / sizeof drop[0]; d++) {
            size_t n = strlen(drop[d]);
            if (!strncmp(env->v[i], drop[d], n) && env->v[i][n] == '=')
                keep = false;
        }
        if (keep)
            env->v[w++] = env->v[i];
        else
            free(env->v[i]);
    }
    env->n = w;
    if (env->v)
        env->v[w] = NULL;
    const char *http = "http://" A3S_RELAY_HTTP, *socks = "socks5://" A3S_RELAY_SOCKS;
    if (a3s_strv_pushf(env, "HTTP_PROXY=%s", http) < 0 ||
        a3s_strv_pushf(env, "HTTPS_PROXY=%s", http) < 0 ||
        a3s_strv_pushf(env, "http_proxy=%s", http) < 0 ||
        a3s_strv_pushf(env, "https_proxy=%s", http) < 0 ||
        a3s_strv_pushf(env, "ALL_PROXY=%s", socks) < 0 ||
        a3s_strv_pushf(env, "all_proxy=%s", socks) < 0 || a3s_strv_push(env, "NO_PROXY=") < 0 ||
        a3s_strv_push(env, "no_proxy=") < 0)
        return -1;
    return 0;
}

/* The mapped identity's user namespaces (rootid.h), made once per backend for root
 * callers; what failed is kept in be->rootid_error. -1 with err only for an unusable
 * A3S_SANDBOX_MAPPED_ID. */
static int rootid_once(a3s_linux_backend *be, a3s_error *err)
{
    a3s_error e = {0};
    if (!be->rootid_tried) {
        uint32_t id = A3S_MAPPED_ID_DEFAULT;
        const char *env = getenv_of(&be->h, "A3S_SANDBOX_MAPPED_ID");
        if (env && *env) {
            char *end;
            unsigned long v = strtoul(env, &end, 10);
            /* Not tried: every run says so again (never a rootid that was not opened). */
            if (*end || v == 0 || v >= 0xFFFFFFFFul)
                return a3s_fail(err, A3S_ERR_INVALID,
                                "A3S_SANDBOX_MAPPED_ID=%s is not a usable uid", env);
            id = (uint32_t)v;
        }
        be->rootid_tried = true;
        if (a3s_rootid_open(&be->rootid, id, &e) < 0 &&
            !(be->rootid_error = a3s_strdup(e.msg)))
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    return 0;
}

/* Root callers: the command runs under an unprivileged host id, with the workspace and
 * the scratch dir as idmapped mounts (rootid.h). Where that cannot be done, the run is
 * refused unless host root was allowed. Other callers run as themselves. */
static int mapped_identity(a3s_linux_backend *be, a3s_backend_run *run, const a3s_plan *p,
                           a3s_error *err)
{
    if (geteuid() != 0)
        return 0;
    a3s_error e = {0};
    if (rootid_once(be, err) < 0)
        return -1;
    if (!be->rootid_error) {
        bool ro = true;
        for (size_t i = 0; i < p->nfs; i++)
            if (!strcmp(p->fs[i].path, be->h.workspace) && p->fs[i].kind == A3S_FS_RW)
                ro = false;
        run->ws_mnt =
            a3s_rootid_clone(&be->rootid, be->h.ws_fd, "workspace", be->h.workspace, ro, &e);
        if (run->ws_mnt >= 0)
            run->scratch_mnt = a3s_rootid_clone(&be->rootid, run->res.scratch_fd,
                                                "scratch directory", run->res.scratch, false, &e);
        if (run->ws_mnt >= 0 && run->scratch_mnt >= 0) {
            run->mapped = true;
            return 0;
        }
    } else {
        a3s_fail(&e, A3S_ERR_SETUP, "%s", be->rootid_error);
    }
    if (be->h.allow_host_root || p->allow_host_root)
        return 0; /* reported as identity "host-root" */
    *err = e;
    return -1;
}

/* A fresh run's sandbox, started while the engine prepares the run (ahead.h). Best
 * effort: what is not started here, run_exec starts as before. Not with a launcher given
 * by path, nor when A3S_SANDBOX_AHEAD is "0". */
static void lb_run_ahead(a3s_backend *base, a3s_backend_run *run)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    const char *off = getenv_of(&be->h, "A3S_SANDBOX_AHEAD");
    if (be->why_unusable || !be->bwrap || be->launcher || run->ahead.pid > 0 ||
        (off && !strcmp(off, "0")))
        return;
    a3s_error e = {0};
    /* The identity the run will have: mapped for a root caller whose user namespaces
     * could be made (a run that ends up otherwise discards this sandbox). */
    bool mapped = geteuid() == 0 && rootid_once(be, &e) == 0 && !be->rootid_error;
    int img = a3s_linux_image(be, A3S_HELPER_LAUNCH, &e);
    a3s_ahead_spec spec = {.bwrap = be->bwrap, .launcher_img = -1, .userns = -1,
                           .tag = a3s_stale_run_tag(run->res.rec), .cwd = be->h.workspace};
    if (img < 0 || (spec.launcher_img = fcntl(img, F_DUPFD_CLOEXEC, 0)) < 0 ||
        (mapped && (spec.userns = fcntl(be->rootid.sandbox_ns, F_DUPFD_CLOEXEC, 0)) < 0)) {
        if (spec.launcher_img >= 0)
            close(spec.launcher_img);
        return;
    }
    if (a3s_ahead_start(&run->ahead, &spec, &e) < 0)
        return;
    a3s_runres_record_pid(run->res.rec, run->ahead.pid);
    run->ahead_mapped = mapped;
    a3s_trace_mark("sandbox started ahead");
}

static int copy_env(a3s_strv *dst, const a3s_strv *src, a3s_error *err)
{
    for (size_t i = 0; i < src->n; i++)
        if (a3s_strv_push(dst, src->v[i]) < 0)
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    return 0;
}

/* Pins (when asked), the mapped identity, the environment (with the relay's proxies when
 * mediated) and bwrap's arguments and setup records. The plan is only read. */
static int lb_run_prepare(a3s_backend *base, a3s_backend_run *run, const a3s_run_spec *spec,
                          a3s_error *err)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    const a3s_plan *p = spec->plan;
    run->plan = p;
    if (a3s_runres_pin(&run->res, be->h.ws_fd, be->h.workspace, spec->scan, spec->pin, err) < 0 ||
        copy_env(&run->env, spec->env, err) < 0)
        return -1;
    a3s_trace_mark("  pins");
    static const char *const probe_argv[] = {"true", NULL};
    /* A plan that is only described needs no boundary: where the mapped identity cannot
     * be had here (no user namespaces, no idmapped mounts), it shows the unmapped command
     * line and says why (run_describe). A configuration error is an error all the same. */
    a3s_error merr = {0};
    if (mapped_identity(be, run, p, &merr) < 0) {
        if (spec->pin || merr.code == A3S_ERR_INVALID) {
            *err = merr;
            return -1;
        }
        if (!(run->identity_note = a3s_strdup(merr.msg)))
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    a3s_trace_mark("  mapped identity");
    /* Running needs a usable launcher (lb_unusable refuses before this); describing a
     * plan names it. */
    if (be->why_unusable && spec->pin)
        return a3s_fail(err, A3S_ERR_SETUP, "%s", be->why_unusable);
    a3s_bwrap_cmd cmd = {
        .shell = be->shell,
        .launcher = be->launcher ? be->launcher : A3S_FD_PATH(A3S_FD_LAUNCHER_IMAGE),
        .ws_dev = be->h.ws_st.st_dev,
        .ws_ino = be->h.ws_st.st_ino,
        .scratch_dev = run->res.scratch_st.st_dev,
        .scratch_ino = run->res.scratch_st.st_ino,
        .scan = spec->scan,
        .more = run->res.more,
        .nmore = run->res.nmore,
        .mapped = run->mapped,
        .uid = getuid(),
        .gid = getgid(),
        .tag = spec->pin ? a3s_stale_run_tag(run->res.rec) : NULL,
        .join = spec->session != NULL,
        .scratch_src = run->res.scratch,
    };
    run->session = spec->session;
    if (spec->session && spec->ngrants)
        return a3s_fail(err, A3S_ERR_SETUP, "a session cannot hold network grants yet");
    if (spec->ngrants) {
        if (be->relay_why)
            return a3s_fail(err, A3S_ERR_SETUP, "network grants need a3s-sandbox-relay: %s",
                            be->relay_why);
        run->mediated = true;
        run->grants = spec->grants;
        run->ngrants = spec->ngrants;
        if (set_proxy_env(&run->env) < 0)
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        cmd.relay = be->relay ? be->relay : A3S_FD_PATH(A3S_FD_RELAY_IMAGE);
    }
    /* The setup step enters it inside the sandbox, below the workspace mount; checking
     * it here first gives the caller a refusal that says why. */
    if (spec->cwd) {
        if (spec->pin && a3s_linux_check_cwd(be->h.ws_fd, spec->cwd, err) < 0)
            return -1;
        cmd.cwd = spec->cwd;
    }
    if (spec->argv)
        cmd.argv = spec->argv;
    else if (spec->shell_command)
        cmd.shell_command = spec->shell_command;
    else
        cmd.argv = (char *const *)probe_argv;
    return a3s_bwrap_build_args(p, &run->env, &cmd, &run->args, &run->host, &run->cmd,
                                &run->setup, err);
}

static int lb_run_describe(a3s_backend *base, a3s_backend_run *run, json_t *extra)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    char *argv = a3s_bwrap_args_json(be->bwrap ? be->bwrap : "bwrap", &run->args, &run->cmd);
    /* The mounts outside the workspace the setup step makes first, in bwrap's syntax. */
    char *host = a3s_bwrap_args_json(NULL, &run->host, NULL);
    char *sc = a3s_seccomp_describe_json(&run->plan->seccomp);
    json_error_t je;
    int rc = argv && host && sc &&
                     a3s_json_set(extra, "bwrap_argv", json_loads(argv, 0, &je)) == 0 &&
                     a3s_json_set(extra, "setup_mounts", json_loads(host, 0, &je)) == 0 &&
                     a3s_json_set(extra, "seccomp_filter", json_loads(sc, 0, &je)) == 0 &&
                     (!run->identity_note ||
                      a3s_json_set(extra, "mapped_identity_unavailable",
                                   a3s_json_cstr(run->identity_note)) == 0)
                 ? 0
                 : -1;
    free(argv);
    free(host);
    free(sc);
    return rc;
}

/* Mediated network, proven live: a run with a probe grant whose command asks the relay's
 * HTTP proxy for a host that is not granted (the mediator must answer 403, without any
 * lookup) and greets its SOCKS5 port (the mediator must accept "no authentication"). */
static void lb_probe_mediation(a3s_backend *base, a3s_granted_run_fn fn, void *ud, bool *http,
                               bool *socks)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    *http = *socks = false;
    if (be->why_unusable || be->relay_why || be->mediator_why)
        return;
    a3s_grant probe = {.host = "a3s-probe.invalid", .port = 2};
    /* printf escapes, not C ones: the command text has no control bytes. */
    char *out = fn(ud,
                   "exec 3<>/dev/tcp/" A3S_RELAY_ADDR "/" A3S_RELAY_HTTP_PORT
                   " && printf 'CONNECT a3s-probe.invalid:1 HTTP/1.1\\r\\n"
                   "Host: a3s-probe.invalid:1\\r\\n\\r\\n' >&3 && head -c 12 <&3; echo;"
                   "exec 4<>/dev/tcp/" A3S_RELAY_ADDR "/" A3S_RELAY_SOCKS_PORT
                   " && printf '\\005\\001\\000' >&4 &&"
                   " head -c 2 <&4 | od -An -tx1",
                   &probe);
    *http = out && strstr(out, "HTTP/1.1 403");
    *socks = out && strstr(out, "05 00");
    free(out);
}

static int lb_plan_check(a3s_backend *base, const a3s_plan *p, bool host, a3s_error *err)
{
    return a3s_linux_plan_check(&((a3s_linux_backend *)base)->h, p, host, err);
}

/* "digests" in the state directory: checked like it (ours, not a link, 0700), so that no
 * one else's entry is ever read as ours. Plans never let a command write there
 * (plancheck.c). */
static int lb_cache_open(a3s_backend *base)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    int st = a3s_stale_state_open(a3s_stale_root(be->h.tmp), true, NULL);
    if (st < 0)
        return -1;
    if (mkdirat(st, "digests", 0700) < 0 && errno != EEXIST) {
        close(st);
        return -1;
    }
    int fd = openat(st, "digests", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(st);
    struct stat s;
    if (fd >= 0 && (fstat(fd, &s) < 0 || s.st_uid != geteuid() || (s.st_mode & 077))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static const a3s_backend_ops linux_ops = {
    .name = "linux-bwrap",
    .boundary = true,
    .unusable = lb_unusable,
    .program = lb_program,
    .plan_check = lb_plan_check,
    .run_open = lb_run_open,
    .run_ahead = lb_run_ahead,
    .scan_hooks = a3s_linux_run_scan_hooks,
    .run_prepare = lb_run_prepare,
    .run_describe = lb_run_describe,
    .run_exec = a3s_linux_run_exec,
    .run_close = lb_run_close,
    .run_settle = lb_run_settle,
    .quota_caps = lb_quota_caps,
    .probe_mediation = lb_probe_mediation,
    .session_open = a3s_linux_session_open,
    .session_close = a3s_linux_session_close,
    .session_warm = a3s_linux_session_warm,
    .session_unwarm = a3s_linux_session_unwarm,
    .cache_open = lb_cache_open,
    .free = lb_free,
};

int a3s_linux_backend_new(const a3s_backend_host *h, const char *bwrap, a3s_backend **out,
                          a3s_error *err)
{
    *out = NULL;
    if (a3s_linux_check_state_root(h, err) < 0)
        return -1;
    a3s_linux_backend *be = calloc(1, sizeof *be);
    if (!be)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    be->base.ops = &linux_ops;
    be->h = *h;
    be->rootid = (a3s_rootid)A3S_ROOTID_INIT;
    for (size_t i = 0; i < sizeof be->image / sizeof be->image[0]; i++)
        be->image[i] = -1;
    const char *cgr = getenv_of(h, "A3S_SANDBOX_CGROUP_ROOT");
    if (cgr && *cgr && !(be->quota.root = a3s_strdup(cgr)))
        goto oom;
    /* Trusted executables, never from inside the workspace. An unusable bubblewrap or
     * launcher leaves plans describable and refuses every run (lb_unusable). */
    a3s_error berr = {0};
    const char *bw = bwrap ? bwrap : getenv_of(h, "A3S_SANDBOX_BWRAP");
    if (!bw || !*bw)
        bw = "/usr/bin/bwrap";
    int brc = a3s_bwrap_resolve_exe(bw, h->workspace, "bubblewrap", &be->bwrap, &berr);
    if (a3s_bwrap_resolve_exe("/bin/bash", h->workspace, "trusted bash", &be->shell, err) < 0) {
        lb_free(&be->base);
        return -1;
    }
    if (brc == 0 && helper_override(h, "A3S_SANDBOX_LAUNCHER", "sandbox launcher",
                                    &be->launcher, &berr) < 0)
        brc = -1;
    if (brc < 0 && !(be->why_unusable = a3s_strdup(berr.msg)))
        goto oom;
    /* The relay and the mediator are needed only for grants: a path given is resolved
     * now, required when used. The mediator runs on the host with the caller's rights. */
    a3s_error rerr = {0}, merr = {0};
    if ((helper_override(h, "A3S_SANDBOX_RELAY", "network relay", &be->relay, &rerr) < 0 &&
         !(be->relay_why = a3s_strdup(rerr.msg))) ||
        (helper_override(h, "A3S_SANDBOX_MEDIATOR", "network mediator", &be->mediator, &merr) <
             0 &&
         !(be->mediator_why = a3s_strdup(merr.msg))))
        goto oom;
    *out = &be->base;
    return 0;
oom:
    lb_free(&be->base);
    return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
}
