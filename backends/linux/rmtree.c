#include "rmtree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* ---- a3s_rmtree_at ------------------------------------------------------------------
 * Iterative, so that no depth (the command controls it) can exhaust the stack or give up
 * half way, and with at most three fds of its own open at any time: the current
 * directory, the one being entered or left, and the duplicate that a listing reads. The
 * path down is kept as identities (dev, ino), and every step up goes through ".." and
 * must land on the recorded parent, so a tree moved meanwhile is never emptied somewhere
 * else. Each directory is listed once, completely, before anything in it is removed (no
 * readdir position across removals); the entries wait in one arena used as a stack, so
 * memory is bounded by the entries still pending, not by fds. Symlinks are never
 * followed (unlinkat, O_NOFOLLOW), other mounts are never entered, and directories the
 * command made unreadable are chmod'ed first. */

typedef struct rm_id {
    dev_t dev;
    ino_t ino;
    mode_t mode;
    uint64_t mnt; /* mount id, when the kernel reports it (has_mnt) */
    bool has_mnt;
} rm_id;

typedef struct rm_dir {
    dev_t dev;
    ino_t ino;
    size_t start, end, cur; /* its entries in the arena: [start, end), next at cur */
} rm_dir;

typedef struct rm_tree {
    rm_dir *dirs; /* dirs[0]: the top; dirs[n - 1]: the current directory */
    size_t n, cap;
    char *arena; /* entries: one d_type byte, the name, a NUL */
    size_t len, acap;
    rm_id top;
} rm_tree;

static int rm_identify(int fd, rm_id *id)
{
    struct statx sx;
    memset(id, 0, sizeof *id);
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
              STATX_TYPE | STATX_MODE | STATX_INO | STATX_MNT_ID, &sx) == 0) {
        id->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        id->ino = (ino_t)sx.stx_ino;
        id->mode = sx.stx_mode;
        id->has_mnt = (sx.stx_mask & STATX_MNT_ID) != 0;
        id->mnt = sx.stx_mnt_id;
        return 0;
    }
    /* statx unavailable (old kernel, a container's seccomp profile): st_dev alone. */
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->mode = st.st_mode;
    return 0;
}

/* Same mount as the top: same device (a btrfs subvolume counts as another one) and,
 * where known, the same mount id (a bind mount of the same filesystem does not). */
static bool rm_same_mount(const rm_id *a, const rm_id *b)
{
    return a->dev == b->dev && (!a->has_mnt || !b->has_mnt || a->mnt == b->mnt);
}

/* Open a directory entry without following a symlink; one the command made unreadable
 * or unsearchable is chmod'ed (never through a symlink) and opened again. */
static int rm_open_dir(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES && fchmodat(parent, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd;
}

static int rm_arena_put(rm_tree *t, unsigned char type, const char *name)
{
    size_t n = strlen(name) + 2;
    if (t->len + n > t->acap) {
        size_t cap = t->acap ? t->acap : 4096;
        while (cap < t->len + n)
            cap *= 2;
        char *a = realloc(t->arena, cap);
        if (!a)
            return -1;
        t->arena = a;
        t->acap = cap;
    }
    t->arena[t->len] = (char)type;
    memcpy(t->arena + t->len + 1, name, n - 1);
    t->len += n;
    return 0;
}

/* Owner rwx on a directory of the tree, so that it can be listed, searched (also for
 * "..") and emptied: the command may have taken any of them away. */
static void rm_own(int fd, rm_id *id)
{
    if ((id->mode & 0700) != 0700 && fchmod(fd, 0700) == 0)
        id->mode = S_IFDIR | 0700; /* if fchmod fails, the removals below report it */
}

/* Make fd (a directory of the tree, rm_own'ed) the current one, with its complete
 * listing. Returns -1 when it could not be entered (nothing pushed) and 1 when entered
 * but not completely listed. */
static int rm_enter(rm_tree *t, int fd, const rm_id *id)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        rm_dir *d = realloc(t->dirs, cap * sizeof *d);
        if (!d)
            return -1;
        t->dirs = d;
        t->cap = cap;
    }
    size_t start = t->len;
    int rc = 0;
    /* A duplicate for the DIR stream: fd stays ours for the *at calls. */
    int lfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        if (lfd >= 0)
            close(lfd);
        rc = 1;
    } else {
        struct dirent *e;
        for (;;) {
            errno = 0;
            if (!(e = readdir(d))) {
                if (errno)
                    rc = 1;
                break;
            }
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (rm_arena_put(t, e->d_type, e->d_name) < 0) {
                rc = 1;
                break;
            }
        }
        closedir(d);
    }
    t->dirs[t->n++] = (rm_dir){id->dev, id->ino, start, t->len, start};
    return rc;
}

int a3s_rmtree_at(int dfd, const char *name)
{
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    int fd = rm_open_dir(dfd, name);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;

    rm_tree t;
    memset(&t, 0, sizeof t);
    int rc = 0;
    /* The top must not be a mount point itself: its parent is on its mount. */
    rm_id up;
    int pfd = -1;
    bool usable = rm_identify(fd, &t.top) == 0;
    if (usable) {
        rm_own(fd, &t.top);
        pfd = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        usable = pfd >= 0 && rm_identify(pfd, &up) == 0 && rm_same_mount(&t.top, &up);
    }
    if (pfd >= 0)
        close(pfd);
    if (!usable) {
        close(fd);
        return -1;
    }
    int er = rm_enter(&t, fd, &t.top);
    if (er < 0) {
        close(fd);
        return -1;
    }
    if (er > 0)
        rc = -1;

    while (t.n > 0) {
        rm_dir *d = &t.dirs[t.n - 1];
        if (d->cur < d->end) {
            unsigned char type = (unsigned char)t.arena[d->cur];
            const char *nm = t.arena + d->cur + 1;
            size_t next = d->cur + strlen(nm) + 2;
            if (type != DT_DIR) {
                /* Files, symlinks (never followed), FIFOs, sockets, devices. */
                if (unlinkat(fd, nm, 0) == 0 || errno == ENOENT) {
                    d->cur = next;
                    continue;
                }
                if (errno != EISDIR && errno != EPERM) {
                    rc = -1;
                    d->cur = next;
                    continue;
                }
            }
            int cfd = rm_open_dir(fd, nm);
            rm_id cid;
            if (cfd < 0) {
                /* Gone, or no longer a directory (replaced meanwhile): unlink that. */
                int e = errno;
                bool gone = e == ENOENT || ((e == ENOTDIR || e == ELOOP) &&
                                            (unlinkat(fd, nm, 0) == 0 || errno == ENOENT));
                if (!gone)
                    rc = -1;
                d->cur = next;
                continue;
            }
            if (rm_identify(cfd, &cid) < 0 || !rm_same_mount(&t.top, &cid)) {
                /* Another mount: not ours to empty; the rest still goes. */
                close(cfd);
                rc = -1;
                d->cur = next;
                continue;
            }
            rm_own(cfd, &cid);
            er = rm_enter(&t, cfd, &cid); /* may move t.dirs: d is stale after this */
            if (er < 0) {
                close(cfd);
                rc = -1;
                t.dirs[t.n - 1].cur = next;
                continue;
            }
            if (er > 0)
                rc = -1;
            close(fd);
            fd = cfd;
            continue;
        }

        /* Every entry handled: leave the directory, then remove it from its parent. */
        t.len = d->start;
        t.n--;
        if (t.n == 0) {
            close(fd);
            fd = -1;
            if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                rc = -1;
            break;
        }
        rm_dir *p = &t.dirs[t.n - 1];
        rm_id seen;
        pfd = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0 || rm_identify(pfd, &seen) < 0 || seen.dev != p->dev || seen.ino != p->ino) {
            /* Moved while we were inside: stop rather than remove anything elsewhere. */
            if (pfd >= 0)
                close(pfd);
            rc = -1;
            break;
        }
        close(fd);
        fd = pfd;
        const char *child = t.arena + p->cur + 1;
        if (unlinkat(fd, child, AT_REMOVEDIR) < 0 && errno != ENOENT)
            rc = -1;
        p->cur += strlen(child) + 2;
    }
    if (fd >= 0)
        close(fd);
    free(t.dirs);
    free(t.arena);
    return rc;
}
