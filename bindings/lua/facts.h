/* What one evaluation read: every host query and its answer, the PATH directories, every
 * policy file looked for (its contents, or that it was absent). An evaluation whose
 * facts all still hold would give the same plan (the policy sees nothing else of the
 * host: no io, os or clock), so a session reuses its plan while they do
 * (engine/policy.h eval_facts, facts_hold). Internal to bindings/lua. */
#ifndef A3S_LUA_FACTS_H
#define A3S_LUA_FACTS_H

#include <stdbool.h>
#include <stddef.h>

#include "policy.h"

enum {
    A3S_FACT_EXISTS = 'e',  /* arg: path; has: lstat succeeds */
    A3S_FACT_IS_DIR = 'd',  /* arg: path; has: a directory (lstat) */
    A3S_FACT_REALPATH = 'r', /* arg: path; ans: canonical path when has */
    A3S_FACT_GLOB = 'g',    /* arg: dir NUL prefix; ans: sorted names, each NUL-ended */
    A3S_FACT_PATHDIR = 'p', /* arg: a PATH entry; ans: canonical directory when has */
    A3S_FACT_FILE = 'f',    /* arg: policy file looked for; ans: contents when has */
    A3S_FACT_EXPOSABLE = 'x', /* arg: path; ans: canonical directory when has */
    A3S_FACT_PASSES = 'w',  /* arg: path NUL root; has: its resolution passes root */
    A3S_FACT_ALIASES = 'm', /* arg: path; ans: its aliases (aliases.h), each NUL-ended */
    A3S_FACT_MOUNTS_BELOW = 'n', /* arg: path; ans: mount points below it, each NUL-ended */
    A3S_FACT_MOUNT_TABLE = 't', /* arg: "/"; ans: the mount table's digest (aliases.h) */
};

/* The canonical directory `path` names, following a symbolic link only where the caller
 * can neither write nor own the directory that holds it (engine/wspath.h: the workspace
 * path's rule), into canon (n >= PATH_MAX): what a policy may re-expose from the host. false when it
 * does not exist, is not a directory or passes through a link a command could plant. */
bool a3s_facts_exposable(const char *path, char *canon, size_t n);

/* Record one fact (copies arg and ans). Out of memory marks the record unusable: it then
 * never holds. */
void a3s_facts_add(a3s_policy_facts *f, char kind, const char *arg, size_t alen,
                   const char *ans, size_t nlen, bool has);
/* Out of memory while recording: the record never holds. */
void a3s_facts_break(a3s_policy_facts *f);
a3s_policy_facts *a3s_facts_new(void);
void a3s_facts_free(a3s_policy_facts *f);
/* Whether every recorded fact still holds on this host (guard: the evaluation's):
 * A3S_FACTS_HOLD, else A3S_FACTS_POLICY when a policy file looked for changed, else
 * A3S_FACTS_MOUNTS when what it read of the mount table did, else A3S_FACTS_HOST
 * (engine/policy.h). */
int a3s_facts_check(const a3s_policy_facts *f, const a3s_policy_ctx *ctx);

/* The record as bytes (malloc'd) and back, for a cache kept between processes: -1 when
 * it cannot be written (out of memory, or a record that never holds); NULL when the bytes
 * are not a well-formed record. A decoded record holds only where its facts still do. */
int a3s_facts_encode(const a3s_policy_facts *f, char **out, size_t *len);
a3s_policy_facts *a3s_facts_decode(const char *buf, size_t len);

/* The answers as the queries compute them (host_query.c and the replay share them). */
int a3s_facts_glob(const char *dir, const char *prefix, char **out, size_t *len);
bool a3s_facts_pathdir(const char *seg, size_t len, char *canon, size_t n);

#endif
