/* The workspace scan's shared state, for its files only (scan.c: the walk and the entry
 * point; scan_rules.c: which entry gets which rule; scan_git.c: `.git` files and gitdir
 * targets; scan_result.c: the result). Everything else sees scan.h. */
#ifndef A3S_SCAN_INT_H
#define A3S_SCAN_INT_H

#include "scan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Walk modes. */
enum {
    IN_PROTECTED = 1, /* below a protected dir: read-only, secrets and hard links masked */
    IN_MASKED = 2,    /* below a masked (secret) dir: already hidden, no rules */
    IN_STORE = 4,     /* package-store pass: only aliases of credential inodes */
    IN_GITDIR = 8,    /* below a gitdir target: secrets only (objects are often linked) */
};

struct found {
    enum a3s_fs_kind kind;
    char *path;
    dev_t dev;
    ino_t ino;
    bool dir;
};

/* One directory on the way down from the workspace: for holding the ancestors of a
 * masked entry (see a3s_scan_result.holds). */
struct level {
    dev_t dev;
    ino_t ino;
    size_t len; /* length of its path in scan.path */
    bool held;
};

struct devino {
    dev_t dev;
    ino_t ino;
};

struct top_entry {
    char *name;
    unsigned char type;
    bool protected;
};

struct scan {
    const a3s_plan *p;
    const a3s_scan_hooks *hooks; /* may be NULL */
    a3s_error *err;
    int wsfd;
    const char *ws;
    size_t base; /* length of the workspace prefix in path (0 for "/") */
    char *path;  /* absolute path of the entry being visited */
    size_t len, cap;
    uint64_t entries, max_entries;
    int64_t max_depth;
    struct found *rules;
    size_t nrules, caprules;
    struct found *holds;
    size_t nholds, capholds;
    struct level *levels; /* levels[d]: the directory at depth d being walked */
    size_t caplevels;
    struct devino *walked; /* open-addressing set of the directories walked */
    size_t nwalked, capwalked;
    struct devino *wanted; /* credential inodes with link count > 1 */
    size_t nwanted, capwanted;
    a3s_strv stores;  /* package stores, relative to the workspace */
    a3s_strv gitdirs; /* gitdir targets inside the workspace, relative */
    bool deep_masks;  /* the plan masks a path below the workspace's top level */
};

/* ---- scan.c: the state and the walk */

int a3s_scan_oom(struct scan *s);
/* Fails (A3S_ERR_POLICY) with "workspace scan: cannot <what> <s->path>". */
int a3s_scan_io_fail(struct scan *s, int errnum, const char *what);
/* The path being visited, relative to the workspace. */
const char *a3s_scan_rel_path(const struct scan *s);
/* Append "/name" to s->path (*saved: the length to pop back to). */
int a3s_scan_path_push(struct scan *s, const char *name, size_t *saved);
void a3s_scan_path_pop(struct scan *s, size_t saved);
/* Append (kind, path[0..len], st's identity) to the vector *v. */
int a3s_scan_push_found(struct scan *s, struct found **v, size_t *n, size_t *cap,
                        enum a3s_fs_kind kind, const char *path, size_t len,
                        const struct stat *st);
/* A rule for the entry being visited (st: its own lstat). */
int a3s_scan_add_rule(struct scan *s, enum a3s_fs_kind kind, const struct stat *st);
/* Hold the directories between the workspace and the entry at depth. */
int a3s_scan_hold_ancestors(struct scan *s, int64_t depth);
/* A MASK rule for the entry being visited, its ancestors held. */
int a3s_scan_add_mask(struct scan *s, const struct stat *st, int64_t depth);
/* A credential inode with link count > 1, searched for in the package stores. */
int a3s_scan_add_wanted(struct scan *s, const struct stat *st);
bool a3s_scan_wanted_has(const struct scan *s, const struct stat *st);
/* fstatat without following: 1 done, 0 vanished (a race, ignored), -1 failed. */
int a3s_scan_entry_stat(struct scan *s, int dfd, const char *name, struct stat *st);
/* Open the directory name (in dfd) without following and walk it at depth + 1. */
int a3s_scan_descend(struct scan *s, int dfd, const char *name, int64_t depth, unsigned flags);

/* ---- scan_rules.c: names, and the rules for each entry */

/* Each name of l must be one non-empty path component (what: the list's name). */
int a3s_scan_check_names(const a3s_name_list *l, const char *what, a3s_error *err);
/* The entry name (type from d_type, or DT_UNKNOWN) in dfd at depth, s->path its path. */
int a3s_scan_visit_entry(struct scan *s, int dfd, const char *name, unsigned char type,
                         int64_t depth, unsigned flags);
/* Protected top-level names: PROTECT what exists, report what must be pinned. */
int a3s_scan_protected(struct scan *s, struct top_entry *tops, size_t ntops,
                       a3s_scan_result *out);

/* ---- scan_git.c: `.git` files and their gitdir targets */

/* A `.git` below the top (the entry being visited). */
int a3s_scan_nested_git(struct scan *s, int dfd, const char *name, unsigned char type,
                        int64_t depth);
/* The `.git` file name in dfd, whose directory's path is s->path[0..dir_len]. */
int a3s_scan_read_gitdir(struct scan *s, int dfd, const char *name, size_t dir_len);

/* ---- scan_result.c: the result */

/* The rules the plan does not already cover, one per path, into out->rules. */
int a3s_scan_commit_rules(struct scan *s, a3s_scan_result *out);
/* The identities of v (sorted by path, one per path; paths moved) into *out. */
int a3s_scan_export_ids(struct scan *s, struct found *v, size_t n, a3s_scan_id **out,
                        size_t *nout);

#endif
