/* Workspace discovery: one depth-first walk from a workspace fd opened O_NOFOLLOW.
 *
 * Every directory is opened with openat(O_DIRECTORY|O_NOFOLLOW) relative to its parent,
 * so no symbolic link is ever followed, and a path swapped during the walk fails the
 * open instead of redirecting it. d_type decides most entries without a stat; regular
 * files outside protected directories are stat'ed for their link count.
 *
 * Package stores (scan_skip names other than ".git") are not entered by the main walk:
 * their locations are recorded, and only when a credential inode with link count > 1
 * was found are exactly those subtrees walked for aliases of it. So no directory is
 * read twice, and the common case never pays for node_modules.
 *
 * Rules are collected privately and added to the plan only when the whole scan
 * succeeded, sorted by path (deterministic plans), one rule per path (MASK wins).
 *
 * This file: the scan's state and the walk itself. Which entry gets which rule is
 * scan_rules.c's, `.git` files and gitdir targets scan_git.c's, the result
 * scan_result.c's (scan_int.h: what they share). */
#include "scan_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---------------------------------------------------------------- state helpers */

int a3s_scan_oom(struct scan *s)
{
    return a3s_fail(s->err, A3S_ERR_INTERNAL, "workspace scan: out of memory");
}

int a3s_scan_io_fail(struct scan *s, int errnum, const char *what)
{
    return a3s_fail_errno(s->err, A3S_ERR_POLICY, errnum, "workspace scan: cannot %s %s", what,
                          s->path);
}

const char *a3s_scan_rel_path(const struct scan *s)
{
    return s->path + s->base + 1;
}

/* Append "/name" (name may itself contain '/') to the current path. */
int a3s_scan_path_push(struct scan *s, const char *name, size_t *saved)
{
    size_t n = strlen(name);
    if (s->len + n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 2)
            cap *= 2;
        char *np = realloc(s->path, cap);
        if (!np)
            return a3s_scan_oom(s);
        s->path = np;
        s->cap = cap;
    }
    *saved = s->len;
    s->path[s->len++] = '/';
    memcpy(s->path + s->len, name, n + 1);
    s->len += n;
    return 0;
}

void a3s_scan_path_pop(struct scan *s, size_t saved)
{
    s->len = saved;
    s->path[saved] = '\0';
}

int a3s_scan_push_found(struct scan *s, struct found **v, size_t *n, size_t *cap,
                        enum a3s_fs_kind kind, const char *path, size_t len,
                        const struct stat *st)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 32;
        struct found *nv = realloc(*v, ncap * sizeof *nv);
        if (!nv)
            return a3s_scan_oom(s);
        *v = nv;
        *cap = ncap;
    }
    char *c = strndup(path, len);
    if (!c)
        return a3s_scan_oom(s);
    (*v)[(*n)++] = (struct found){kind, c, st->st_dev, st->st_ino, S_ISDIR(st->st_mode)};
    return 0;
}

/* A rule for the entry being visited, with the identity the backend checks again
 * before it mounts anything there (st: the entry's own lstat). */
int a3s_scan_add_rule(struct scan *s, enum a3s_fs_kind kind, const struct stat *st)
{
    return a3s_scan_push_found(s, &s->rules, &s->nrules, &s->caprules, kind, s->path, s->len, st);
}

/* Hold the directories between the workspace and the entry at `depth`: each becomes a
 * mount point in the sandbox, so that no command can rename them. */
int a3s_scan_hold_ancestors(struct scan *s, int64_t depth)
{
    for (int64_t d = 1; d < depth; d++) {
        struct level *l = &s->levels[d];
        if (l->held)
            continue;
        struct stat lst = {.st_dev = l->dev, .st_ino = l->ino, .st_mode = S_IFDIR};
        if (a3s_scan_push_found(s, &s->holds, &s->nholds, &s->capholds, A3S_FS_RW, s->path, l->len,
                                &lst) < 0)
            return -1;
        l->held = true;
    }
    return 0;
}

/* Mask rules hold their ancestors, so that no command can move the secret where a
 * concurrent run's scan would miss it. */
int a3s_scan_add_mask(struct scan *s, const struct stat *st, int64_t depth)
{
    if (a3s_scan_hold_ancestors(s, depth) < 0)
        return -1;
    return a3s_scan_add_rule(s, A3S_FS_MASK, st);
}

int a3s_scan_add_wanted(struct scan *s, const struct stat *st)
{
    if (s->nwanted == s->capwanted) {
        size_t cap = s->capwanted ? s->capwanted * 2 : 16;
        struct devino *v = realloc(s->wanted, cap * sizeof *v);
        if (!v)
            return a3s_scan_oom(s);
        s->wanted = v;
        s->capwanted = cap;
    }
    s->wanted[s->nwanted++] = (struct devino){st->st_dev, st->st_ino};
    return 0;
}

static int cmp_devino(const void *a, const void *b)
{
    const struct devino *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return 0;
}

bool a3s_scan_wanted_has(const struct scan *s, const struct stat *st)
{
    struct devino k = {st->st_dev, st->st_ino};
    return bsearch(&k, s->wanted, s->nwanted, sizeof k, cmp_devino) != NULL;
}

static int count_entry(struct scan *s)
{
    if (++s->entries > s->max_entries)
        return a3s_fail(s->err, A3S_ERR_POLICY, "workspace scan entry limit %" PRIu64 " exceeded",
                        s->max_entries);
    return 0;
}

/* fstatat without following: 1 done, 0 vanished (a race, ignored), -1 failed. */
int a3s_scan_entry_stat(struct scan *s, int dfd, const char *name, struct stat *st)
{
    if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0)
        return 1;
    if (errno == ENOENT)
        return 0;
    return a3s_scan_io_fail(s, errno, "stat");
}

/* ---------------------------------------------------------------- the walk */

static int walk_dir(struct scan *s, int fd, int64_t depth, unsigned flags);

static size_t devino_hash(dev_t dev, ino_t ino, size_t cap)
{
    uint64_t h = ((uint64_t)ino * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)dev * 0xC2B2AE3D27D4EB4Full);
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* A directory walked twice means the tree was rearranged under the walk: two names
 * exchanged between listing and opening can hide the other directory from it. Then the
 * scan's picture is not the workspace's: refuse (1), rather than miss a secret. */
static int walked_twice(struct scan *s, const struct stat *st)
{
    if (2 * (s->nwalked + 1) > s->capwalked) {
        size_t cap = s->capwalked ? s->capwalked * 2 : 256;
        struct devino *v = calloc(cap, sizeof *v);
        if (!v)
            return a3s_scan_oom(s);
        for (size_t i = 0; i < s->capwalked; i++) {
            struct devino *e = &s->walked[i];
            if (!e->ino && !e->dev)
                continue;
            size_t j = devino_hash(e->dev, e->ino, cap);
            while (v[j].ino || v[j].dev)
                j = (j + 1) & (cap - 1);
            v[j] = *e;
        }
        free(s->walked);
        s->walked = v;
        s->capwalked = cap;
    }
    size_t j = devino_hash(st->st_dev, st->st_ino, s->capwalked);
    while (s->walked[j].ino || s->walked[j].dev) {
        if (s->walked[j].ino == st->st_ino && s->walked[j].dev == st->st_dev)
            return a3s_fail(s->err, A3S_ERR_SETUP,
                            "workspace scan: directory %s was met twice: the workspace changed "
                            "during the scan (a concurrent run renaming directories?)",
                            s->path);
        j = (j + 1) & (s->capwalked - 1);
    }
    s->walked[j] = (struct devino){st->st_dev, st->st_ino};
    s->nwalked++;
    return 0;
}

/* Record the directory open as fd as the one at `depth` (its path: s->path[0..len]);
 * `walk`: it is about to be walked (each directory is, at most once). */
static int set_level(struct scan *s, int64_t depth, int fd, size_t len, bool walk)
{
    if ((size_t)depth >= s->caplevels) {
        size_t cap = s->caplevels ? s->caplevels * 2 : 64;
        while (cap <= (size_t)depth)
            cap *= 2;
        struct level *v = realloc(s->levels, cap * sizeof *v);
        if (!v)
            return a3s_scan_oom(s);
        s->levels = v;
        s->caplevels = cap;
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return a3s_scan_io_fail(s, errno, "stat");
    if (walk && walked_twice(s, &st) < 0)
        return -1;
    s->levels[depth] = (struct level){st.st_dev, st.st_ino, len, false};
    return 0;
}

int a3s_scan_descend(struct scan *s, int dfd, const char *name, int64_t depth, unsigned flags)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        /* ENOTDIR/ELOOP: replaced by a file or a symlink while we looked: fail closed. */
        return a3s_scan_io_fail(s, errno, "open directory");
    }
    if (set_level(s, depth, fd, s->len, true) < 0) {
        close(fd);
        return -1;
    }
    return walk_dir(s, fd, depth + 1, flags);
}

static int visit(struct scan *s, int dfd, const char *name, unsigned char type, int64_t depth,
                 unsigned flags)
{
    size_t saved;
    if (a3s_scan_path_push(s, name, &saved) < 0)
        return -1;
    int rc = a3s_scan_visit_entry(s, dfd, name, type, depth, flags);
    a3s_scan_path_pop(s, saved);
    return rc < 0 ? -1 : 0;
}

static bool dot_or_dotdot(const char *n)
{
    return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* List the directory open as fd (taken over) and visit each entry at `depth`. */
static int walk_dir(struct scan *s, int fd, int64_t depth, unsigned flags)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        int saved = errno;
        close(fd);
        return a3s_scan_io_fail(s, saved, "list");
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            /* ENOENT: the directory was removed while we listed it. */
            if (errno && errno != ENOENT)
                rc = a3s_scan_io_fail(s, errno, "list");
            break;
        }
        if (dot_or_dotdot(de->d_name))
            continue;
        if ((rc = count_entry(s)) < 0)
            break;
        if ((rc = visit(s, fd, de->d_name, de->d_type, depth, flags)) < 0)
            break;
    }
    closedir(d);
    return rc;
}

static void tops_free(struct top_entry *tops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(tops[i].name);
    free(tops);
}

/* Read the top level once, so that protected names and the gitdir target are known
 * before any subdirectory is walked. */
static int read_top(struct scan *s, struct top_entry **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    /* A file description of its own: a duplicate would share the directory offset with
     * the sandbox's workspace fd, and the next scan through it would list nothing. */
    int fd = openat(s->wsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return a3s_scan_io_fail(s, errno, "list");
    DIR *d = fdopendir(fd);
    if (!d) {
        int saved = errno;
        close(fd);
        return a3s_scan_io_fail(s, saved, "list");
    }
    struct top_entry *tops = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = a3s_scan_io_fail(s, errno, "list");
            break;
        }
        if (dot_or_dotdot(de->d_name))
            continue;
        if ((rc = count_entry(s)) < 0)
            break;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct top_entry *v = realloc(tops, ncap * sizeof *v);
            if (!v) {
                rc = a3s_scan_oom(s);
                break;
            }
            tops = v;
            cap = ncap;
        }
        if (!(tops[n].name = strdup(de->d_name))) {
            rc = a3s_scan_oom(s);
            break;
        }
        tops[n].type = de->d_type;
        tops[n].protected = false;
        n++;
    }
    closedir(d);
    if (rc < 0) {
        tops_free(tops, n);
        return -1;
    }
    *out = tops;
    *nout = n;
    return 0;
}

/* ---------------------------------------------------------------- package stores */

/* Open a recorded store again, one component at a time, never following a link.
 * Returns the fd, -2 when it vanished, -1 on failure; *ncomp gets its depth. */
static int open_store(struct scan *s, const char *rel, int64_t *ncomp)
{
    char *copy = strdup(rel);
    if (!copy)
        return a3s_scan_oom(s);
    int fd = s->wsfd;
    int64_t n = 0;
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        int nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        if (fd != s->wsfd)
            close(fd);
        if (nfd < 0) {
            free(copy);
            if (saved == ENOENT)
                return -2;
            return a3s_scan_io_fail(s, saved, "open directory");
        }
        fd = nfd;
        n++;
        /* The store's own directories are ancestors of what the store pass masks. */
        if (set_level(s, n, fd, s->base + (size_t)(c - copy) + strlen(c) + 1, false) < 0) {
            close(fd);
            free(copy);
            return -1;
        }
    }
    free(copy);
    if (fd == s->wsfd) /* cannot happen: stores are non-empty relative paths */
        return a3s_fail(s->err, A3S_ERR_INTERNAL, "workspace scan: empty package store path");
    *ncomp = n;
    return fd;
}

static int scan_stores(struct scan *s)
{
    if (s->nwanted == 0)
        return 0;
    qsort(s->wanted, s->nwanted, sizeof *s->wanted, cmp_devino);
    for (size_t i = 0; i < s->stores.n; i++) {
        size_t saved;
        if (a3s_scan_path_push(s, s->stores.v[i], &saved) < 0)
            return -1;
        int64_t depth = 0;
        int fd = open_store(s, s->stores.v[i], &depth);
        int rc = 0;
        if (fd >= 0)
            rc = walk_dir(s, fd, depth + 1, IN_STORE);
        else if (fd == -1)
            rc = -1;
        a3s_scan_path_pop(s, saved);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int a3s_scan_workspace(const a3s_plan *p, int wsfd, const a3s_scan_hooks *hooks,
                       a3s_scan_result *out, a3s_error *err)
{
    if (!out)
        return a3s_fail(err, A3S_ERR_INVALID, "workspace scan: no result");
    memset(out, 0, sizeof *out);
    if (!p || !p->workspace || !a3s_path_is_clean(p->workspace))
        return a3s_fail(err, A3S_ERR_INVALID,
                        "workspace scan: workspace '%s' is not a clean "
                        "absolute path",
                        p && p->workspace ? p->workspace : "(null)");
    if (p->limits.scan_depth < 1 || p->limits.scan_entries < 1)
        return a3s_fail(err, A3S_ERR_POLICY,
                        "workspace scan: limits scan_depth %" PRId64 " / scan_entries %" PRId64
                        " must be positive",
                        p->limits.scan_depth, p->limits.scan_entries);
    if (a3s_scan_check_names(&p->protect_dirs, "protect_dirs", err) < 0 ||
        a3s_scan_check_names(&p->protect_files, "protect_files", err) < 0 ||
        a3s_scan_check_names(&p->secret_prefixes, "secret_prefixes", err) < 0 ||
        a3s_scan_check_names(&p->scan_skip, "scan_skip", err) < 0)
        return -1;

    struct scan s = {
        .p = p,
        .hooks = hooks,
        .err = err,
        .wsfd = -1,
        .ws = p->workspace,
        .base = strcmp(p->workspace, "/") == 0 ? 0 : strlen(p->workspace),
        .max_entries = (uint64_t)p->limits.scan_entries,
        .max_depth = p->limits.scan_depth,
    };
    struct top_entry *tops = NULL;
    size_t ntops = 0;
    int rc = -1;
    /* Only then does the walk compare each entry with the plan's masks (scan_rules.c). */
    for (size_t i = 0; i < p->nfs && !s.deep_masks; i++) {
        const char *m = p->fs[i].path;
        s.deep_masks = p->fs[i].kind == A3S_FS_MASK && a3s_path_within(m, p->workspace) &&
                       strlen(m) > s.base + 1 && strchr(m + s.base + 1, '/') != NULL;
    }

    s.cap = s.base + 256;
    if (!(s.path = malloc(s.cap))) {
        a3s_scan_oom(&s);
        goto done;
    }
    memcpy(s.path, p->workspace, s.base);
    s.path[s.base] = '\0';
    s.len = s.base;

    s.wsfd = wsfd >= 0 ? fcntl(wsfd, F_DUPFD_CLOEXEC, 0)
                       : open(p->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s.wsfd < 0) {
        a3s_fail_errno(err, A3S_ERR_POLICY, errno, "workspace scan: cannot open workspace %s",
                       p->workspace);
        goto done;
    }
    int top = read_top(&s, &tops, &ntops);
    if (top == 0)
        top = a3s_scan_protected(&s, tops, ntops, out);
    if (s.hooks && s.hooks->done)
        s.hooks->done(s.hooks->ud);
    if (top < 0)
        goto done;
    /* A protected directory's contents are read-only: walked for secrets only. A
     * protected file itself is still subject to the hard-link rule. */
    for (size_t i = 0; i < ntops; i++)
        if (visit(&s, s.wsfd, tops[i].name, tops[i].type, 1,
                  tops[i].protected && tops[i].type == DT_DIR ? IN_PROTECTED : 0) < 0)
            goto done;
    if (scan_stores(&s) < 0 || a3s_scan_commit_rules(&s, out) < 0 ||
        a3s_scan_export_ids(&s, s.rules, s.nrules, &out->ids, &out->nids) < 0 ||
        a3s_scan_export_ids(&s, s.holds, s.nholds, &out->holds, &out->nholds) < 0)
        goto done;
    out->entries = s.entries;
    rc = 0;

done:
    if (s.wsfd >= 0)
        close(s.wsfd);
    tops_free(tops, ntops);
    for (size_t i = 0; i < s.nrules; i++)
        free(s.rules[i].path);
    free(s.rules);
    for (size_t i = 0; i < s.nholds; i++)
        free(s.holds[i].path);
    free(s.holds);
    free(s.levels);
    free(s.walked);
    free(s.wanted);
    a3s_strv_free(&s.stores);
    a3s_strv_free(&s.gitdirs);
    free(s.path);
    if (rc < 0)
        a3s_scan_result_free(out);
    return rc;
}
