/* The sandbox object: its construction (workspace, host roots, policy search path, the
 * policy resolved and evaluated once), accessors and policy replacement. One execution
 * is run.c; digests and grants approval.c; plan and capability reports report.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "a3s_sandbox.h"
#include "passwd.h"
#include "sandbox_int.h"
#include "update.h"
#include "util.h"
#include "wspath.h"

extern char **environ;

const char *a3s_version(void)
{
    return A3S_SANDBOX_VERSION;
}

const char *a3s_sandbox_getenv(const a3s_sandbox *sb, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < sb->host_env.n; i++)
        if (strncmp(sb->host_env.v[i], name, n) == 0 && sb->host_env.v[i][n] == '=')
            return sb->host_env.v[i] + n + 1;
    return NULL;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int push_path_list(a3s_strv *sv, const char *list)
{
    if (!list)
        return 0;
    char *copy = a3s_strdup(list);
    if (!copy)
        return -1;
    char *save = NULL;
    for (char *t = strtok_r(copy, ":", &save); t; t = strtok_r(NULL, ":", &save))
        if (t[0] == '/' && a3s_strv_push(sv, t) < 0) {
            free(copy);
            return -1;
        }
    free(copy);
    return 0;
}

void a3s_sandbox_free(a3s_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->backend)
        sb->backend->ops->free(sb->backend);
    if (sb->ws_fd >= 0)
        close(sb->ws_fd);
    free(sb->workspace);
    free(sb->home);
    free(sb->tmp);
    free(sb->fallback_reason);
    free(sb->audit_path);
    free(sb->grants);
    a3s_policy_src_free(&sb->src);
    a3s_strv_free(&sb->search_path);
    a3s_strv_free(&sb->policy_path);
    free(sb->policy_spec);
    free(sb->installed_policies);
    a3s_strv_free(&sb->host_env);
    a3s_strv_free(&sb->approved_broaden);
    a3s_strv_free(&sb->also_dirs);
    a3s_strv_free(&sb->also_files);
    free(sb->ws_refusal);
    free(sb);
}

static a3s_policy_ctx host_ctx(const a3s_sandbox *sb, const char *scratch)
{
    return (a3s_policy_ctx){
        .workspace = sb->workspace,
        .scratch = scratch,
        .home = sb->home,
        .tmp = sb->tmp,
        .host_env = (const char *const *)sb->host_env.v,
        .search_path = (const char *const *)sb->search_path.v,
        .platform = "linux",
        .guard = sb->workspace,
    };
}

a3s_plan *a3s_sandbox_compile(a3s_sandbox *sb, const char *scratch, a3s_error *err)
{
    a3s_policy_ctx ctx = host_ctx(sb, scratch);
    return sb->policy->eval(&sb->src, &ctx, err);
}

a3s_plan *a3s_sandbox_compile_facts(a3s_sandbox *sb, const char *scratch,
                                    a3s_policy_facts **facts, a3s_error *err)
{
    *facts = NULL;
    if (!sb->policy->eval_facts)
        return a3s_sandbox_compile(sb, scratch, err);
    a3s_policy_ctx ctx = host_ctx(sb, scratch);
    return sb->policy->eval_facts(&sb->src, &ctx, facts, err);
}

int a3s_sandbox_facts_check(const a3s_sandbox *sb, const char *scratch,
                            const a3s_policy_facts *facts)
{
    if (!facts || !sb->policy->facts_check)
        return A3S_FACTS_HOST; /* no record: evaluate again */
    a3s_policy_ctx ctx = host_ctx(sb, scratch);
    return sb->policy->facts_check(facts, &ctx);
}

/* A policy file the command can write is refused: a run could rewrite what the next one
 * enforces. */
static int policy_outside_workspace(const a3s_sandbox *sb, const a3s_policy_src *src,
                                    a3s_error *err)
{
    char *real = realpath(src->path, NULL);
    bool inside = real && a3s_path_within(real, sb->workspace);
    free(real);
    if (inside)
        return a3s_fail(err, A3S_ERR_POLICY,
                        "policy file %s lies inside the workspace %s, where the command could "
                        "rewrite what the next run enforces: keep policies outside the workspace",
                        src->path, sb->workspace);
    return 0;
}

/* HOME (else the passwd entry's) and TMPDIR (else /tmp), canonical: the roots the policy
 * hides and where scratch dirs go. */
static int host_roots(const a3s_sandbox *sb, char **home_out, char **tmp_out, a3s_error *err)
{
    *home_out = *tmp_out = NULL;
    const char *home = a3s_sandbox_getenv(sb, "HOME");
    char *pw_home = NULL;
    if (!home || home[0] != '/') {
        if (a3s_passwd_home(getuid(), &pw_home, err) < 0)
            return -1;
        home = pw_home ? pw_home : "/nonexistent";
    }
    *home_out = realpath(home, NULL);
    if (!*home_out && !(*home_out = a3s_strdup(home))) {
        free(pw_home);
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    free(pw_home);
    const char *tmp = a3s_sandbox_getenv(sb, "TMPDIR");
    if (!tmp || tmp[0] != '/' || !is_dir(tmp))
        tmp = "/tmp";
    if (!(*tmp_out = realpath(tmp, NULL))) {
        int e = errno;
        free(*home_out);
        *home_out = NULL;
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "temporary directory %s", tmp);
    }
    return 0;
}

/* Policy search path: explicit dirs, this installation's policies (the composition root
 * finds them), the policy engine's built-in ones, then $A3S_SANDBOX_POLICY_PATH. A
 * policy directory the command can write is not a policy directory: a run could rewrite
 * what the next one enforces. Such entries leave the search path; the others are kept
 * canonical (a link re-pointed later changes nothing in this sandbox; a session checks
 * before each command that they resolve the same), and one that does not exist now is
 * dropped (the command could create it). The policy engine's built-in directory is no
 * path. Each file read is checked again (policy.h guard). -1 on ENOMEM. */
static int search_path(const a3s_sandbox *sb, a3s_strv *out, bool *dropped)
{
    a3s_strv all = {0};
    for (size_t i = 0; i < sb->policy_path.n; i++)
        if (a3s_strv_push(&all, sb->policy_path.v[i]) < 0)
            goto oom;
    if (sb->installed_policies && a3s_strv_push(&all, sb->installed_policies) < 0)
        goto oom;
    if (sb->policy->builtin_dir && a3s_strv_push(&all, sb->policy->builtin_dir) < 0)
        goto oom;
    if (push_path_list(&all, a3s_sandbox_getenv(sb, "A3S_SANDBOX_POLICY_PATH")) < 0)
        goto oom;
    *dropped = false;
    for (size_t i = 0; i < all.n; i++) {
        const char *entry = all.v[i];
        if (sb->policy->builtin_dir && !strcmp(entry, sb->policy->builtin_dir)) {
            if (a3s_strv_push(out, entry) < 0)
                goto oom;
            continue;
        }
        char *real = realpath(entry, NULL);
        if (real && !a3s_path_within(real, sb->workspace) && is_dir(real)) {
            int rc = a3s_strv_push(out, real);
            free(real);
            if (rc < 0)
                goto oom;
        } else {
            free(real);
            *dropped = true;
        }
    }
    a3s_strv_free(&all);
    return 0;
oom:
    a3s_strv_free(&all);
    return -1;
}

static bool same_strv(const a3s_strv *a, const a3s_strv *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            return false;
    return true;
}

int a3s_sandbox_roots_hold(a3s_sandbox *sb, a3s_error *err)
{
    char *home = NULL, *tmp = NULL;
    a3s_strv sp = {0};
    a3s_policy_src src = {0};
    bool dropped;
    int rc = -1;
    const char *what = NULL;
    if (host_roots(sb, &home, &tmp, err) < 0)
        return -1;
    if (search_path(sb, &sp, &dropped) < 0) {
        a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        goto out;
    }
    /* The workspace path must still name the directory the session opened (a fresh run
     * -w would take whatever is there now), and still be neither HOME nor hold it. */
    char *ws = NULL;
    int wfd = -1;
    struct stat wst;
    a3s_error werr;
    bool same_ws = a3s_wspath_open(sb->workspace, &ws, &wfd, &werr) == 0 &&
                   fstat(wfd, &wst) == 0 && !strcmp(ws, sb->workspace) &&
                   wst.st_dev == sb->ws_st.st_dev && wst.st_ino == sb->ws_st.st_ino;
    if (wfd >= 0)
        close(wfd);
    free(ws);
    char *pw_home = NULL;
    if (a3s_passwd_home(getuid(), &pw_home, err) < 0)
        goto out;
    bool home_held = a3s_sandbox_ws_holds(sb, home) || a3s_sandbox_ws_holds(sb, pw_home);
    free(pw_home);
    if (!same_ws)
        what = "the workspace path";
    else if (home_held)
        what = "the home directory (the workspace is now it, or holds it)";
    else if (strcmp(home, sb->home) || strcmp(tmp, sb->tmp))
        what = "the home or temporary directory";
    else if (!same_strv(&sp, &sb->search_path))
        what = "the policy search path";
    else if (sb->policy->resolve(sb->policy_spec, (const char *const *)sp.v, &src, err) < 0)
        goto out;
    else if (strcmp(src.path, sb->src.path) || strcmp(src.text, sb->src.text))
        what = "the policy file";
    if (what) {
        a3s_fail(err, A3S_ERR_POLICY, "%s changed since the session opened: start a new "
                 "session", what);
        goto out;
    }
    rc = 0;
out:
    free(home);
    free(tmp);
    a3s_strv_free(&sp);
    a3s_policy_src_free(&src);
    return rc;
}

a3s_sandbox *a3s_sandbox_create(const a3s_options *opts, const a3s_policy_engine *policy,
                                const char *installed_policies, a3s_error *err)
{
    a3s_options none = {0};
    if (!opts)
        opts = &none;
    a3s_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        return NULL;
    }
    sb->ws_fd = -1;
    sb->policy = policy;
    sb->allow_host_root = opts->allow_host_root;
    const char *const *env = opts->host_env ? opts->host_env : (const char *const *)environ;
    for (size_t i = 0; env && env[i]; i++)
        if (a3s_strv_push(&sb->host_env, env[i]) < 0)
            goto oom;
    if (!sb->host_env.v && a3s_strv_push(&sb->host_env, "A3S_EMPTY_ENV_=1") < 0)
        goto oom;

    if (opts->audit_path && !(sb->audit_path = a3s_strdup(opts->audit_path)))
        goto oom;
    sb->audit_fn = opts->audit_fn;
    sb->audit_ud = opts->audit_ud;

    /* Workspace: opened once, walked without trusting links a command could plant. */
    const char *ws = opts->workspace ? opts->workspace : ".";
    if (a3s_wspath_open(ws, &sb->workspace, &sb->ws_fd, err) < 0)
        goto fail;
    if (fstat(sb->ws_fd, &sb->ws_st) < 0) {
        a3s_fail_errno(err, A3S_ERR_INVALID, errno, "sandbox workspace %s", sb->workspace);
        goto fail;
    }

    /* Host roots the policy hides. */
    if (host_roots(sb, &sb->home, &sb->tmp, err) < 0)
        goto fail;
    /* HOME is where the caller's shell and tools read what they run (.bashrc, .gitconfig,
     * .ssh, .local/bin): a workspace that is HOME or holds it would let a command plant
     * what the caller runs next, outside any sandbox. Runs are refused; questions about
     * the policy (check, plan, digest, explain) are not runs. */
    char *pw_home = NULL;
    if (a3s_passwd_home(getuid(), &pw_home, err) < 0)
        goto fail;
    const char *held_home = a3s_sandbox_ws_holds(sb, sb->home)  ? sb->home
                            : a3s_sandbox_ws_holds(sb, pw_home) ? pw_home
                                                                : NULL;
    if (held_home &&
        asprintf(&sb->ws_refusal,
                 "the workspace %s is your home directory %s or holds it: a command could "
                 "write what your shell and tools run next (.bashrc, .gitconfig, .ssh, ...); "
                 "choose a project directory (-w DIR, or cd into one)",
                 sb->workspace, held_home) < 0) {
        sb->ws_refusal = NULL;
        free(pw_home);
        goto oom;
    }
    free(pw_home);
    /* The scratch dir is made there and bound by path: never where commands write.
     * (The backend refuses a workspace that holds its own state.) */
    if (a3s_path_within(sb->tmp, sb->workspace)) {
        a3s_fail(err, A3S_ERR_INVALID,
                 "the workspace %s contains the temporary directory %s, where scratch "
                 "directories and the sandbox's state directory live: choose a workspace "
                 "below it, or set TMPDIR elsewhere",
                 sb->workspace, sb->tmp);
        goto fail;
    }

    /* Kept to resolve them again (a3s_sandbox_roots_hold). */
    if (!(sb->policy_spec = a3s_strdup(opts->policy ? opts->policy : "baseline")) ||
        (installed_policies && !(sb->installed_policies = a3s_strdup(installed_policies))))
        goto oom;
    for (size_t i = 0; opts->policy_path && opts->policy_path[i]; i++)
        if (a3s_strv_push(&sb->policy_path, opts->policy_path[i]) < 0)
            goto oom;
    bool dropped = false;
    if (search_path(sb, &sb->search_path, &dropped) < 0)
        goto oom;
    if (policy->resolve(sb->policy_spec, (const char *const *)sb->search_path.v, &sb->src,
                        err) < 0) {
        if (dropped && err && strlen(err->msg) + 120 < sizeof err->msg)
            strcat(err->msg, " (policy directories inside the workspace, or missing, are not "
                             "searched: set A3S_SANDBOX_POLICY_PATH to a copy outside it)");
        goto fail;
    }
    if (policy_outside_workspace(sb, &sb->src, err) < 0)
        goto fail;
    /* Evaluated once the backend is known (a3s_sandbox_evaluate): only the backend can
     * tell which plans it could not enforce. */
    return sb;
oom:
    a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
fail:
    a3s_sandbox_free(sb);
    return NULL;
}

int a3s_sandbox_plan_check(a3s_sandbox *sb, const a3s_plan *p, bool host, a3s_error *err)
{
    a3s_backend *be = sb->backend;
    if (!be || !be->ops->plan_check)
        return 0; /* without a backend nothing runs at all */
    return be->ops->plan_check(be, p, host, err);
}

int a3s_sandbox_evaluate(a3s_sandbox *sb, bool host, a3s_error *err)
{
    /* The run's scratch dir does not exist yet: a name of its shape stands for it. */
    char *scratch = NULL;
    if (asprintf(&scratch, "%s/a3s-sandbox-XXXXXX", sb->tmp) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    a3s_plan *p = a3s_sandbox_compile(sb, scratch, err);
    free(scratch);
    if (!p)
        return -1;
    int rc = a3s_sandbox_plan_check(sb, p, host, err);
    a3s_plan_free(p);
    return rc;
}

int a3s_sandbox_check(a3s_sandbox *sb, bool neutral, a3s_error *err)
{
    char d[65];
    /* The neutral evaluation is the digest's: what an approval covers is checked too. */
    if (a3s_sandbox_base_digest(sb, d, err) < 0 ||
        (!neutral && a3s_sandbox_evaluate(sb, true, err) < 0))
        return err ? err->code : A3S_ERR_POLICY;
    return A3S_OK;
}

const char *a3s_sandbox_workspace(const a3s_sandbox *sb)
{
    return sb->workspace;
}

const char *a3s_sandbox_policy_name(const a3s_sandbox *sb)
{
    return sb->src.name;
}

const char *a3s_sandbox_policy_file(const a3s_sandbox *sb)
{
    return sb->src.path;
}

int a3s_sandbox_timeout_ceiling(a3s_sandbox *sb, int64_t *ms, a3s_error *err)
{
    /* The scratch dir a run would get does not exist yet: a name of its shape stands in
     * (as at construction), so a policy that builds rules from ctx.scratch evaluates. */
    char *scratch = NULL;
    if (asprintf(&scratch, "%s/a3s-sandbox-XXXXXX", sb->tmp) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory"), A3S_ERR_INTERNAL;
    a3s_plan *p = a3s_sandbox_compile(sb, scratch, err);
    free(scratch);
    if (!p)
        return err ? err->code : A3S_ERR_POLICY;
    *ms = p->limits.timeout_ms;
    a3s_plan_free(p);
    return A3S_OK;
}

const char *a3s_sandbox_backend(const a3s_sandbox *sb)
{
    return sb->backend ? sb->backend->ops->name : "none";
}

const char *a3s_sandbox_fallback_reason(const a3s_sandbox *sb)
{
    return sb->fallback_reason;
}

void a3s_sandbox_host(const a3s_sandbox *sb, a3s_backend_host *h)
{
    *h = (a3s_backend_host){
        .workspace = sb->workspace,
        .ws_fd = sb->ws_fd,
        .ws_st = sb->ws_st,
        .tmp = sb->tmp,
        .host_env = (const char *const *)sb->host_env.v,
        .allow_host_root = sb->allow_host_root,
    };
}

int a3s_sandbox_use_backend(a3s_sandbox *sb, a3s_backend *be, const char *fallback_reason,
                            a3s_error *err)
{
    char *why = NULL;
    if (fallback_reason && !(why = a3s_strdup(fallback_reason))) {
        be->ops->free(be);
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    if (sb->backend)
        sb->backend->ops->free(sb->backend);
    sb->backend = be;
    free(sb->fallback_reason);
    sb->fallback_reason = why;
    return 0;
}

int a3s_sandbox_replace_policy(a3s_sandbox *sb, const char *policy, bool allow_broadening,
                               a3s_error *err)
{
    if (!policy)
        return a3s_fail(err, A3S_ERR_INVALID, "replace_policy: no policy given"), A3S_ERR_INVALID;
    /* A session runs the policy it was opened with: never another one under it. */
    if (sb->sessions > 0)
        return a3s_fail(err, A3S_ERR_INVALID, "replace_policy: the sandbox has open sessions; "
                        "close them first"),
               A3S_ERR_INVALID;
    a3s_policy_src next_src = {0};
    if (sb->policy->resolve(policy, (const char *const *)sb->search_path.v, &next_src, err) < 0)
        return err ? err->code : A3S_ERR_POLICY;
    if (policy_outside_workspace(sb, &next_src, err) < 0) {
        a3s_policy_src_free(&next_src);
        return err ? err->code : A3S_ERR_POLICY;
    }
    /* Both evaluated against one context, so only the policies differ. */
    char *scratch = NULL;
    a3s_plan *cur = NULL, *next = NULL;
    int rc = A3S_ERR_INTERNAL;
    if (asprintf(&scratch, "%s/a3s-sandbox-XXXXXX", sb->tmp) < 0) {
        a3s_fail(err, rc, "out of memory");
        goto out;
    }
    if (!(cur = a3s_sandbox_compile(sb, scratch, err))) {
        rc = err ? err->code : A3S_ERR_POLICY;
        goto out;
    }
    a3s_policy_src saved = sb->src;
    sb->src = next_src;
    next = a3s_sandbox_compile(sb, scratch, err);
    sb->src = saved;
    /* A policy no run could enforce is not switched to: the runs would all be refused. */
    if (!next || a3s_sandbox_plan_check(sb, next, false, err) < 0) {
        rc = err ? err->code : A3S_ERR_POLICY;
        goto out;
    }
    char why[512];
    if (!allow_broadening && a3s_plan_broadens(cur, next, why, sizeof why)) {
        rc = A3S_ERR_POLICY;
        a3s_fail(err, rc, "policy update broadens the sandbox: %s (%s -> %s); set "
                 "allow_broadening to accept it", why, cur->name, next->name);
        goto out;
    }
    char *spec = a3s_strdup(policy);
    if (!spec) {
        rc = A3S_ERR_INTERNAL;
        a3s_fail(err, rc, "out of memory");
        goto out;
    }
    free(sb->policy_spec);
    sb->policy_spec = spec;
    a3s_policy_src_free(&sb->src);
    sb->src = next_src;
    memset(&next_src, 0, sizeof next_src);
    sb->digest[0] = '\0'; /* a new policy, a new digest */
    rc = A3S_OK;
out:
    a3s_policy_src_free(&next_src);
    a3s_plan_free(cur);
    a3s_plan_free(next);
    free(scratch);
    return rc;
}
