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
 * succeeded, sorted by path (deterministic plans), one rule per path (MASK wins). */
#include "scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>


#define SCAN_PROV "<scan>"
#define GITDIR_MAX 4096

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
};

/* ---------------------------------------------------------------- names */

/* ASCII case folding only: names are bytes, and the locale must not change matching. */
static int fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static bool name_eq(const char *a, const char *b)
{
    for (; *a && fold((unsigned char)*a) == fold((unsigned char)*b); a++, b++)
        ;
    return fold((unsigned char)*a) == fold((unsigned char)*b);
}

static bool name_has_prefix(const char *s, const char *prefix)
{
    for (; *prefix; s++, prefix++)
        if (!*s || fold((unsigned char)*s) != fold((unsigned char)*prefix))
            return false;
    return true;
}

static bool list_has(const a3s_name_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (name_eq(name, l->v[i].name))
            return true;
    return false;
}

static bool list_has_prefix_of(const a3s_name_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (name_has_prefix(name, l->v[i].name))
            return true;
    return false;
}

/* One path component: an empty secret prefix would match everything, a '/' nothing. */
static int check_names(const a3s_name_list *l, const char *what, a3s_error *err)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *n = l->v[i].name;
        if (!n || !n[0] || strchr(n, '/') || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "workspace scan: %s entry '%s' must be one non-empty path component",
                            what, n ? n : "(null)");
    }
    return 0;
}

static bool strv_has(const a3s_strv *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

/* ---------------------------------------------------------------- state helpers */

static int oom(struct scan *s)
{
    return a3s_fail(s->err, A3S_ERR_INTERNAL, "workspace scan: out of memory");
}

static int io_fail(struct scan *s, int errnum, const char *what)
{
    return a3s_fail_errno(s->err, A3S_ERR_POLICY, errnum, "workspace scan: cannot %s %s", what,
                          s->path);
}

static const char *rel_path(const struct scan *s)
{
    return s->path + s->base + 1;
}

/* Append "/name" (name may itself contain '/') to the current path. */
static int path_push(struct scan *s, const char *name, size_t *saved)
{
    size_t n = strlen(name);
    if (s->len + n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 2)
            cap *= 2;
        char *np = realloc(s->path, cap);
        if (!np)
            return oom(s);
        s->path = np;
        s->cap = cap;
    }
    *saved = s->len;
    s->path[s->len++] = '/';
    memcpy(s->path + s->len, name, n + 1);
    s->len += n;
    return 0;
}

static void path_pop(struct scan *s, size_t saved)
{
    s->len = saved;
    s->path[saved] = '\0';
}

static int push_found(struct scan *s, struct found **v, size_t *n, size_t *cap,
                      enum a3s_fs_kind kind, const char *path, size_t len,
                      const struct stat *st)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 32;
        struct found *nv = realloc(*v, ncap * sizeof *nv);
        if (!nv)
            return oom(s);
        *v = nv;
        *cap = ncap;
    }
    char *c = strndup(path, len);
    if (!c)
        return oom(s);
    (*v)[(*n)++] = (struct found){kind, c, st->st_dev, st->st_ino, S_ISDIR(st->st_mode)};
    return 0;
}

/* A rule for the entry being visited, with the identity the backend checks again
 * before it mounts anything there (st: the entry's own lstat). */
static int add_rule(struct scan *s, enum a3s_fs_kind kind, const struct stat *st)
{
    return push_found(s, &s->rules, &s->nrules, &s->caprules, kind, s->path, s->len, st);
}

/* Hold the directories between the workspace and the entry at `depth`: each becomes a
 * mount point in the sandbox, so that no command can rename them. */
static int hold_ancestors(struct scan *s, int64_t depth)
{
    for (int64_t d = 1; d < depth; d++) {
        struct level *l = &s->levels[d];
        if (l->held)
            continue;
        struct stat lst = {.st_dev = l->dev, .st_ino = l->ino, .st_mode = S_IFDIR};
        if (push_found(s, &s->holds, &s->nholds, &s->capholds, A3S_FS_RW, s->path, l->len,
                       &lst) < 0)
            return -1;
        l->held = true;
    }
    return 0;
}

/* Mask rules hold their ancestors, so that no command can move the secret where a
 * concurrent run's scan would miss it. */
static int add_mask(struct scan *s, const struct stat *st, int64_t depth)
{
    if (hold_ancestors(s, depth) < 0)
        return -1;
    return add_rule(s, A3S_FS_MASK, st);
}

static int read_gitdir(struct scan *s, int dfd, const char *name, size_t dir_len);
static int entry_stat(struct scan *s, int dfd, const char *name, struct stat *st);

/* A `.git` below the top (a submodule's, a nested repository's): host git reads it when
 * it recurses, so it is read-only like the top one, its directories are held, and a
 * `.git` file's gitdir target is protected too. */
static int nested_git(struct scan *s, int dfd, const char *name, unsigned char type,
                      int64_t depth)
{
    struct stat st;
    int r = entry_stat(s, dfd, name, &st);
    if (r <= 0)
        return r;
    if (S_ISLNK(st.st_mode))
        return a3s_fail(s->err, A3S_ERR_POLICY,
                        "refusing a symbolic link at protected workspace path %s", s->path);
    if (hold_ancestors(s, depth) < 0 || add_rule(s, A3S_FS_PROTECT, &st) < 0)
        return -1;
    (void)type;
    if (S_ISREG(st.st_mode))
        return read_gitdir(s, dfd, name, s->len - strlen(name) - 1);
    return 0;
}

static int add_wanted(struct scan *s, const struct stat *st)
{
    if (s->nwanted == s->capwanted) {
        size_t cap = s->capwanted ? s->capwanted * 2 : 16;
        struct devino *v = realloc(s->wanted, cap * sizeof *v);
        if (!v)
            return oom(s);
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

static bool wanted_has(const struct scan *s, const struct stat *st)
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
static int entry_stat(struct scan *s, int dfd, const char *name, struct stat *st)
{
    if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0)
        return 1;
    if (errno == ENOENT)
        return 0;
    return io_fail(s, errno, "stat");
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
            return oom(s);
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
            return oom(s);
        s->levels = v;
        s->caplevels = cap;
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return io_fail(s, errno, "stat");
    if (walk && walked_twice(s, &st) < 0)
        return -1;
    s->levels[depth] = (struct level){st.st_dev, st.st_ino, len, false};
    return 0;
}

static int descend(struct scan *s, int dfd, const char *name, int64_t depth, unsigned flags)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        /* ENOTDIR/ELOOP: replaced by a file or a symlink while we looked: fail closed. */
        return io_fail(s, errno, "open directory");
    }
    if (set_level(s, depth, fd, s->len, true) < 0) {
        close(fd);
        return -1;
    }
    return walk_dir(s, fd, depth + 1, flags);
}

/* Package-store pass: every regular file aliasing a credential inode is masked. */
static int visit_store_entry(struct scan *s, int dfd, const char *name, unsigned char type,
                             int64_t depth, unsigned flags)
{
    struct stat st;
    if (type == DT_DIR)
        return descend(s, dfd, name, depth, flags);
    if (type != DT_REG)
        return 0;
    int r = entry_stat(s, dfd, name, &st);
    if (r <= 0)
        return r;
    if (S_ISREG(st.st_mode) && st.st_nlink > 1 && wanted_has(s, &st))
        return add_mask(s, &st, depth);
    return 0;
}

static int visit_entry(struct scan *s, int dfd, const char *name, unsigned char type, int64_t depth,
                       unsigned flags)
{
    struct stat st;
    bool have_st = false;
    int r;

    if (depth > s->max_depth)
        return a3s_fail(s->err, A3S_ERR_POLICY,
                        "workspace scan depth limit %" PRId64 " exceeded at %s", s->max_depth,
                        s->path);
    if (type == DT_UNKNOWN) {
        if ((r = entry_stat(s, dfd, name, &st)) <= 0)
            return r;
        have_st = true;
        type = IFTODT(st.st_mode);
    }
    if (flags & IN_STORE)
        return visit_store_entry(s, dfd, name, type, depth, flags);

    if (list_has_prefix_of(&s->p->secret_prefixes, name)) {
        /* A symlink here would let the mask land on its target: refuse (fail closed). */
        if (type == DT_LNK)
            return a3s_fail(s->err, A3S_ERR_POLICY,
                            "refusing a symbolic link at secret workspace path %s", s->path);
        if (!have_st && (r = entry_stat(s, dfd, name, &st)) <= 0)
            return r;
        if (!(flags & IN_MASKED) && add_mask(s, &st, depth) < 0)
            return -1;
        if (type == DT_REG) {
            if (S_ISREG(st.st_mode) && st.st_nlink > 1)
                return add_wanted(s, &st);
            return 0;
        }
        /* Walked for the credential inodes inside; its contents need no rules. */
        if (type == DT_DIR)
            return descend(s, dfd, name, depth, flags | IN_MASKED);
        return 0;
    }

    if (depth > 1 && name_eq(name, ".git") && !(flags & (IN_MASKED | IN_GITDIR)) &&
        (type == DT_DIR || type == DT_REG || type == DT_LNK))
        return nested_git(s, dfd, name, type, depth);

    if (type == DT_DIR) {
        if (list_has(&s->p->scan_skip, name)) {
            /* Package stores are searched later, only if a credential has aliases. */
            if (!name_eq(name, ".git") && !(flags & IN_MASKED) &&
                a3s_strv_push(&s->stores, rel_path(s)) < 0)
                return oom(s);
            return 0;
        }
        /* A gitdir target is a git directory like .git: protected, and walked for
         * secrets only (whatever a .git file names must not hide them). */
        if (strv_has(&s->gitdirs, rel_path(s)))
            return descend(s, dfd, name, depth, flags | IN_PROTECTED | IN_GITDIR);
        return descend(s, dfd, name, depth, flags);
    }

    /* Hard-link aliases of source files, also in protected dirs (read-only is not
     * unreadable); git directories link their objects, so not there. */
    if (type == DT_REG && !(flags & IN_GITDIR)) {
        if (!have_st && (r = entry_stat(s, dfd, name, &st)) <= 0)
            return r;
        if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
            if (!(flags & IN_MASKED) && add_mask(s, &st, depth) < 0)
                return -1;
            return add_wanted(s, &st);
        }
    }
    return 0;
}

static int visit(struct scan *s, int dfd, const char *name, unsigned char type, int64_t depth,
                 unsigned flags)
{
    size_t saved;
    if (path_push(s, name, &saved) < 0)
        return -1;
    int rc = visit_entry(s, dfd, name, type, depth, flags);
    path_pop(s, saved);
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
        return io_fail(s, saved, "list");
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            /* ENOENT: the directory was removed while we listed it. */
            if (errno && errno != ENOENT)
                rc = io_fail(s, errno, "list");
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

/* ---------------------------------------------------------------- top level */

/* Walk rel (relative to the workspace) as the kernel would for host git, one component
 * at a time without following links. The directories on the way are held and the git
 * directory itself protected, each with the identity seen here; a link on the way, a
 * missing target (the command could create it) or the workspace itself is refused.
 * Returns 1 when ".." leaves the workspace (the caller resolves the path itself). */
static int gitdir_walk(struct scan *s, const char *rel, const char *target)
{
    char *copy = strdup(rel);
    char *abs = malloc(s->base + strlen(rel) + 2);
    int *fds = calloc(strlen(rel) + 2, sizeof *fds);
    size_t *lens = calloc(strlen(rel) + 2, sizeof *lens);
    if (!copy || !abs || !fds || !lens) {
        free(copy), free(abs), free(fds), free(lens);
        return oom(s);
    }
    memcpy(abs, s->ws, s->base);
    abs[s->base] = '\0';
    size_t depth = 0, len = s->base;
    fds[0] = s->wsfd;
    lens[0] = len;
    struct stat st = {0};
    int rc = 0;
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c && rc == 0; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            if (depth == 0) {
                rc = 1;
                break;
            }
            close(fds[depth--]);
            len = lens[depth];
            abs[len] = '\0';
            continue;
        }
        if (fstatat(fds[depth], c, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = a3s_fail_errno(s->err, A3S_ERR_POLICY, errno,
                                "workspace scan: git directory '%s' named by %s is missing or "
                                "unusable inside the workspace (a command could create it); "
                                "fix or remove that .git file",
                                target, s->path);
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            rc = a3s_fail(s->err, A3S_ERR_POLICY,
                          "refusing a symbolic link on the way to git directory '%s' named by %s",
                          target, s->path);
            break;
        }
        int fd = openat(fds[depth], c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            rc = io_fail(s, errno, "open git directory");
            break;
        }
        fds[++depth] = fd;
        abs[len++] = '/';
        memcpy(abs + len, c, strlen(c) + 1);
        len += strlen(c);
        lens[depth] = len;
    }
    if (rc == 0 && depth == 0)
        /* Its hooks would be ordinary writable workspace files: refuse. */
        rc = a3s_fail(s->err, A3S_ERR_POLICY,
                      "workspace scan: git directory named by %s is the workspace itself", s->path);
    for (size_t d = 1; rc == 0 && d <= depth; d++) {
        struct stat ds;
        if (fstat(fds[d], &ds) < 0) {
            rc = io_fail(s, errno, "stat git directory");
            break;
        }
        if (d < depth)
            rc = push_found(s, &s->holds, &s->nholds, &s->capholds, A3S_FS_RW, abs, lens[d], &ds);
        else if ((rc = push_found(s, &s->rules, &s->nrules, &s->caprules, A3S_FS_PROTECT, abs,
                                  lens[d], &ds)) == 0 &&
                 a3s_strv_push(&s->gitdirs, abs + s->base + 1) < 0)
            rc = oom(s);
    }
    for (size_t d = 1; d <= depth; d++)
        close(fds[d]);
    free(copy), free(abs), free(fds), free(lens);
    return rc;
}

/* `.git` (any case) is a regular file: protect the directory its "gitdir: PATH" line
 * names when that lies inside the workspace (outside, everything is read-only). */
/* The `.git` file `name` in the directory open as dfd, whose path is s->path[0..dir_len]
 * (the workspace itself for the top one). */
static int read_gitdir(struct scan *s, int dfd, const char *name, size_t dir_len)
{
    /* O_NONBLOCK: a FIFO swapped in cannot hang the scan; fstat rejects it below. */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return io_fail(s, errno, "open");
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int saved = errno;
        close(fd);
        return io_fail(s, saved, "stat");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    char buf[GITDIR_MAX + 1];
    size_t n = 0;
    while (n < GITDIR_MAX) {
        ssize_t got = a3s_read_retry(fd, buf + n, GITDIR_MAX - n);
        if (got < 0) {
            int saved = errno;
            close(fd);
            return io_fail(s, saved, "read");
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    if (strncmp(buf, "gitdir:", 7) != 0)
        return 0;
    char *target = buf + 7;
    target += strspn(target, " \t");
    size_t tl = strlen(target);
    while (tl > 0 && (target[tl - 1] == ' ' || target[tl - 1] == '\t'))
        target[--tl] = '\0';
    if (tl == 0)
        return 0;

    /* Where host git will look, walked by fd from the workspace so that what is
     * protected is the very directory (and chain of directories) git will use. A
     * relative target is relative to the directory of the .git file. */
    const char *rel = NULL;
    char *real = NULL, *joined = NULL;
    size_t wl = strlen(s->ws);
    if (target[0] != '/') {
        size_t dl = dir_len > s->base ? dir_len - s->base - 1 : 0; /* its dir, relative */
        if (asprintf(&joined, "%.*s%s%s", (int)dl, s->path + s->base + 1, dl ? "/" : "",
                     target) < 0)
            return oom(s);
        rel = joined;
    } else if (s->base == 0) {
        rel = target + 1;
    } else if (strncmp(target, s->ws, wl) == 0 && (target[wl] == '/' || target[wl] == '\0')) {
        rel = target + wl + (target[wl] == '/');
    }
    int rc = rel ? gitdir_walk(s, rel, target) : 1;
    if (rc == 1) {
        /* Outside the workspace as written: everything there is read-only, unless a link
         * outside leads back in. */
        char *abs = NULL;
        if (target[0] == '/')
            abs = strdup(target);
        else if (asprintf(&abs, "%s/%s", s->ws, joined) < 0)
            abs = NULL;
        if (!abs) {
            free(joined);
            return oom(s);
        }
        real = realpath(abs, NULL);
        int saved = errno;
        free(abs);
        errno = saved;
        if (!real) {
            free(joined);
            if (saved == ENOENT || saved == ENOTDIR)
                return 0;
            return a3s_fail_errno(s->err, A3S_ERR_POLICY, saved,
                                  "workspace scan: cannot resolve git directory '%s' named by %s",
                                  target, s->path);
        }
        rc = 0;
        if (a3s_path_within(real, s->ws))
            rc = gitdir_walk(s, real[s->base + 1] ? real + s->base + 1 : ".", target);
        if (rc == 1)
            rc = 0;
    }
    free(real);
    free(joined);
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
    int fd = fcntl(s->wsfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return io_fail(s, errno, "list");
    DIR *d = fdopendir(fd);
    if (!d) {
        int saved = errno;
        close(fd);
        return io_fail(s, saved, "list");
    }
    struct top_entry *tops = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = io_fail(s, errno, "list");
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
                rc = oom(s);
                break;
            }
            tops = v;
            cap = ncap;
        }
        if (!(tops[n].name = strdup(de->d_name))) {
            rc = oom(s);
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

/* Protected top-level names: PROTECT what exists, report what must be pinned. */
static int scan_protected(struct scan *s, struct top_entry *tops, size_t ntops,
                          a3s_scan_result *out)
{
    const a3s_name_list *pd = &s->p->protect_dirs, *pf = &s->p->protect_files;
    size_t nseen = pd->n + pf->n;
    bool *seen = calloc(nseen ? nseen : 1, sizeof *seen);
    if (!seen)
        return oom(s);
    int rc = 0;
    for (size_t i = 0; i < ntops && rc == 0; i++) {
        struct top_entry *t = &tops[i];
        bool match = false;
        for (size_t j = 0; j < nseen; j++)
            if (name_eq(t->name, j < pd->n ? pd->v[j].name : pf->v[j - pd->n].name))
                match = true;
        if (!match)
            continue;
        size_t saved;
        if (path_push(s, t->name, &saved) < 0) {
            rc = -1;
            break;
        }
        struct stat st;
        int r = entry_stat(s, s->wsfd, t->name, &st);
        if (r > 0)
            t->type = IFTODT(st.st_mode);
        if (r < 0) {
            rc = -1;
        } else if (r == 0) {
            t->type = DT_UNKNOWN; /* vanished: the walk will skip it too */
        } else if (t->type == DT_LNK) {
            rc = a3s_fail(s->err, A3S_ERR_POLICY,
                          "refusing a symbolic link at protected workspace path %s", s->path);
        } else if ((s->hooks && s->hooks->held && s->hooks->held(s->hooks->ud, s->wsfd, t->name)) ||
                   (fstatat(s->wsfd, t->name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)) {
            /* A recorded placeholder (of any process): share it, or take it over from a
             * dead holder (see pin.h); or one that its last holder removed since
             * read_top saw it (the held hook waited for that): missing, to be pinned.
             * Never bind it as if it were ordinary content that will still be there. */
            t->protected = true;
            a3s_strv *l = t->type == DT_DIR ? &out->missing_dirs : &out->missing_files;
            if (!strv_has(l, t->name) && a3s_strv_push(l, t->name) < 0)
                rc = oom(s);
        } else {
            /* A case variant is protected too, but only the canonical spelling itself
             * counts as present: a missing canonical name is pinned whatever variants
             * exist, so that no earlier run's ".GIT" leaves ".git" creatable. */
            t->protected = true;
            for (size_t j = 0; j < nseen; j++)
                if (!strcmp(t->name, j < pd->n ? pd->v[j].name : pf->v[j - pd->n].name))
                    seen[j] = true;
            rc = add_rule(s, A3S_FS_PROTECT, &st);
            /* Host git reads ".git" only; a variant counts where the directory folds
             * case (it then is the same entry as ".git"). */
            struct stat cg;
            if (rc == 0 && t->type == DT_REG && name_eq(t->name, ".git") &&
                (!strcmp(t->name, ".git") ||
                 (fstatat(s->wsfd, ".git", &cg, AT_SYMLINK_NOFOLLOW) == 0 &&
                  cg.st_ino == st.st_ino && cg.st_dev == st.st_dev)))
                rc = read_gitdir(s, s->wsfd, t->name, s->base);
        }
        path_pop(s, saved);
    }
    for (size_t j = 0; j < nseen && rc == 0; j++) {
        if (seen[j])
            continue;
        const char *n = j < pd->n ? pd->v[j].name : pf->v[j - pd->n].name;
        a3s_strv *l = j < pd->n ? &out->missing_dirs : &out->missing_files;
        if (!strv_has(l, n) && a3s_strv_push(l, n) < 0)
            rc = oom(s);
    }
    free(seen);
    return rc;
}

/* ---------------------------------------------------------------- package stores */

/* Open a recorded store again, one component at a time, never following a link.
 * Returns the fd, -2 when it vanished, -1 on failure; *ncomp gets its depth. */
static int open_store(struct scan *s, const char *rel, int64_t *ncomp)
{
    char *copy = strdup(rel);
    if (!copy)
        return oom(s);
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
            return io_fail(s, saved, "open directory");
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
        if (path_push(s, s->stores.v[i], &saved) < 0)
            return -1;
        int64_t depth = 0;
        int fd = open_store(s, s->stores.v[i], &depth);
        int rc = 0;
        if (fd >= 0)
            rc = walk_dir(s, fd, depth + 1, IN_STORE);
        else if (fd == -1)
            rc = -1;
        path_pop(s, saved);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- results */

static int cmp_found(const void *a, const void *b)
{
    const struct found *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    /* MASK first within a path, so the merge below keeps it. */
    return (x->kind != A3S_FS_MASK) - (y->kind != A3S_FS_MASK);
}

/* Is the plan's declared rule for this path already at least as strict? */
static bool plan_covers(const a3s_plan *p, size_t nfs, const struct found *f)
{
    for (size_t i = 0; i < nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        if (strcmp(r->path, f->path) != 0)
            continue;
        if (r->kind == A3S_FS_MASK || r->kind == A3S_FS_HIDE)
            return true;
        if (f->kind == A3S_FS_PROTECT && (r->kind == A3S_FS_PROTECT || r->kind == A3S_FS_RO))
            return true;
    }
    return false;
}

/* The rules the plan does not already cover, one per path, into the result: the plan
 * itself is frozen (plan.h), and the backend applies these with it. */
static int commit_rules(struct scan *s, a3s_scan_result *out)
{
    const a3s_plan *p = s->p;
    if (s->nrules)
        qsort(s->rules, s->nrules, sizeof *s->rules, cmp_found);
    a3s_fs_rule *v = calloc(s->nrules ? s->nrules : 1, sizeof *v);
    if (!v)
        return oom(s);
    size_t n = 0;
    for (size_t i = 0; i < s->nrules; i++) {
        if (i > 0 && strcmp(s->rules[i].path, s->rules[i - 1].path) == 0)
            continue;
        if (plan_covers(p, p->nfs, &s->rules[i]))
            continue;
        a3s_fs_rule r = {.kind = s->rules[i].kind, .optional = true, .discovered = true};
        if (!(r.path = strdup(s->rules[i].path)) || !(r.prov.file = strdup(SCAN_PROV))) {
            free(r.path);
            out->rules = v;
            out->nrules = n;
            return oom(s);
        }
        v[n++] = r;
    }
    out->rules = v;
    out->nrules = n;
    return 0;
}

/* Hand the identities over to the result: one per path (the MASK one wins, as in the
 * plan), sorted by path for a3s_scan_find. */
static int export_ids(struct scan *s, struct found *v, size_t n, a3s_scan_id **out,
                      size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (n)
        qsort(v, n, sizeof *v, cmp_found);
    a3s_scan_id *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids)
        return oom(s);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && strcmp(v[i].path, ids[w - 1].path) == 0)
            continue;
        ids[w++] = (a3s_scan_id){v[i].path, v[i].dev, v[i].ino, v[i].dir};
        v[i].path = NULL; /* moved */
    }
    *out = ids;
    *nout = w;
    return 0;
}

static int cmp_id_path(const void *key, const void *elem)
{
    return strcmp(key, ((const a3s_scan_id *)elem)->path);
}

const a3s_scan_id *a3s_scan_find(const a3s_scan_result *r, const char *path)
{
    if (!r || !r->nids)
        return NULL;
    return bsearch(path, r->ids, r->nids, sizeof *r->ids, cmp_id_path);
}

static void ids_free(a3s_scan_id *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].path);
    free(v);
}

void a3s_scan_result_free(a3s_scan_result *r)
{
    if (!r)
        return;
    a3s_strv_free(&r->missing_dirs);
    a3s_strv_free(&r->missing_files);
    ids_free(r->ids, r->nids);
    ids_free(r->holds, r->nholds);
    for (size_t i = 0; i < r->nrules; i++) {
        free(r->rules[i].path);
        free(r->rules[i].prov.file);
    }
    free(r->rules);
    r->rules = NULL;
    r->nrules = 0;
    r->ids = r->holds = NULL;
    r->nids = r->nholds = 0;
    r->entries = 0;
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
    if (check_names(&p->protect_dirs, "protect_dirs", err) < 0 ||
        check_names(&p->protect_files, "protect_files", err) < 0 ||
        check_names(&p->secret_prefixes, "secret_prefixes", err) < 0 ||
        check_names(&p->scan_skip, "scan_skip", err) < 0)
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

    s.cap = s.base + 256;
    if (!(s.path = malloc(s.cap))) {
        oom(&s);
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
    if (read_top(&s, &tops, &ntops) < 0 || scan_protected(&s, tops, ntops, out) < 0)
        goto done;
    /* A protected directory's contents are read-only: walked for secrets only. A
     * protected file itself is still subject to the hard-link rule. */
    for (size_t i = 0; i < ntops; i++)
        if (visit(&s, s.wsfd, tops[i].name, tops[i].type, 1,
                  tops[i].protected && tops[i].type == DT_DIR ? IN_PROTECTED : 0) < 0)
            goto done;
    if (scan_stores(&s) < 0 || commit_rules(&s, out) < 0 ||
        export_ids(&s, s.rules, s.nrules, &out->ids, &out->nids) < 0 ||
        export_ids(&s, s.holds, s.nholds, &out->holds, &out->nholds) < 0)
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
