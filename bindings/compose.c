/* The composition root: a sandbox is the engine with the Lua policy engine (policy.h)
 * and this host's backend (backend.h): linux-bwrap on Linux (or, only when the caller
 * opted in and the native boundary cannot be used here, process-host: loud, every report
 * names it, with the reason), macos-seatbelt on macOS; or the backend the caller names
 * (compose.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "a3s_sandbox.h"
#include "compose.h"
#include "instdir.h"
#include "macos_backend.h"
#ifndef __APPLE__
#include "host_backend.h"
#include "linux_backend.h"
#endif
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

#ifndef __APPLE__
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
#endif

/* The sandbox without a backend yet: the engine, the policy engine, the image guard. */
static a3s_sandbox *create(const a3s_options *opts, a3s_error *err)
{
    char *installed = a3s_instdir_policies();
    a3s_sandbox *sb = a3s_sandbox_create(opts, &a3s_lua_policy_engine, installed, err);
    free(installed);
    if (sb && protect_image(sb, err) < 0) {
        a3s_sandbox_free(sb);
        return NULL;
    }
    return sb;
}

/* Hand sb its backend, then evaluate the policy once (unless deferred) so that a broken
 * policy, or one this backend could not enforce anywhere, fails here; its paths are a
 * question for this host's runs and checks (a3s_sandbox_check), never for the digest. */
static int use(a3s_sandbox *sb, const a3s_options *opts, a3s_backend *be, const char *why,
               a3s_error *err)
{
    if (a3s_sandbox_use_backend(sb, be, why, err) < 0)
        return -1;
    return opts->defer_policy ? 0 : a3s_sandbox_evaluate(sb, false, err);
}

#ifdef __APPLE__
static const char *const known[] = {"macos-seatbelt", NULL};

static a3s_sandbox *native(const a3s_options *opts, a3s_error *err)
{
    a3s_sandbox *sb = create(opts, err);
    a3s_backend_host h;
    a3s_backend *be = NULL;
    if (!sb)
        return NULL;
    a3s_sandbox_host(sb, &h);
    if (a3s_macos_backend_new(&h, &be, err) < 0 || use(sb, opts, be, NULL, err) < 0) {
        a3s_sandbox_free(sb);
        return NULL;
    }
    return sb; /* no process-host here: an unusable boundary refuses each run */
}
#else
static const char *const known[] = {"linux-bwrap", "macos-seatbelt", "process-host", NULL};

static a3s_sandbox *native(const a3s_options *opts, a3s_error *err)
{
    a3s_sandbox *sb = create(opts, err);
    if (!sb)
        return NULL;
    a3s_backend_host h;
    a3s_sandbox_host(sb, &h);
    a3s_backend *be = NULL;
    if (a3s_linux_backend_new(&h, opts->bwrap, &be, err) < 0 || use(sb, opts, be, NULL, err) < 0)
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
#endif

const char *const *a3s_compose_backends(void)
{
    return known;
}

/* The named backend, made for sb. */
static int named(a3s_sandbox *sb, const a3s_options *opts, const char *name, a3s_error *err)
{
    a3s_backend_host h;
    a3s_sandbox_host(sb, &h);
    a3s_backend *be = NULL;
    if (!strcmp(name, "macos-seatbelt"))
        return a3s_macos_backend_new(&h, &be, err) < 0 ? -1 : use(sb, opts, be, NULL, err);
#ifndef __APPLE__
    if (!strcmp(name, "linux-bwrap"))
        return a3s_linux_backend_new(&h, opts->bwrap, &be, err) < 0
                   ? -1
                   : use(sb, opts, be, NULL, err);
    if (!strcmp(name, "process-host")) {
        if (!opts->allow_process_host)
            return a3s_fail(err, A3S_ERR_INVALID, "process-host has no sandbox boundary: it "
                            "is chosen only with the explicit opt-in (--allow-process-host)");
        return a3s_host_backend_new(&h, &be, err) < 0
                   ? -1
                   : use(sb, opts, be, "chosen by name (process-host)", err);
    }
#endif
    return a3s_fail(err, A3S_ERR_INTERNAL, "backend %s: not built here", name);
}

a3s_sandbox *a3s_compose_new(const a3s_options *opts, const char *backend, a3s_error *err)
{
    a3s_options none = {0};
    if (!opts)
        opts = &none;
    if (!backend)
        return native(opts, err);
    bool ok = false;
    for (size_t i = 0; known[i]; i++)
        ok = ok || !strcmp(known[i], backend);
    if (!ok) {
        char list[256] = "";
        for (size_t i = 0; known[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     known[i]);
        a3s_fail(err, A3S_ERR_INVALID, "unsupported platform or unknown backend '%s': this "
                 "build knows %s (a3s-sandbox runs on Linux and macOS only)", backend, list);
        return NULL;
    }
    a3s_sandbox *sb = create(opts, err);
    if (sb && named(sb, opts, backend, err) < 0) {
        a3s_sandbox_free(sb);
        return NULL;
    }
    return sb;
}

a3s_sandbox *a3s_sandbox_new(const a3s_options *opts, a3s_error *err)
{
    return a3s_compose_new(opts, NULL, err);
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
