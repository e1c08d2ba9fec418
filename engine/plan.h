/* The enforcement plan: plain C data built by the policy runtime, validated strictly,
 * encoded canonically (JSON) and hashed (SHA-256), then frozen before anything forks.
 *
 * Ownership: every string in a plan is owned by the plan (a3s_plan_free releases all).
 * The builder functions copy their arguments.
 *
 * The module, one reason to change per file:
 *   engine/plan.c           the model: lifecycle, builders, kind and errno names;
 *   engine/plan_validate.c  strict validation, which freezes the plan;
 *   engine/plan_encode.c    the one walker over the model that writes both JSON forms,
 *                           the canonical one and the full one;
 *   engine/plan_digest.c    the canonical form as text and its SHA-256 digest;
 *   engine/plan_json.c      the full plan as pretty JSON.
 * Every declaration is here: callers include plan.h only (plan_internal.h is the
 * module's own). */
#ifndef A3S_PLAN_H
#define A3S_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "a3s_sandbox.h"

#define A3S_PLAN_VERSION 1

/* Where a rule came from: "policies/baseline.lua:42", or "<engine>" / "<scan>". */
typedef struct a3s_prov {
    char *file; /* owned; NULL means "<engine>" */
    int line;
} a3s_prov;

/* Filesystem rules. The backend orders them (see backends/linux/bwrap.c):
 *   1. host root read-only;
 *   2. HIDE / TMPFS / RO / RW / PROTECT, shallowest path first (stable within a depth);
 *   3. MASK rules last, so a secret stays masked even inside a re-exposed root;
 *   4. HIDE directories are remounted read-only at the very end. */
enum a3s_fs_kind {
    A3S_FS_HIDE = 0, /* present but empty and read-only (dir: tmpfs; file: /dev/null) */
    A3S_FS_TMPFS,    /* private writable tmpfs (e.g. /tmp) */
    A3S_FS_RO,       /* bind read-only (re-expose under a hidden dir) */
    A3S_FS_RW,       /* bind read-write: only the workspace and the scratch dir */
    A3S_FS_PROTECT,  /* existing path bound read-only over a writable root */
    A3S_FS_MASK,     /* secret: unreadable and unwritable wherever it is visible */
    A3S_FS_KIND_COUNT
};

typedef struct a3s_fs_rule {
    enum a3s_fs_kind kind;
    char *path;      /* clean absolute path */
    bool optional;   /* a missing path is skipped (else: error at enforcement) */
    bool discovered; /* found by scanning/host facts: a label (plan, explain) only */
    bool broaden;    /* RW only: an explicit broadening declaration, which allows a
                        writable root outside the workspace and the scratch dir */
    a3s_prov prov;
} a3s_fs_rule;

typedef struct a3s_kv {
    char *name, *value;
    bool discovered; /* derived from host facts: a label (plan, explain) only */
    a3s_prov prov;
} a3s_kv;

typedef struct a3s_name {
    char *name;
    a3s_prov prov;
} a3s_name;

typedef struct a3s_name_list {
    a3s_name *v;
    size_t n, cap;
    bool frozen; /* set with the plan's (a3s_plan_validate): a3s_plan_add_name refuses */
} a3s_name_list;

/* Environment pipeline (engine/env.c): start empty; copy host `keep` names and names
 * starting with a `keep_prefix`; overlay explicit request entries; remove names in
 * `strip` / starting with `strip_prefix` (case-insensitive); finally apply `set`. */
typedef struct a3s_env_plan {
    a3s_name_list keep, keep_prefix, strip, strip_prefix;
    a3s_kv *set;
    size_t nset, capset;
} a3s_env_plan;

/* One seccomp deny rule: syscall name (libseccomp spelling) and the errno it returns. */
typedef struct a3s_sc_rule {
    char *syscall;
    int errnum; /* e.g. EPERM; ENOSYS for clone3 */
    a3s_prov prov;
} a3s_sc_rule;

typedef struct a3s_seccomp_plan {
    a3s_sc_rule *deny;
    size_t ndeny, capdeny;
    /* socket(2): allowed address families (AF_* numbers). Empty: every family denied. */
    int *socket_allow;
    size_t nsocket_allow, capsocket_allow;
    bool socketpair_unix;  /* socketpair(AF_UNIX) allowed (cannot reach outside) */
    bool deny_clone_ns;    /* clone() with any CLONE_NEW* flag -> EPERM */
    bool deny_tty_inject;  /* ioctl TIOCSTI / TIOCLINUX -> EPERM (32-bit masked compare) */
    int socket_errnum;     /* errno for denied socket() (default EAFNOSUPPORT) */
    a3s_prov prov;         /* where the seccomp section was last configured */
} a3s_seccomp_plan;

enum a3s_net_mode { A3S_NET_NONE = 0 /* private netns, loopback only */ };

typedef struct a3s_limits {
    int64_t timeout_ms;    /* deadline ceiling (> 0) */
    int64_t output_bytes;  /* global capture budget (> 0) */
    int64_t nofile;        /* RLIMIT_NOFILE (> 0) */
    int64_t core_bytes;    /* RLIMIT_CORE (>= 0; baseline 0) */
    int64_t scan_depth;    /* workspace scan depth limit (> 0) */
    int64_t scan_entries;  /* workspace scan entry limit (> 0) */
    /* Quotas, 0 = none. Processes, memory and CPU need a cgroup (backends/linux/cgroup.h): a
     * plan that asks for one on a host that cannot enforce it is refused at run time. */
    int64_t processes;       /* pids in the whole tree */
    int64_t memory_bytes;    /* memory (and swap) of the whole tree */
    int64_t cpu_millicores;  /* CPU time share, 1000 = one CPU */
    int64_t file_size_bytes; /* RLIMIT_FSIZE: largest file the tree may write */
    a3s_prov prov;
} a3s_limits;

typedef struct a3s_plan {
    char *name;        /* policy name, e.g. "baseline" */
    char *source;      /* policy file path (for messages), may be NULL */
    int network;       /* enum a3s_net_mode */
    a3s_prov network_prov;
    /* Root callers: where the workspace cannot be idmapped, run the command as host uid 0
     * instead of refusing (a broadening; in the digest when true). */
    bool allow_host_root;
    a3s_prov host_root_prov;

    a3s_fs_rule *fs;
    size_t nfs, capfs;

    /* Protected top-level workspace names, matched case-insensitively by the scan. */
    a3s_name_list protect_dirs, protect_files;
    /* Workspace secret name prefixes (".env"), matched case-insensitively anywhere. */
    a3s_name_list secret_prefixes;
    /* Workspace directory names the scan never enters for secrets/hard links
     * (".git", "node_modules", "target"), case-insensitive. */
    a3s_name_list scan_skip;

    a3s_env_plan env;
    a3s_seccomp_plan seccomp;
    a3s_limits limits;

    /* Host roots, for symbolic encoding in the digest (not themselves policy rules). */
    char *workspace, *scratch, *home, *tmp;

    /* Set by a successful a3s_plan_validate: what was validated and digested is what is
     * enforced, so every builder below refuses a frozen plan (A3S_ERR_INTERNAL). Rules
     * found later (the workspace scan, pins) are kept beside the plan, not added to it
     * (a3s_plan_json lists them). Direct writes to the fields are not checked: past
     * validation, make none. */
    bool frozen;
} a3s_plan;

/* engine/plan.c.
 * Lifecycle. a3s_plan_new returns a plan with baseline-neutral defaults: no rules,
 * network none, seccomp booleans true, socket_errnum EAFNOSUPPORT, limits
 * timeout 120000 ms, output 102400, nofile 1024, core 0, scan depth 64, entries 1000000. */
a3s_plan *a3s_plan_new(void);
void a3s_plan_free(a3s_plan *p);

/* Builders: copy arguments; `file` may be NULL. Return 0, or -1 with err filled
 * (A3S_ERR_INTERNAL "plan: frozen after validation" on a frozen plan or name list). */
int a3s_plan_set_roots(a3s_plan *p, const char *workspace, const char *scratch,
                       const char *home, const char *tmp, a3s_error *err);
int a3s_plan_add_fs(a3s_plan *p, enum a3s_fs_kind kind, const char *path, bool optional,
                    bool discovered, const char *file, int line, a3s_error *err);
int a3s_plan_add_name(a3s_name_list *l, const char *name, const char *file, int line,
                      a3s_error *err);
int a3s_plan_env_set(a3s_plan *p, const char *name, const char *value, const char *file,
                     int line, a3s_error *err);
int a3s_plan_seccomp_deny(a3s_plan *p, const char *syscall, int errnum, const char *file,
                          int line, a3s_error *err);
int a3s_plan_seccomp_allow_family(a3s_plan *p, int family, a3s_error *err);

/* engine/plan_validate.c.
 * Strict validation (A3S_ERR_POLICY on failure, message names the rule and its
 * provenance): clean absolute paths, RW only within workspace or scratch, one kind per
 * path, valid env names, syscall names of the right shape (whether libseccomp knows them
 * is the backend's plan_check: the engine has no syscall table), limits in range. On
 * success the plan and its name lists are frozen (see `frozen`); validating a frozen plan
 * again is allowed. */
int a3s_plan_validate(a3s_plan *p, a3s_error *err);

/* engine/plan_digest.c.
 * Canonical JSON of the declarations (version, name, network, fs rules (discovered too)
 * with host roots written as ${workspace}/${scratch}/${home}/${tmp}, protected names,
 * secret prefixes, scan skips, env, seccomp, limits), keys sorted, no whitespace.
 * malloc'd; NULL on ENOMEM. */
char *a3s_plan_canonical(const a3s_plan *p);
/* SHA-256 of len bytes, lower-case hex. */
void a3s_sha256_hex(const void *data, size_t len, char out[65]);
/* SHA-256 of a3s_plan_canonical, lower-case hex. */
int a3s_plan_digest(const a3s_plan *p, char out[65], a3s_error *err);

/* engine/plan_json.c.
 * Full plan as pretty JSON (every rule with provenance, the digest, the roots). `more`
 * (nmore rules; NULL when nmore is 0) are rules that are not in the plan but are enforced
 * with it (the workspace scan's discoveries, pins): they are listed after the plan's own
 * in the same "fs" array, in the same shape, and are not in the digest. `extra_json`,
 * when non-NULL, is a JSON object text whose members are merged in (e.g. the bwrap argv).
 * malloc'd; NULL on ENOMEM, or when extra_json is not a JSON object. */
char *a3s_plan_json(const a3s_plan *p, const a3s_fs_rule *more, size_t nmore,
                    const char *extra_json);
/* engine/plan.c: names. */
const char *a3s_fs_kind_name(enum a3s_fs_kind k);
/* errno name <-> number for the errnos a policy may use ("EPERM", "ENOSYS", ...). */
int a3s_errno_from_name(const char *name);
const char *a3s_errno_name(int errnum);

#endif
