/* Placeholders kept between runs (pinstash.h). */
#include "pinstash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rmtree.h"

#define KEEP_TAG ".keep-"

void a3s_pinstash_init(a3s_pinstash *s, int statefd, int wsfd, const struct stat *ws,
                       const char *key)
{
    s->statefd = -1;
    s->prefix[0] = '\0';
    struct stat sd;
    struct statx sx;
    if (statefd < 0 || fstat(statefd, &sd) < 0 || sd.st_dev != ws->st_dev ||
        statx(wsfd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BTIME | STATX_INO, &sx) < 0 ||
        !(sx.stx_mask & STATX_BTIME) || sx.stx_ino != (unsigned long long)ws->st_ino)
        return;
    int n = snprintf(s->prefix, sizeof s->prefix, "%s" KEEP_TAG "%llx.%x-", key,
                     (unsigned long long)sx.stx_btime.tv_sec, (unsigned)sx.stx_btime.tv_nsec);
    if (n > 0 && (size_t)n < sizeof s->prefix)
        s->statefd = statefd;
}

/* The entry's name for (name, dir) into out (NAME_MAX + 1 bytes); false: not kept. */
static bool entry_name(const a3s_pinstash *s, const char *name, bool dir, char *out)
{
    size_t len = strlen(name);
    if (s->statefd < 0 || len == 0 || len > A3S_PINSTASH_NAME_MAX)
        return false;
    int n = snprintf(out, NAME_MAX + 1, "%s%c-", s->prefix, dir ? 'd' : 'f');
    if (n < 0 || (size_t)n + 2 * len > NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        snprintf(out + n + 2 * i, 3, "%02x", (unsigned char)name[i]);
    return true;
}

/* Is fd an empty placeholder of ours as a pin is made: a directory 0700 with nothing in
 * it, or a regular file 0600 of size 0 with one link; owned by this user. */
static bool empty_ours(int fd, bool dir, struct stat *st)
{
    if (fstat(fd, st) < 0 || st->st_uid != geteuid() ||
        (st->st_mode & 07777) != (dir ? 0700u : 0600u))
        return false;
    if (!dir)
        return S_ISREG(st->st_mode) && st->st_size == 0 && st->st_nlink == 1;
    if (!S_ISDIR(st->st_mode) || st->st_nlink != 2)
        return false;
    /* Only "." and "..": read from the start with a descriptor of its own. */
    int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return false;
    char buf[512];
    bool empty = true;
    for (;;) {
        long n = syscall(SYS_getdents64, d, buf, sizeof buf);
        if (n < 0)
            empty = false;
        if (n <= 0)
            break;
        for (long off = 0; off < n && empty;) {
            const char *nm = buf + off + 19; /* d_ino 8, d_off 8, d_reclen 2, d_type 1 */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            if (strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0)
                empty = false;
            off += reclen;
        }
        if (!empty)
            break;
    }
    close(d);
    return empty;
}

static int open_entry(int dfd, const char *name, bool dir)
{
    /* O_NONBLOCK: whatever is there, a FIFO included, opening it never waits. */
    return openat(dfd, name,
                  O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int a3s_pinstash_open(const a3s_pinstash *s, const char *name, bool dir, struct stat *st)
{
    char en[NAME_MAX + 1];
    if (!entry_name(s, name, dir, en))
        return -1;
    int fd = open_entry(s->statefd, en, dir);
    if (fd < 0) {
        if (errno != ENOENT)
            (void)a3s_rmtree_at(s->statefd, en); /* not what we keep there */
        return -1;
    }
    if (!empty_ours(fd, dir, st)) {
        close(fd);
        (void)a3s_rmtree_at(s->statefd, en);
        return -1;
    }
    return fd;
}

int a3s_pinstash_place(const a3s_pinstash *s, int fd, int wsfd, const char *name, bool dir)
{
    char en[NAME_MAX + 1];
    if (!entry_name(s, name, dir, en)) {
        errno = EINVAL;
        return -1;
    }
    if (renameat2(s->statefd, en, wsfd, name, RENAME_NOREPLACE) < 0)
        return -1;
    /* Checked again through the descriptor: written or linked since it was opened (a
     * holder of an old descriptor), or not what the name now is, it is no pin. */
    struct stat st, at;
    if (!empty_ours(fd, dir, &st) || fstatat(wsfd, name, &at, AT_SYMLINK_NOFOLLOW) < 0 ||
        !same_inode(&st, &at)) {
        errno = ESTALE;
        return -1;
    }
    return 0;
}

bool a3s_pinstash_keep(const a3s_pinstash *s, int wsfd, const struct a3s_pin_entry *e)
{
    char en[NAME_MAX + 1];
    if (e->tmp || !entry_name(s, e->name, e->dir, en))
        return false;
    int fd = open_entry(wsfd, e->name, e->dir);
    struct stat st, at;
    if (fd < 0)
        return false;
    if (!empty_ours(fd, e->dir, &st) || st.st_dev != e->dev || st.st_ino != e->ino ||
        st.st_ctim.tv_sec != e->ctim.tv_sec || st.st_ctim.tv_nsec != e->ctim.tv_nsec) {
        close(fd);
        return false;
    }
    /* A leftover entry (a holder killed while keeping) is replaced. */
    int rc = renameat2(wsfd, e->name, s->statefd, en, RENAME_NOREPLACE);
    if (rc < 0 && errno == EEXIST && a3s_rmtree_at(s->statefd, en) == 0)
        rc = renameat2(wsfd, e->name, s->statefd, en, RENAME_NOREPLACE);
    if (rc < 0) {
        close(fd);
        return false;
    }
    if (fstatat(s->statefd, en, &at, AT_SYMLINK_NOFOLLOW) < 0 || !same_inode(&st, &at)) {
        /* Swapped in the workspace between the check and the move: not ours. It goes back
         * where it was; if even that is taken, it is removed as the pin would have been. */
        if (renameat2(s->statefd, en, wsfd, e->name, RENAME_NOREPLACE) < 0)
            (void)a3s_rmtree_at(s->statefd, en);
        close(fd);
        return true;
    }
    /* Written through an old descriptor on its way: it is not kept, and what was put in
     * it goes with it (it is ours, out of the workspace). */
    if (!empty_ours(fd, e->dir, &st))
        (void)a3s_rmtree_at(s->statefd, en);
    close(fd);
    return true;
}

void a3s_pinstash_sweep_one(int statefd, const char *name)
{
    const char *tag = strstr(name, KEEP_TAG);
    struct stat st;
    struct timespec now;
    if (!tag || strncmp(name, "ws-", 3) != 0 || fstatat(statefd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        clock_gettime(CLOCK_REALTIME, &now) < 0)
        return;
    /* The move into the stash set its ctime: that is when it was last used. */
    if (now.tv_sec - st.st_ctim.tv_sec >= A3S_PINSTASH_TTL_SECONDS ||
        st.st_ctim.tv_sec - now.tv_sec > 60)
        (void)a3s_rmtree_at(statefd, name);
}
