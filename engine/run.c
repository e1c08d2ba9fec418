/* One execution: the one pipeline. Policy -> validated, frozen plan -> workspace scan (a
 * separate result) -> backend prepare -> backend run under supervision -> result. Audit
 * events along the way; the mirror's last writes once everything of the run is gone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "env.h"
#include "json.h"
#include "mirror.h"
#include "sandbox_int.h"
#include "scan.h"
#include "trace.h"
#include "util.h"

/* One run's preparation; with a session, its frozen plan (evaluated once, when the
 * session opened) stands for the policy, and the backend prepares the run in it. */
static int prepare(a3s_sandbox *sb, const a3s_exec_request *req, bool pin,
                   a3s_session_ctx *sess, a3s_policy_facts **facts, a3s_prepared *pp,
                   a3s_error *err)
{
    memset(pp, 0, sizeof *pp);
    a3s_backend *be = sb->backend;
    if (!be)
        return a3s_fail(err, A3S_ERR_SETUP, "no sandbox backend");
    a3s_trace_mark("prepare");
    if (sess && sess->spare_run) { /* opened ahead (a3s_session_warm) */
        pp->run = sess->spare_run;
        pp->scratch = sess->spare_scratch;
        sess->spare_run = NULL;
        sess->spare_scratch = NULL;
    } else if (be->ops->run_open(be, &pp->run, &pp->scratch, sess == NULL, err) < 0) {
        return -1;
    }
    a3s_trace_mark("run-open (sweeps, run record, scratch dir)");
    /* A fresh run that will execute (a session's commands have their boundary, a
     * session's own first run is never executed, a described plan runs nothing). */
    if (pin && !sess && !facts && be->ops->run_ahead)
        be->ops->run_ahead(be, pp->run);
    /* Every run evaluates the policy for the host as it is now, also a session's command
     * (what the policy reads of the host may have changed since the session opened: a
     * new file to mask). A session's commands see its scratch path, whichever directory
     * is mounted there. */
    /* A session's command: the policy the session was opened with (its file, its
     * search path, its modules, whose digest the session reports) or none. What it read
     * of the host is checked: all as it was, the session's plan; else evaluated again. */
    int fc = A3S_FACTS_HOST;
    if (sess && (a3s_sandbox_roots_hold(sb, err) < 0 ||
                 (fc = a3s_sandbox_facts_check(sb, sess->plan->scratch, sess->facts)) ==
                     A3S_FACTS_POLICY || fc == A3S_FACTS_MOUNTS)) {
        if (fc == A3S_FACTS_POLICY)
            a3s_fail(err, A3S_ERR_POLICY, "a policy file changed since the session opened: "
                     "start a new session");
        /* The session's mounts are the host's as they were when it opened (they do not
         * propagate in): a plan for the host's mounts now would not describe them. */
        if (fc == A3S_FACTS_MOUNTS)
            a3s_fail(err, A3S_ERR_POLICY, "the host's mounts changed since the session "
                     "opened (its commands keep the mounts it opened with): start a new "
                     "session");
        goto fail;
    }
    if (sess && fc == A3S_FACTS_HOLD) {
        pp->plan = (a3s_plan *)sess->plan;
        pp->plan_borrowed = true;
        a3s_trace_mark("policy (the session's: what it read holds)");
    } else {
        pp->plan = facts ? a3s_sandbox_compile_facts(sb, pp->scratch, facts, err)
                         : a3s_sandbox_compile(sb, sess ? sess->plan->scratch : pp->scratch,
                                               err);
        if (!pp->plan)
            goto fail;
        a3s_trace_mark("policy (evaluated for this host)");
    }
    if (a3s_sandbox_plan_check(sb, pp->plan, true, err) < 0 ||
        a3s_sandbox_check_broadening(sb, pp->plan, err) < 0)
        goto fail;
    if (sess) {
        /* The session's namespaces were made for its first plan: a plan that would need
         * others (the network kept or not) is refused, never run in the wrong ones. */
        if (pp->plan->network != sess->plan->network) {
            a3s_fail(err, A3S_ERR_POLICY, "the policy's network setting changed since the "
                     "session opened: start a new session");
            goto fail;
        }
        memcpy(pp->digest, sess->digest, sizeof pp->digest);
    } else if (a3s_sandbox_policy_digest(sb, pp->digest, err) < 0) {
        goto fail;
    }
    a3s_trace_mark("plan check + digest (neutral evaluation)");
    const a3s_scan_hooks *bh = be->ops->scan_hooks ? be->ops->scan_hooks(pp->run) : NULL;
    a3s_scan_hooks hooks = bh ? *bh : (a3s_scan_hooks){0};
    hooks.also_dirs = (const char *const *)sb->also_dirs.v;
    hooks.also_files = (const char *const *)sb->also_files.v;
    if (a3s_scan_workspace(pp->plan, sb->ws_fd, &hooks, &pp->scan, err) < 0)
        goto fail;
    a3s_trace_mark("workspace scan");
    if (a3s_env_compose(&pp->plan->env, (const char *const *)sb->host_env.v,
                        req ? req->env : NULL, &pp->env, err) < 0)
        goto fail;
    a3s_run_spec spec = {
        .plan = pp->plan,
        .scan = &pp->scan,
        .env = &pp->env,
        .argv = req ? (char *const *)req->argv : NULL,
        .shell_command = req ? req->shell_command : NULL,
        .cwd = req ? req->cwd : NULL,
        .grants = sb->grants,
        .ngrants = sb->ngrants,
        .pin = pin,
        .session = sess ? sess->backend : NULL,
    };
    if (be->ops->run_prepare(be, pp->run, &spec, err) < 0)
        goto fail;
    a3s_trace_mark("backend prepare (pins, mounts, seccomp, argv)");
    return 0;
fail:
    a3s_sandbox_prepared_free(sb, pp);
    return -1;
}

int a3s_sandbox_prepare(a3s_sandbox *sb, const a3s_exec_request *req, bool pin,
                        a3s_prepared *pp, a3s_error *err)
{
    return prepare(sb, req, pin, NULL, NULL, pp, err);
}

int a3s_sandbox_prepare_facts(a3s_sandbox *sb, const a3s_exec_request *req, bool pin,
                              a3s_policy_facts **facts, a3s_prepared *pp, a3s_error *err)
{
    return prepare(sb, req, pin, NULL, facts, pp, err);
}

void a3s_sandbox_prepared_free(a3s_sandbox *sb, a3s_prepared *pp)
{
    a3s_scan_result_free(&pp->scan);
    if (!pp->plan_borrowed)
        a3s_plan_free(pp->plan);
    pp->plan = NULL;
    a3s_strv_free(&pp->env);
    /* Last: the backend releases the pins, the scratch dir and the run record. */
    if (pp->run)
        sb->backend->ops->run_close(sb->backend, pp->run);
    pp->run = NULL;
    pp->scratch = NULL;
}

/* The working directory's spelling: relative and inside the workspace by its words
 * alone. Where it leads is the backend's to check, below the workspace it mounts. */
static int check_cwd(const char *cwd, a3s_error *err)
{
    if (!*cwd)
        return a3s_fail(err, A3S_ERR_INVALID,
                        "exec: the working directory is empty (\".\" is the workspace)");
    if (cwd[0] == '/')
        return a3s_fail(err, A3S_ERR_INVALID,
                        "exec: the working directory '%s' must be a path relative to the "
                        "workspace",
                        cwd);
    if (strlen(cwd) >= 4096)
        return a3s_fail(err, A3S_ERR_INVALID, "exec: the working directory is too long");
    for (const char *p = cwd; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return a3s_fail(err, A3S_ERR_INVALID,
                            "exec: the working directory '%s' must not have a '..' component",
                            cwd);
        p += n;
        p += strspn(p, "/");
    }
    return 0;
}

/* The caller's pty master: a descriptor above 2. 0, 1 and 2 mean none, so a request
 * zero-initialised without A3S_EXEC_REQUEST_INIT asks for no terminal (its fd 0 is never
 * taken for one). */
static int tty_of(const a3s_exec_request *req)
{
    return req->tty_fd > 2 ? req->tty_fd : -1;
}

static int check_request(const a3s_exec_request *req, a3s_error *err)
{
    if (!req || (!req->argv == !req->shell_command))
        return a3s_fail(err, A3S_ERR_INVALID, "exec: give exactly one of argv and a shell command");
    if (req->argv && !req->argv[0])
        return a3s_fail(err, A3S_ERR_INVALID, "exec: empty argv");
    if (req->shell_command && !req->shell_command[0])
        return a3s_fail(err, A3S_ERR_INVALID, "exec: empty command");
    if (tty_of(req) >= 0 && (req->tty_fd == req->stdin_fd || req->tty_fd == req->mirror_fd[0] ||
                             req->tty_fd == req->mirror_fd[1]))
        return a3s_fail(err, A3S_ERR_INVALID, "exec: tty_fd must be a terminal's master of "
                        "its own, not the stdin or a mirror fd");
    if (req->timeout_ms == 0)
        return a3s_fail(err, A3S_ERR_INVALID,
                        "exec: the command timeout must be greater than zero");
    for (size_t i = 0; req->env && req->env[i]; i++)
        if (a3s_env_check_entry(req->env[i], err) < 0)
            return -1;
    if (req->cwd && check_cwd(req->cwd, err) < 0)
        return -1;
    return 0;
}

/* The result's denials as JSON array text; NULL on ENOMEM (never a list missing one). */
static char *denials_json(const a3s_outcome *o, int64_t timeout_ms, const a3s_plan *p,
                          const char *med_lines)
{
    json_t *a = json_array();
    bool ok = a != NULL;
    /* The mediator's refusals, one JSON object per line, its summary (exact counts per
     * reason) last; records without a summary mean the mediator was killed early. A
     * line that does not parse (the mediator killed mid-write) is not a record. */
    bool records = false, summary = false;
    for (const char *l = med_lines; ok && l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        json_error_t je;
        json_t *d = json_loadb(l, n, 0, &je);
        if (d) {
            if (json_is_true(json_object_get(d, "summary")))
                summary = true;
            else
                records = true;
            ok = a3s_json_push(a, d) == 0;
        }
        l += n + (nl ? 1 : 0);
    }
    /* Every record below is engine text (ASCII): json_pack fails only on ENOMEM, and
     * a3s_json_push turns that into a failure of the whole list. */
    if (ok && records && !summary)
        ok = a3s_json_push(a, json_pack("{s:s, s:b, s:b}", "kind", "network", "summary", 1,
                                        "incomplete", 1)) == 0;
    if (ok && o->timed_out)
        ok = a3s_json_push(a, json_pack("{s:s, s:s, s:I}", "kind", "deadline", "target",
                                        "<process-tree>", "limit_ms",
                                        (json_int_t)timeout_ms)) == 0;
    if (ok && o->cap && a3s_capture_truncated(o->cap))
        ok = a3s_json_push(a, json_pack("{s:s, s:s, s:I}", "kind", "output_limit", "target",
                                        "<output>", "limit_bytes",
                                        (json_int_t)p->limits.output_bytes)) == 0;
    if (ok && o->oom_kills)
        ok = a3s_json_push(a, json_pack("{s:s, s:s, s:s, s:I, s:I}", "kind", "quota",
                                        "resource", "memory", "event", "oom_kill", "count",
                                        (json_int_t)o->oom_kills, "limit_bytes",
                                        (json_int_t)p->limits.memory_bytes)) == 0;
    if (ok && o->pids_max)
        ok = a3s_json_push(a, json_pack("{s:s, s:s, s:s, s:I, s:I}", "kind", "quota",
                                        "resource", "processes", "event", "max", "count",
                                        (json_int_t)o->pids_max, "limit",
                                        (json_int_t)p->limits.processes)) == 0;
    char *s = ok ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return s;
}

static int fill_result(a3s_sandbox *sb, const a3s_prepared *pp, const a3s_outcome *o,
                       int64_t timeout_ms, const char *id, a3s_result *r, a3s_error *err)
{
    memset(r, 0, sizeof *r);
    snprintf(r->execution_id, sizeof r->execution_id, "%s", id);
    if (a3s_capture_render(o->cap, A3S_STDOUT, &r->stdout_text, &r->stdout_len,
                           &r->stdout_rest, &r->stdout_rest_len) < 0 ||
        a3s_capture_render(o->cap, A3S_STDERR, &r->stderr_text, &r->stderr_len,
                           &r->stderr_rest, &r->stderr_rest_len) < 0)
        goto oom;
    r->timed_out = o->timed_out;
    r->truncated = a3s_capture_truncated(o->cap);
    r->total_bytes = a3s_capture_total(o->cap);
    r->captured_bytes = a3s_capture_captured(o->cap);
    r->duration_ms = o->duration_ms;
    /* The launcher reports the command's own wait status; without it (process-host, or
     * a command that killed its launcher) bwrap's status is all there is. */
    int status = o->has_command_status ? o->command_status : o->wait_status;
    if (o->timed_out) {
        r->has_signal = true;
        r->signal = 9;
    } else if (WIFEXITED(status)) {
        r->has_exit_code = true;
        r->exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r->has_signal = true;
        r->signal = WTERMSIG(status);
    }
    snprintf(r->policy, sizeof r->policy, "%s", pp->plan->name);
    memcpy(r->policy_digest, pp->digest, sizeof r->policy_digest);
    r->backend = a3s_sandbox_backend(sb);
    r->identity = o->identity;
    if (!(r->denials_json = denials_json(o, timeout_ms, pp->plan, o->network_denials)))
        goto oom;
    json_t *g = a3s_sandbox_grants_json(sb, pp->digest);
    r->grants_json = g ? json_dumps(g, JSON_COMPACT) : NULL;
    json_decref(g);
    if (!r->grants_json)
        goto oom;
    return 0;
oom:
    a3s_result_free(r);
    return a3s_fail(err, A3S_ERR_INTERNAL, "result: out of memory");
}

/* What the mirror's reader has not taken yet, then the rest of each stream (marker and
 * tail). Called once the tree is gone and everything of the run is released: the
 * caller's reader may take its time (a pager), nothing of the run waits for it. */
static void mirror_finish(const a3s_exec_request *req, const a3s_outcome *o, a3s_result *r,
                          char *const dhead[2], const size_t dlen[2])
{
    /* What the live mirror still held, then each stream: its head first when it was not
     * mirrored live (deferred), then the rest (marker, tail). */
    const char *part[5] = {o->mirror_pending, dhead[0], r->stdout_rest, dhead[1],
                           r->stderr_rest};
    size_t len[5] = {o->mirror_pending_len, dlen[0], r->stdout_rest_len, dlen[1],
                     r->stderr_rest_len};
    int fd[5] = {o->mirror_pending_stream == 2 ? req->mirror_fd[1] : req->mirror_fd[0],
                 req->mirror_fd[0], req->mirror_fd[0], req->mirror_fd[1], req->mirror_fd[1]};
    /* On a terminal (tty_fd) every byte was shown live, past the budget too: the marker
     * and tail would show the end twice. */
    if (tty_of(req) >= 0 && !o->mirror_deferred[0])
        len[2] = 0;
    for (int k = 0; k < 5 && !r->output_closed; k++) {
        if (fd[k] < 0 || !part[k] || len[k] == 0)
            continue;
        int rc = a3s_mirror_drain(fd[k], part[k], len[k], req->cancel_fd);
        if (rc == -1)
            r->output_closed = true;
        else if (rc == -2)
            break; /* the caller cancelled: the rest stays in the result */
    }
}

int a3s_sandbox_exec(a3s_sandbox *sb, const a3s_exec_request *req, a3s_result *r,
                     a3s_error *err)
{
    return a3s_sandbox_exec_in(sb, NULL, req, r, err);
}

int a3s_sandbox_exec_in(a3s_sandbox *sb, a3s_session_ctx *sess,
                        const a3s_exec_request *req, a3s_result *r, a3s_error *err)
{
    memset(r, 0, sizeof *r);
    if (sess && sess->lingering) { /* an earlier command's, not released yet */
        sb->backend->ops->run_close(sb->backend, sess->lingering);
        sess->lingering = NULL;
    }
    if (check_request(req, err) < 0)
        return err ? err->code : A3S_ERR_INVALID;
    a3s_backend *be = sb->backend;
    const char *unusable = be ? be->ops->unusable(be) : "no sandbox backend";

    /* One id and one audit sink per execution; events never carry secret values. */
    char id[33];
    if (a3s_audit_new_id(id, err) < 0)
        return err ? err->code : A3S_ERR_INTERNAL;
    a3s_audit *au = NULL;
    if (sb->audit_path || sb->audit_fn) {
        char d[65] = "";
        a3s_error derr;
        /* a broken policy is audited as a compile deny */
        if (sess)
            memcpy(d, sess->digest, sizeof d);
        else
            (void)a3s_sandbox_policy_digest(sb, d, &derr);
        if (a3s_audit_open(&au, sb->audit_path, sb->audit_fn, sb->audit_ud, id, sb->src.name,
                           d, a3s_sandbox_backend(sb), sb->workspace, err) < 0)
            return err ? err->code : A3S_ERR_SETUP;
    }
    /* A boundary that cannot be used here refuses every run (never a weaker one). */
    if (unusable) {
        a3s_audit_emit(au, "boundary", "deny", "boundary-unusable", "<boundary>", NULL);
        a3s_error cerr;
        (void)a3s_audit_close(au, &cerr);
        return a3s_fail(err, A3S_ERR_SETUP, "%s", unusable), A3S_ERR_SETUP;
    }
    /* A workspace no run may use (HOME): refused, but the probe's fixed command may
     * still show whether the boundary works here. */
    const char *refusal = sb->ws_refusal;
    if (!refusal && be && !be->ops->boundary && a3s_sandbox_guarded(sb))
        refusal = "the workspace holds the running program (or a path to it), and "
                  "process-host (no boundary) cannot keep the command from replacing it for "
                  "the next run: run an installed copy, or choose a workspace that does not "
                  "hold it";
    if (refusal && !sb->probing) {
        a3s_audit_emit(au, "workspace", "deny", "workspace-refused", "<workspace>", NULL);
        a3s_error cerr;
        (void)a3s_audit_close(au, &cerr);
        return a3s_fail(err, A3S_ERR_INVALID, "%s", refusal), A3S_ERR_INVALID;
    }
    a3s_prepared pp;
    if (prepare(sb, req, true, sess, NULL, &pp, err) < 0) {
        a3s_audit_emit(au, "compile", "deny", "policy-refused", "compile-failed", NULL);
        a3s_error cerr;
        (void)a3s_audit_close(au, &cerr);
        return err ? err->code : A3S_ERR_SETUP;
    }
    a3s_audit_emit(au, "compile", "allow", "policy-allow", "enforced-policy", NULL);
    /* (The workspace root's mode and ACLs are kept by the first holder of the workspace
     * and restored by the last one, or after a crash: the backend's business.) */
    a3s_audit_emit(au, "network", "deny", "network-deny-all",
                   sb->ngrants ? "<network-except-mediator>" : "<network>", NULL);
    for (size_t i = 0; i < sb->ngrants; i++) {
        char t[A3S_GRANT_HOST_MAX + 40];
        snprintf(t, sizeof t, "<network-grant:%s:%d>", sb->grants[i].host, sb->grants[i].port);
        a3s_audit_emit(au, "network", "allow", "grant-applied", t, NULL);
    }

    int rc = A3S_ERR_SETUP;
    a3s_outcome o;
    memset(&o, 0, sizeof o);
    int64_t timeout_ms = pp.plan->limits.timeout_ms;
    if (req->timeout_ms > 0 && req->timeout_ms < timeout_ms)
        timeout_ms = req->timeout_ms;
    /* A first, early bound (the timer counts from the command's start, later): a caller
     * waiting in on_output never waits past the deadline before it is armed exactly. */
    if (req->deadline_out)
        *req->deadline_out = (int64_t)a3s_now_ms() + timeout_ms;
    a3s_run_io io = {
        .deadline_out = req->deadline_out,
        .id = id,
        .stdin_fd = req->stdin_fd,
        .stdin_data = req->stdin_data,
        .stdin_len = req->stdin_len,
        .timeout_ms = timeout_ms,
        .on_output = req->on_output,
        .output_ud = req->output_ud,
        .cancel_fd = req->cancel_fd,
        .mirror = req->mirror,
        .mirror_fd = {req->mirror_fd[0], req->mirror_fd[1]},
        .tty_fd = tty_of(req),
    };
    char *dhead[2] = {NULL, NULL}; /* heads of streams mirrored after the run (deferred) */
    size_t dlen[2] = {0, 0};
    a3s_trace_mark("audit + request");
    if (be->ops->run_exec(be, pp.run, &io, &o, err) < 0) {
        if (o.quota_refused)
            a3s_audit_emit(au, "quota", "deny", "capability-missing", "<quota>", NULL);
        goto out;
    }
    if (o.aborted) {
        rc = A3S_ERR_ABORTED;
        a3s_fail(err, rc, "the command was stopped by its caller; the process tree was killed");
        goto out;
    }
    if (fill_result(sb, &pp, &o, timeout_ms, id, r, err) < 0)
        goto out;
    r->output_closed = o.output_closed;
    for (int k = 0; k < 2; k++) {
        const char *hp;
        size_t hn = o.mirror_deferred[k] ? a3s_capture_head(o.cap, k + 1, &hp) : 0;
        if (hn > 0 && (dhead[k] = malloc(hn)) != NULL) {
            memcpy(dhead[k], hp, hn);
            dlen[k] = hn;
        }
    }
    if (r->timed_out)
        a3s_audit_emit(au, "process", "deny", "timeout", "<process-tree>", NULL);
    if (r->truncated)
        a3s_audit_emit(au, "output", "deny", "output-limit", "<output>", NULL);
    if (o.oom_kills)
        a3s_audit_emit(au, "quota", "deny", "quota-hit", "<quota:memory>", NULL);
    if (o.pids_max)
        a3s_audit_emit(au, "quota", "deny", "quota-hit", "<quota:processes>", NULL);
    rc = A3S_OK;
out:
    free(o.network_denials);
    a3s_capture_free(o.cap);
    a3s_trace_mark("result");
    /* A lingering session's run is released once its caller has answered; but never
     * while a reader may still be waited for below (nothing of the run waits on it). */
    bool drain = rc == A3S_OK && req->mirror &&
                 (o.mirror_pending_len || dlen[0] || dlen[1] || r->stdout_rest_len ||
                  r->stderr_rest_len);
    if (sess && sess->linger && !drain) {
        /* What the workspace keeps of it is released now all the same: the answer comes
         * with the workspace as a run leaves it. */
        if (be->ops->run_settle)
            be->ops->run_settle(be, pp.run);
        sess->lingering = pp.run;
        pp.run = NULL;
    }
    a3s_sandbox_prepared_free(sb, &pp);
    a3s_trace_mark("cleanup (pins, scratch dir, run record)");
    if (rc == A3S_OK && req->mirror)
        mirror_finish(req, &o, r, dhead, dlen);
    free(dhead[0]);
    free(dhead[1]);
    free(o.mirror_pending);
    if (rc == A3S_OK && r->output_closed)
        a3s_audit_emit(au, "output", "deny", "output-closed", "<output>", NULL);
    /* The sink was opened before anything ran (an unusable audit file refuses the run);
     * a write that fails afterwards cannot undo what ran, so it does not turn the
     * result into an error. */
    a3s_error aerr;
    (void)a3s_audit_close(au, &aerr);
    return rc;
}

void a3s_result_free(a3s_result *r)
{
    if (!r)
        return;
    free(r->stdout_text);
    free(r->stderr_text);
    free(r->stdout_rest);
    free(r->stderr_rest);
    free(r->denials_json);
    free(r->grants_json);
    memset(r, 0, sizeof *r);
}
