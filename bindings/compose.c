/* The composition root: a sandbox is the engine with the Lua policy engine (policy.h)
 * and this host's backend (backend.h): linux-bwrap, or, only when the caller opted in
 * and the native boundary cannot be used here, process-host (loud: every report names
 * it, with the reason). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "a3s_sandbox.h"
#include "host_backend.h"
#include "instdir.h"
#include "linux_backend.h"
#include "policy_runtime.h"
#include "sandbox.h"
#include "util.h"

/* The running program or library reachable from the workspace: the command could replace
 * it, and the next run would execute the command's code on the host. Each top-level
 * entry on the way is protected in every run (engine/selfguard.c); process-host protects
 * nothing, so there such a workspace refuses runs (engine/run.c). */
static int protect_image(a3s_sandbox *sb, a3s_error *err)
{
    char *img = NULL;
    a3s_strv files = {0}, dirs = {0};
    int rc = a3s_instdir_guard_paths(&img, &files, &dirs) < 0
                 ? a3s_fail(err, A3S_ERR_INTERNAL, "out of memory")
                 : 0;
    for (size_t i = 0; i < files.n && rc == 0; i++)
        rc = a3s_sandbox_guard_path(sb, files.v[i], false, err);
    for (size_t i = 0; i < dirs.n && rc == 0; i++)
        rc = a3s_sandbox_guard_path(sb, dirs.v[i], true, err);
    if (rc == 0)
        rc = a3s_sandbox_guard_home_dir(sb, img, err);
    a3s_strv_free(&files);
    a3s_strv_free(&dirs);
    free(img);
    return rc;
}

/* The opt-in's question, whether the native boundary works on this host, asked in a
 * private empty workspace: nothing a workspace holds may turn a refusal into an
 * unconfined run. */
static int probe_elsewhere(const a3s_options *opts, const char *tmp, a3s_error *why)
{
    char *dir = NULL;
    if (asprintf(&dir, "%s/a3s-sandbox-probe-XXXXXX", tmp) < 0)
        return a3s_fail(why, A3S_ERR_INTERNAL, "out of memory");
    if (!mkdtemp(dir)) {
        int e = errno;
        free(dir);
        return a3s_fail_errno(why, A3S_ERR_SETUP, e, "probe: mkdtemp in %s", tmp);
    }
    a3s_options o = *opts;
    o.workspace = dir;
    o.allow_process_host = false;
    o.defer_policy = true;
    o.audit_path = NULL;
    o.audit_fn = NULL;
    a3s_sandbox *p = a3s_sandbox_new(&o, why);
    int rc = p && a3s_sandbox_probe(p, why) == A3S_OK ? 0 : -1;
    a3s_sandbox_free(p);
    (void)rmdir(dir);
    free(dir);
    return rc;
}

a3s_sandbox *a3s_sandbox_new(const a3s_options *opts, a3s_error *err)
{
    a3s_options none = {0};
    if (!opts)
        opts = &none;
    char *installed = a3s_instdir_policies();
    a3s_sandbox *sb = a3s_sandbox_create(opts, &a3s_lua_policy_engine, installed, err);
    free(installed);
    if (!sb)
        return NULL;
    if (protect_image(sb, err) < 0)
        goto fail;
    a3s_backend_host h;
    a3s_sandbox_host(sb, &h);
    a3s_backend *be = NULL;
    /* Evaluated once (unless deferred) so that a broken policy, or one this backend could
     * not enforce anywhere, fails here; its paths are a question for this host's runs and
     * checks (a3s_sandbox_check), never for the digest. */
    if (a3s_linux_backend_new(&h, opts->bwrap, &be, err) < 0 ||
        a3s_sandbox_use_backend(sb, be, NULL, err) < 0 ||
        (!opts->defer_policy && a3s_sandbox_evaluate(sb, false, err) < 0))
        goto fail;
    if (!opts->allow_process_host)
        return sb; /* an unusable boundary refuses each run, never weakens it */
    /* The opt-in: is the native boundary usable at all? A live probe says. */
    a3s_error why = {0};
    const char *unusable = be->ops->unusable(be);
    if (unusable)
        a3s_fail(&why, A3S_ERR_SETUP, "%s", unusable);
    else if (probe_elsewhere(opts, h.tmp, &why) == 0)
        return sb;
    a3s_backend *host = NULL;
    if (a3s_host_backend_new(&h, &host, err) < 0 ||
        a3s_sandbox_use_backend(sb, host, why.msg, err) < 0)
        goto fail;
    return sb;
fail:
    a3s_sandbox_free(sb);
    return NULL;
}

int a3s_policy_check(const char *policy, const char *workspace, a3s_error *err)
{
    a3s_options o = {.workspace = workspace, .policy = policy, .defer_policy = true};
    a3s_sandbox *sb = a3s_sandbox_new(&o, err);
    if (!sb)
        return err ? err->code : A3S_ERR_POLICY;
    int rc = a3s_sandbox_check(sb, false, err);
    a3s_sandbox_free(sb);
    return rc;
}
