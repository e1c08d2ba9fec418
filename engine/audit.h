/* Audit events: one JSON object per event, to a JSON-lines file and/or a callback.
 * Events never carry a secret value: only names, paths the policy declared, counts and
 * decisions. */
#ifndef A3S_AUDIT_H
#define A3S_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "a3s_sandbox.h"

/* A random execution id: 32 lower-case hex chars from getrandom(2) + NUL. */
int a3s_audit_new_id(char out[33], a3s_error *err);

typedef struct a3s_audit a3s_audit;

/* Sink: `path` (appended, created 0600, O_APPEND|O_CLOEXEC|O_NOFOLLOW; NULL: none) and/or
 * `fn(ud, json_line)` (NULL: none). The common fields (execution id, policy name, policy
 * digest, backend, workspace path) are fixed for the execution. */
int a3s_audit_open(a3s_audit **out, const char *path, a3s_audit_fn fn, void *ud,
                   const char *execution_id, const char *policy, const char *digest,
                   const char *backend, const char *workspace, a3s_error *err);

/* Emit {"ts_ms","execution_id","policy","policy_digest","backend","workspace","event",
 * "decision","reason","target", ...extra members of `extra_json` (an object, may be
 * NULL)}. Text that is not valid UTF-8 is written as {"base64": ...} (engine/json.h).
 * One write(2) per line. Errors are kept (first one) and reported by a3s_audit_close. */
void a3s_audit_emit(a3s_audit *a, const char *event, const char *decision,
                    const char *reason, const char *target, const char *extra_json);

/* Close; returns -1 with err if any write failed (the caller decides whether an audit
 * failure fails the execution). NULL is a no-op returning 0. */
int a3s_audit_close(a3s_audit *a, a3s_error *err);

#endif
