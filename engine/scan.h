/* Workspace discovery: one walk per execution (getdents + fstatat, never following
 * symlinks) that turns the plan's declarative workspace rules into concrete rules. */
#ifndef A3S_SCAN_H
#define A3S_SCAN_H

#include "a3s_sandbox.h"
#include "plan.h"
#include "util.h"

#include <stdbool.h>
#include <sys/types.h>

/* A path the scan made a rule for, or a directory to hold, with the identity it saw:
 * the backend mounts there only if the entry is still that very object. */
typedef struct a3s_scan_id {
    char *path; /* absolute, owned */
    dev_t dev;
    ino_t ino;
    bool dir;
} a3s_scan_id;

/* What the scan asks of the backend. */
typedef struct a3s_scan_hooks {
    bool (*held)(void *ud, int wsfd, const char *name);
    /* The top-level names are all asked about (may be NULL): what held needed for them
     * can be let go. Called once per scan that called held, whatever its outcome. */
    void (*done)(void *ud);
    void *ud;
    /* More protected top-level names (NULL-terminated, may be NULL), treated like the
     * plan's protect_dirs/protect_files: the entry that holds the running program. */
    const char *const *also_dirs, *const *also_files;
} a3s_scan_hooks;

typedef struct a3s_scan_result {
    /* The rules the scan found (PROTECT and MASK, all discovered and optional, prov
     * "<scan>"), sorted by path, one per path, those the plan does not already cover.
     * The plan stays as validated: the backend applies these with its rules. */
    a3s_fs_rule *rules;
    size_t nrules;
    /* Protected names absent at top level (no case variant exists), as declared, plus
     * names whose entry is a pin this process holds (see a3s_pins_held): to pin. */
    a3s_strv missing_dirs;
    a3s_strv missing_files;
    uint64_t entries; /* entries visited */
    /* The identity of every path the scan made a rule for (sorted by path). */
    a3s_scan_id *ids;
    size_t nids;
    /* Directories to hold (sorted, unique): every directory between the workspace and a
     * masked entry or the gitdir target. The backend makes each a mount point of itself,
     * so no command can rename or remove them during the run. */
    a3s_scan_id *holds;
    size_t nholds;
} a3s_scan_result;

/* Finds the rules for the plan's declarative workspace names (into out->rules):
 *  - PROTECT for every top-level entry whose name equals a protect_dirs/protect_files
 *    name case-insensitively, and for the resolved target of a `.git` file's
 *    "gitdir: PATH" line (relative to the workspace) when it lies inside the workspace
 *    (that directory is then skipped like .git);
 *  - MASK for every entry (any type) whose name starts with a secret prefix
 *    case-insensitively, anywhere, except below scan_skip directories;
 *  - MASK for every regular file with link count > 1 outside scan_skip and protected
 *    directories;
 *  - MASK for files inside scan_skip package stores ("node_modules", "target") whose
 *    (dev, inode) equals that of a MASK'ed file with link count > 1.
 * hooks (may be NULL): held(ud, wsfd, name) says whether a top-level protected name is a
 * placeholder the backend holds (a pin): such a name counts as missing, to be pinned.
 * The workspace is the directory open as wsfd (dup'ed), or p->workspace opened without
 * following a final link when wsfd < 0.
 * Fails closed (A3S_ERR_POLICY) when a protected or secret path is a symbolic link
 * ("refusing a symbolic link at protected workspace path ..."), when the depth limit or
 * the entry limit of the plan is exceeded ("workspace scan depth limit N exceeded at
 * ..."/"workspace scan entry limit N exceeded"), or on an I/O error other than ENOENT. */
int a3s_scan_workspace(const a3s_plan *p, int wsfd, const a3s_scan_hooks *hooks,
                       a3s_scan_result *out, a3s_error *err);
/* The identity recorded for path, or NULL. */
const a3s_scan_id *a3s_scan_find(const a3s_scan_result *r, const char *path);
void a3s_scan_result_free(a3s_scan_result *r);

#endif
