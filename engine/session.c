/* Sessions (a3s_sandbox.h): the policy evaluated once, the backend's warm boundary made
 * once, each command one execution of the common pipeline (run.c) in it. */
#include <stdlib.h>
#include <string.h>

#include "sandbox_int.h"
#include "util.h"

struct a3s_session {
    a3s_sandbox *sb;
    a3s_prepared first; /* the session's own run: plan, pins, scratch path, records */
    a3s_session_ctx ctx;
};

int a3s_session_open(a3s_sandbox *sb, a3s_session **out, a3s_error *err)
{
    *out = NULL;
    a3s_backend *be = sb->backend;
    if (!be)
        return a3s_fail(err, A3S_ERR_SETUP, "no sandbox backend");
    if (be->ops->unusable(be) || sb->ws_refusal) {
        /* Refused as any run here is, with the same error and audit events: the run's
         * own checks refuse before anything is prepared. */
        static const char *const argv[] = {"true", NULL};
        a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
        req.argv = argv;
        a3s_result r;
        int rc = a3s_sandbox_exec_in(sb, NULL, &req, &r, err);
        if (rc == A3S_OK) { /* cannot happen: refused above */
            a3s_result_free(&r);
            return a3s_fail(err, A3S_ERR_INTERNAL, "session: a refused run ran");
        }
        return -1;
    }
    if (!be->ops->session_open)
        return a3s_fail(err, A3S_ERR_SETUP, "the %s backend has no sessions: run each "
                        "command on its own", be->ops->name);
    if (sb->ngrants)
        return a3s_fail(err, A3S_ERR_SETUP, "a session cannot hold network grants yet: run "
                        "the commands that need them on their own");
    a3s_session *s = calloc(1, sizeof *s);
    if (!s)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    s->sb = sb;
    if (a3s_sandbox_prepare_facts(sb, NULL, true, &s->ctx.facts, &s->first, err) < 0) {
        free(s);
        return -1;
    }
    if (be->ops->session_open(be, s->first.run, &s->ctx.backend, err) < 0) {
        a3s_sandbox_prepared_free(sb, &s->first);
        if (s->ctx.facts)
            sb->policy->facts_free(s->ctx.facts);
        free(s);
        return -1;
    }
    s->ctx.plan = s->first.plan;
    memcpy(s->ctx.digest, s->first.digest, sizeof s->ctx.digest);
    sb->sessions++;
    *out = s;
    return 0;
}

int a3s_session_exec(a3s_session *s, const a3s_exec_request *req, a3s_result *r,
                     a3s_error *err)
{
    if (!s) {
        memset(r, 0, sizeof *r);
        a3s_fail(err, A3S_ERR_INVALID, "exec: the session is closed");
        return A3S_ERR_INVALID;
    }
    return a3s_sandbox_exec_in(s->sb, &s->ctx, req, r, err);
}

int a3s_session_warm(a3s_session *s, a3s_error *err)
{
    if (!s)
        return a3s_fail(err, A3S_ERR_INVALID, "warm: the session is closed");
    a3s_backend *be = s->sb->backend;
    if (!be->ops->session_warm)
        return a3s_fail(err, A3S_ERR_SETUP, "the %s backend prepares nothing ahead",
                        be->ops->name);
    /* Its run too: the record (made before the scratch dir, as always) and the dir. */
    if (!s->ctx.spare_run &&
        be->ops->run_open(be, &s->ctx.spare_run, &s->ctx.spare_scratch, false, err) < 0)
        return -1;
    return be->ops->session_warm(be, s->ctx.backend, err);
}

void a3s_session_unwarm(a3s_session *s)
{
    a3s_backend *be = s ? s->sb->backend : NULL;
    if (be && be->ops->session_unwarm)
        be->ops->session_unwarm(be, s->ctx.backend);
    if (be && s->ctx.spare_run) {
        be->ops->run_close(be, s->ctx.spare_run);
        s->ctx.spare_run = NULL;
        s->ctx.spare_scratch = NULL;
    }
}

void a3s_session_linger(a3s_session *s, bool on)
{
    if (s)
        s->ctx.linger = on;
}

void a3s_session_release(a3s_session *s)
{
    if (s && s->ctx.lingering) {
        s->sb->backend->ops->run_close(s->sb->backend, s->ctx.lingering);
        s->ctx.lingering = NULL;
    }
}

void a3s_session_close(a3s_session *s)
{
    if (!s)
        return;
    a3s_session_release(s);
    a3s_session_unwarm(s);
    a3s_backend *be = s->sb->backend;
    if (be->ops->session_close)
        be->ops->session_close(be, s->ctx.backend);
    s->sb->sessions--;
    a3s_sandbox_prepared_free(s->sb, &s->first);
    if (s->ctx.facts)
        s->sb->policy->facts_free(s->ctx.facts);
    free(s);
}
