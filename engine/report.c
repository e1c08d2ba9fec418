/* What the sandbox says about itself: the live probe, the plan as JSON (and explained),
 * and the capability report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain.h"
#include "json.h"
#include "sandbox_int.h"
#include "util.h"

#define PROBE_MARKER "a3s-native-sandbox-ready"
#define PROBE_TIMEOUT_MS 30000

static int run_probe(a3s_sandbox *sb, const char **identity, a3s_error *err)
{
    static const char *const argv[] = {"printf", "%s", PROBE_MARKER, NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = argv;
    req.timeout_ms = PROBE_TIMEOUT_MS;
    a3s_result r;
    a3s_error xerr = {0};
    sb->probing = true;
    int rc = a3s_sandbox_exec(sb, &req, &r, &xerr);
    sb->probing = false;
    if (rc != A3S_OK)
        return a3s_fail(err, rc, "sandbox probe failed: %s", xerr.msg);
    bool good = r.has_exit_code && r.exit_code == 0 && !r.timed_out &&
                strcmp(r.stdout_text, PROBE_MARKER) == 0;
    if (identity)
        *identity = r.identity;
    if (!good)
        a3s_fail(err, A3S_ERR_SETUP,
                 "sandbox probe failed: exit %d%s, stdout '%.200s', stderr '%.400s'",
                 r.has_exit_code ? r.exit_code : -1, r.timed_out ? " (timed out)" : "",
                 r.stdout_text, r.stderr_text);
    a3s_result_free(&r);
    return good ? 0 : -1;
}

int a3s_sandbox_probe(a3s_sandbox *sb, a3s_error *err)
{
    if (sb->backend && !sb->backend->ops->boundary)
        return a3s_fail(err, A3S_ERR_SETUP, "no local boundary: %s",
                        sb->fallback_reason ? sb->fallback_reason : "process-host"),
               A3S_ERR_SETUP;
    return run_probe(sb, NULL, err) < 0 ? (err ? err->code : A3S_ERR_SETUP) : A3S_OK;
}

/* Push every string of sv (host bytes) onto a; -1 on ENOMEM. */
static int push_strv(json_t *a, const a3s_strv *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        if (a3s_json_push(a, a3s_json_cstr(sv->v[i])) < 0)
            return -1;
    return 0;
}

char *a3s_sandbox_plan_json(a3s_sandbox *sb, a3s_error *err)
{
    a3s_prepared pp;
    if (a3s_sandbox_prepare(sb, NULL, false, &pp, err) < 0)
        return NULL;
    /* Every member is checked: a failure fails the whole plan (never a plan missing a
     * member, an argv entry or a pin); host text goes through a3s_json_str. */
    json_t *extra = json_object(), *pins = json_array(), *env = json_array();
    char *extra_s = NULL, *out = NULL;
    bool ok = push_strv(pins, &pp.scan.missing_dirs) == 0 &&
              push_strv(pins, &pp.scan.missing_files) == 0 && push_strv(env, &pp.env) == 0;
    /* a3s_json_set takes the value whatever happens: forget each one once passed. */
    if (ok) {
        ok = a3s_json_set(extra, "pins", pins) == 0;
        pins = NULL;
    }
    if (ok) {
        ok = a3s_json_set(extra, "env_result", env) == 0;
        env = NULL;
    }
    ok = ok && a3s_json_set(extra, "policy_digest", a3s_json_cstr(pp.digest)) == 0 &&
         a3s_json_set(extra, "digest", a3s_json_cstr(pp.digest)) == 0 && /* the one that counts */
         a3s_json_set(extra, "backend", a3s_json_cstr(a3s_sandbox_backend(sb))) == 0 &&
         a3s_json_set(extra, "network_grants", a3s_sandbox_grants_json(sb, NULL)) == 0 &&
         (!sb->ngrants || a3s_json_set(extra, "network", json_string("mediated")) == 0) &&
         sb->backend->ops->run_describe(sb->backend, pp.run, extra) == 0;
    if (ok)
        extra_s = json_dumps(extra, JSON_COMPACT);
    if (extra_s)
        out = a3s_plan_json(pp.plan, pp.scan.rules, pp.scan.nrules, extra_s);
    if (!out)
        a3s_fail(err, A3S_ERR_INTERNAL, "plan: out of memory");
    free(extra_s);
    json_decref(pins);
    json_decref(env);
    json_decref(extra);
    a3s_sandbox_prepared_free(sb, &pp);
    return out;
}

char *a3s_sandbox_plan_explain(a3s_sandbox *sb, a3s_error *err)
{
    char *json = a3s_sandbox_plan_json(sb, err);
    if (!json)
        return NULL;
    char *text = a3s_plan_explain(json);
    free(json);
    if (!text)
        a3s_fail(err, A3S_ERR_INTERNAL, "plan: out of memory");
    return text;
}

/* The backend's mediation probe runs through the whole pipeline, with exactly the one
 * probe grant in place of the sandbox's own. */
static char *granted_run(void *ud, const char *shell_command, const a3s_grant *g)
{
    a3s_sandbox *sb = ud;
    a3s_grant *saved = sb->grants;
    size_t nsaved = sb->ngrants;
    sb->grants = (a3s_grant *)g;
    sb->ngrants = 1;
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.shell_command = shell_command;
    req.timeout_ms = PROBE_TIMEOUT_MS;
    a3s_result r;
    a3s_error xerr = {0};
    char *out = NULL;
    if (a3s_sandbox_exec(sb, &req, &r, &xerr) == A3S_OK) {
        out = r.stdout_text ? a3s_strdup(r.stdout_text) : NULL;
        a3s_result_free(&r);
    }
    sb->grants = saved;
    sb->ngrants = nsaved;
    return out;
}

char *a3s_sandbox_capabilities_json(a3s_sandbox *sb, a3s_error *err)
{
    char digest[65];
    if (a3s_sandbox_digest(sb, digest, err) != A3S_OK)
        return NULL;
    a3s_error perr = {0};
    const char *identity = NULL;
    const a3s_backend *be = sb->backend;
    bool usable = be->ops->boundary && run_probe(sb, &identity, &perr) == 0;
    bool m_http = false, m_socks = false;
    if (usable && be->ops->probe_mediation)
        be->ops->probe_mediation(sb->backend, granted_run, sb, &m_http, &m_socks);
    const a3s_quota_caps *qc = sb->backend->ops->quota_caps(sb->backend);
    json_t *caps = json_pack(
        "{s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b}",
        "network_deny_all", usable, "private_network_namespace", usable,
        "readonly_host_root", usable, "seccomp_filter", usable, "pid_namespace", usable,
        "deadline_kill_tree", 1, "output_limit", 1, "environment_sanitized", 1,
        "mediated_http", m_http, "mediated_socks", m_socks, "unix_socket_allowlist", 0,
        "resource_process_limit", qc->can[A3S_QUOTA_PIDS], "resource_memory_limit",
        qc->can[A3S_QUOTA_MEMORY], "resource_cpu_limit", qc->can[A3S_QUOTA_CPU],
        "resource_file_size_limit", 1);
    const char *keys[] = {"network_deny_all", "private_network_namespace", "readonly_host_root",
                          "seccomp_filter", "pid_namespace", "mediated_http", "mediated_socks",
                          "unix_socket_allowlist", "resource_process_limit",
                          "resource_memory_limit", "resource_cpu_limit", "deadline_kill_tree",
                          "output_limit", "environment_sanitized", "resource_file_size_limit"};
    /* Every member is checked (a failure fails the report, never drops a member); host
     * text (policy name, paths, reasons) goes through a3s_json_str. */
    json_t *o = json_object(), *unavail = json_array(), *quotas = json_object();
    bool ok = caps != NULL;
    /* What this backend never provides is reported false, whatever the engine does. */
    for (size_t i = 0; ok && be->ops->not_provided && be->ops->not_provided[i]; i++)
        ok = json_object_get(caps, be->ops->not_provided[i]) &&
             json_object_set_new(caps, be->ops->not_provided[i], json_false()) == 0;
    for (size_t i = 0; ok && i < sizeof keys / sizeof keys[0]; i++)
        if (!json_is_true(json_object_get(caps, keys[i])))
            ok = a3s_json_push(unavail, json_string(keys[i])) == 0;
    /* Per quota: how it is enforced here, or why it cannot be. */
    static const char *const qnames[A3S_QUOTA_COUNT] = {"processes", "memory_bytes",
                                                        "cpu_millicores"};
    for (int q = 0; ok && q < A3S_QUOTA_COUNT; q++) {
        json_t *e = json_object();
        ok = a3s_json_set(e, "enforceable", json_boolean(qc->can[q])) == 0 &&
             a3s_json_set(e, qc->can[q] ? "via" : "why_not",
                          a3s_json_cstr(qc->can[q] ? qc->via[q] : qc->why_not[q])) == 0;
        if (ok)
            ok = a3s_json_set(quotas, qnames[q], e) == 0;
        else
            json_decref(e);
    }
    static const char *const rlimit_quotas[] = {"file_size_bytes", "nofile", "core_bytes"};
    for (size_t i = 0; ok && i < sizeof rlimit_quotas / sizeof rlimit_quotas[0]; i++)
        ok = a3s_json_set(quotas, rlimit_quotas[i],
                          json_pack("{s:b, s:s}", "enforceable", 1, "via", "rlimit")) == 0;
    ok = ok && a3s_json_set(o, "backend", a3s_json_cstr(a3s_sandbox_backend(sb))) == 0 &&
         a3s_json_set(o, "policy", a3s_json_cstr(sb->src.name)) == 0 &&
         a3s_json_set(o, "policy_digest", a3s_json_cstr(digest)) == 0 &&
         a3s_json_set(o, "version", a3s_json_cstr(A3S_SANDBOX_VERSION)) == 0 &&
         a3s_json_set(o, "boundary_usable", json_boolean(usable)) == 0 &&
         (usable || a3s_json_set(o, "reason", a3s_json_cstr(!be->ops->boundary
                                                                ? sb->fallback_reason
                                                                : perr.msg)) == 0) &&
         (!be->ops->program(be) ||
          a3s_json_set(o, "bwrap", a3s_json_cstr(be->ops->program(be))) == 0) &&
         /* Who commands run as on the host: "caller", "mapped" (root callers: an
          * unprivileged id, via idmapped mounts) or "host-root" (only with
          * allow_host_root). */
         (!identity || a3s_json_set(o, "identity", a3s_json_cstr(identity)) == 0);
    /* a3s_json_set takes the value whatever happens: forget each one once passed. */
    if (ok) {
        ok = a3s_json_set(o, "capabilities", caps) == 0;
        caps = NULL;
    }
    if (ok) {
        ok = a3s_json_set(o, "unavailable", unavail) == 0;
        unavail = NULL;
    }
    if (ok) {
        ok = a3s_json_set(o, "quotas", quotas) == 0;
        quotas = NULL;
    }
    char *s = ok ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(caps);
    json_decref(unavail);
    json_decref(quotas);
    json_decref(o);
    if (!s)
        a3s_fail(err, A3S_ERR_INTERNAL, "capabilities: out of memory");
    return s;
}
