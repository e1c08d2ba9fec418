#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static void fill(a3s_error *err, int code, int errnum, const char *fmt, va_list ap)
    A3S_PRINTF(4, 0);
static void fill(a3s_error *err, int code, int errnum, const char *fmt, va_list ap)
{
    if (!err)
        return;
    err->code = code;
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    if (n < 0)
        n = 0;
    if (errnum && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
}

int a3s_fail(a3s_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(err, code, 0, fmt, ap);
    va_end(ap);
    return -1;
}

int a3s_fail_errno(a3s_error *err, int code, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(err, code, errnum, fmt, ap);
    va_end(ap);
    return -1;
}

char *a3s_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

char *a3s_strndup(const char *s, size_t n)
{
    return s ? strndup(s, n) : NULL;
}

static int strv_take(a3s_strv *sv, char *s)
{
    if (!s)
        return -1;
    if (sv->n + 2 > sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 16;
        char **v = realloc(sv->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return -1;
        }
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
    return 0;
}

int a3s_strv_push(a3s_strv *sv, const char *s)
{
    return strv_take(sv, strdup(s));
}

int a3s_strv_pushf(a3s_strv *sv, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    return strv_take(sv, s);
}

void a3s_strv_free(a3s_strv *sv)
{
    if (!sv)
        return;
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    sv->v = NULL;
    sv->n = sv->cap = 0;
}

int a3s_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

ssize_t a3s_read_retry(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = read(fd, buf, len);
        if (r < 0 && errno == EINTR)
            continue;
        return r;
    }
}

bool a3s_path_is_clean(const char *p)
{
    if (!p || p[0] != '/')
        return false;
    if (p[1] == '\0')
        return true;
    const char *c = p + 1;
    for (;;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!e)
            return true;
        c = e + 1;
    }
}

bool a3s_path_within(const char *p, const char *root)
{
    if (strcmp(root, "/") == 0)
        return p[0] == '/';
    size_t n = strlen(root);
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int a3s_path_depth(const char *p)
{
    int d = 0;
    if (strcmp(p, "/") == 0)
        return 0;
    for (; *p; p++)
        if (*p == '/')
            d++;
    return d;
}

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

unsigned long long a3s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000ULL + (unsigned long long)ts.tv_nsec / 1000000ULL;
}

/* Write without ever raising SIGPIPE in the host process when the reader has gone: the host's disposition is not ours to change (the
 * default kills). SIGPIPE is blocked in this thread around the write and one that the
 * write generated is consumed (unless one was already pending before). Returns like
 * write(2). */
ssize_t a3s_write_nosigpipe(int fd, const void *buf, size_t len)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    int e = pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    if (e != 0) {
        errno = e;
        return -1;
    }
    bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    ssize_t w;
    do
        w = write(fd, buf, len);
    while (w < 0 && errno == EINTR);
    int saved = errno;
    if (w < 0 && saved == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return w;
}

int a3s_write_all_nosigpipe(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = a3s_write_nosigpipe(fd, p, len);
        if (w < 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static const struct {
    int num;
    const char *name;
} errno_names[] = {
    {EPERM, "EPERM"},
    {ENOENT, "ENOENT"},
    {ESRCH, "ESRCH"},
    {EINTR, "EINTR"},
    {EIO, "EIO"},
    {ENXIO, "ENXIO"},
    {E2BIG, "E2BIG"},
    {ENOEXEC, "ENOEXEC"},
    {EBADF, "EBADF"},
    {ECHILD, "ECHILD"},
    {EAGAIN, "EAGAIN"},
    {ENOMEM, "ENOMEM"},
    {EACCES, "EACCES"},
    {EFAULT, "EFAULT"},
    {EBUSY, "EBUSY"},
    {EEXIST, "EEXIST"},
    {EXDEV, "EXDEV"},
    {ENODEV, "ENODEV"},
    {ENOTDIR, "ENOTDIR"},
    {EISDIR, "EISDIR"},
    {EINVAL, "EINVAL"},
    {ENFILE, "ENFILE"},
    {EMFILE, "EMFILE"},
    {ENOTTY, "ENOTTY"},
    {ETXTBSY, "ETXTBSY"},
    {EFBIG, "EFBIG"},
    {ENOSPC, "ENOSPC"},
    {ESPIPE, "ESPIPE"},
    {EROFS, "EROFS"},
    {EMLINK, "EMLINK"},
    {EPIPE, "EPIPE"},
    {ERANGE, "ERANGE"},
    {ENAMETOOLONG, "ENAMETOOLONG"},
    {ENOSYS, "ENOSYS"},
    {ELOOP, "ELOOP"},
    {ENOTSOCK, "ENOTSOCK"},
    {EPROTOTYPE, "EPROTOTYPE"},
    {ENOPROTOOPT, "ENOPROTOOPT"},
    {EPROTONOSUPPORT, "EPROTONOSUPPORT"},
    {ESOCKTNOSUPPORT, "ESOCKTNOSUPPORT"},
    {EOPNOTSUPP, "EOPNOTSUPP"},
    {ENOTSUP, "ENOTSUP"}, /* same number as EOPNOTSUPP on Linux: a name only, never given */
    {EPFNOSUPPORT, "EPFNOSUPPORT"},
    {EAFNOSUPPORT, "EAFNOSUPPORT"},
    {EADDRINUSE, "EADDRINUSE"},
    {EADDRNOTAVAIL, "EADDRNOTAVAIL"},
    {ENETDOWN, "ENETDOWN"},
    {ENETUNREACH, "ENETUNREACH"},
    {ECONNABORTED, "ECONNABORTED"},
    {ECONNRESET, "ECONNRESET"},
    {ECONNREFUSED, "ECONNREFUSED"},
    {ETIMEDOUT, "ETIMEDOUT"},
    {EHOSTUNREACH, "EHOSTUNREACH"},
};

/* The first entry with that number wins (EOPNOTSUPP before its alias ENOTSUP). */
const char *a3s_errno_symbol(int errnum)
{
    for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
        if (errno_names[i].num == errnum)
            return errno_names[i].name;
    return NULL;
}

int a3s_errno_from_symbol(const char *name)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
        if (strcmp(errno_names[i].name, name) == 0)
            return errno_names[i].num;
    return -1;
}
