/* The environment pipeline (policies/README.md, "Environment") driven by the plan's env section. */
#ifndef A3S_ENV_H
#define A3S_ENV_H

#include "a3s_sandbox.h"
#include "plan.h"
#include "util.h"

/* true when name matches [A-Za-z_][A-Za-z0-9_]* */
bool a3s_env_name_valid(const char *name, size_t len);

/* Check one explicit "NAME=VALUE" entry; A3S_ERR_INVALID naming the entry's name. */
int a3s_env_check_entry(const char *entry, a3s_error *err);

/* Compose the child environment: host `keep` names and `keep_prefix` names, then the
 * explicit entries (each checked), then remove `strip` / `strip_prefix` names
 * (case-insensitive), then apply `set`. `out` receives "NAME=VALUE" strings sorted by
 * name (byte order), no duplicates. host and explicit_env are NULL-terminated (may be
 * NULL). Returns 0 or -1 with err. */
int a3s_env_compose(const a3s_env_plan *ep, const char *const *host,
                    const char *const *explicit_env, a3s_strv *out, a3s_error *err);

#endif
