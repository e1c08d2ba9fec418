/* The Linux backend: a frozen plan becomes a bubblewrap argument vector (passed with
 * --args FD) plus the seccomp memfd (--seccomp FD). */
#ifndef A3S_BWRAP_H
#define A3S_BWRAP_H

#include <sys/types.h>

#include "a3s_sandbox.h"
#include "plan.h"
#include "protocol.h"
#include "scan.h"
#include "util.h"

typedef struct a3s_bwrap_cmd {
    char *const *argv;         /* argv form, or NULL */
    const char *shell_command; /* bash -c form, or NULL */
    const char *cwd;           /* where it starts, relative to the workspace, or NULL */
    const char *shell;         /* trusted bash, absolute */
    /* a3s-sandbox-launch: always the first program inside. A host path, or the embedded
     * image's A3S_FD_PATH(A3S_FD_LAUNCHER_IMAGE) (protocol.h), which needs no mount. */
    const char *launcher;
    /* On the real argv of bwrap and the launcher ("--tag TAG"), which every process of the
     * sandbox's setup carries: how a sweep finds a dead run's sandbox whose pid it never
     * learnt (stale.h). NULL: none. */
    const char *tag;
    /* Mediated network (grants): the relay runs first and starts the launcher under the
     * command filter read from fd A3S_FD_CMD_FILTER; NULL otherwise. */
    const char *relay; /* its channel to the mediator comes on A3S_FD_MEDIATOR; a host
                        * path or A3S_FD_PATH(A3S_FD_RELAY_IMAGE) */
    /* The workspace and scratch dir as opened on the host (their identity is checked
     * again inside before anything is mounted in them). */
    dev_t ws_dev, scratch_dev;
    ino_t ws_ino, scratch_ino;
    const a3s_scan_result *scan; /* identities of the scanned rules, holds; may be NULL */
    /* Rules applied with the plan's, after them in order: the scan's and the pins'. The
     * plan itself stays as validated. */
    const a3s_fs_rule *more;
    size_t nmore;
    /* Mapped identity (root callers): bwrap joins the user namespace on A3S_FD_USERNS and
     * the workspace and scratch come as idmapped mounts on fds 9 and 10. */
    bool mapped;
    uid_t uid; /* the caller's ids, shown to the command */
    gid_t gid;
    /* A session's command: the launcher joins the session's namespaces (--join) and,
     * unless mapped, clones the workspace and the command's scratch directory (a host
     * path, mounted at the plan's scratch path) from the session's base ("clone"
     * records, protocol.h). */
    bool join;
    const char *scratch_src;
} a3s_bwrap_cmd;

/* Resolve and vet a trusted executable: absolute after canonicalization, a regular file
 * with an execute bit, not inside `workspace` (may be NULL). `out` is malloc'd. */
int a3s_bwrap_resolve_exe(const char *path, const char *workspace, const char *what,
                          char **out, a3s_error *err);

/* Build the bwrap options (for --args) into `out`, the command part ("--", launcher, ...)
 * into `cmd_out` (bwrap takes the command from its real argv only) and the setup records
 * (protocol.h, magic first) into `setup`, for a validated plan and the rules in
 * cmd->more. bwrap makes the namespaces, the read-only host root, /dev and /proc (and
 * the binds from below these two, which the setup step takes from there), and starts in
 * /. Rules outside the workspace become mounts the setup step makes first ("mnt-*"
 * records), computed from the host as it is now: missing optional paths are skipped, a
 * symbolic link at any rule path fails closed; `host` gets them as bwrap directives
 * (--tmpfs, --dir, --ro-bind, --bind, --remount-ro, --perms), in their order, for `plan`.
 * Rules inside the workspace become setup records, applied by fd inside. `env` holds the
 * composed "NAME=VALUE" child environment. */
int a3s_bwrap_build_args(const a3s_plan *p, const a3s_strv *env, const a3s_bwrap_cmd *cmd,
                         a3s_strv *out, a3s_strv *host, a3s_strv *cmd_out, a3s_strv *setup,
                         a3s_error *err);

/* bwrap's options for a session's holder (session.c): the plan's namespaces and the
 * read-only host view that every command of the session starts from; nothing else. */
int a3s_bwrap_session_args(const a3s_plan *p, bool mapped, a3s_strv *out, a3s_error *err);

/* bwrap's options for a fresh run's sandbox started before its plan is known (ahead.h):
 * a fresh run's own for a plan without network, without the command's environment. */
int a3s_bwrap_ahead_args(bool mapped, a3s_strv *out, a3s_error *err);

/* Write args NUL-separated into a sealed memfd at offset 0 (for --args and the setup
 * records). Returns the fd (CLOEXEC) or -1 with err. */
int a3s_bwrap_args_memfd(const a3s_strv *args, a3s_error *err);

/* JSON array text of the whole command line (for `plan`), malloc'd; each entry written
 * with a3s_json_str (engine/json.h). NULL on ENOMEM, never an array missing entries.
 * bwrap and cmd may be NULL: `args` alone (the setup step's mounts). */
char *a3s_bwrap_args_json(const char *bwrap, const a3s_strv *args, const a3s_strv *cmd);

#endif
