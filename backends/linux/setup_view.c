/* The setup step's look at the view it was given (setup.h): mounts that arrived in it
 * before it was made private, hardened; none below the workspace. */
#include "setup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mountinfo.h"

/* The sandbox's own /dev and /proc (their mount ids): fresh mounts of bubblewrap's or of
 * a session command's (join.c). Nothing propagates into a fresh mount, so whatever is
 * mounted directly on the fresh /dev (its device files, its devpts) was mounted there by
 * the sandbox's makers; a host mount arriving onto one of those device files is mounted
 * on the device file's mount instead, and is an arrival as any other. */
typedef struct own {
    unsigned long long dev, proc;
} own;

/* A host mount that arrived while the sandbox waited for its setup (mounts propagate
 * into it until the view is made private; a sandbox started ahead of its run waits while
 * the run is prepared) comes as the host made it, often writable, setuid and with device
 * files. At this point every mount the command can reach but the sandbox's own /dev and
 * /proc is read-only, nosuid and nodev (its read-only host root): an arrival is made so
 * too, also one onto a device file bound into /dev. One whose path leads elsewhere
 * (mounted over, at its point or above) or that the setup step may not reach (a
 * directory on its way it may not search: neither may the command, with the same ids
 * and no capability) is out of the command's reach; bubblewrap could not make such a
 * one read-only itself. */
static int harden_one(void *ud, const a3s_mountinfo *m)
{
    const own *o = ud;
    if ((m->rdonly && m->nosuid && m->nodev) || m->id == o->dev || m->id == o->proc ||
        m->parent == o->dev)
        return 0;
    int fd = a3s_setup_openat2(AT_FDCWD, m->point, O_PATH | O_NOFOLLOW,
                         RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == EACCES))
        return 0;
    unsigned long long id = 0;
    if (fd < 0 || a3s_setup_mnt_id(fd, &id) < 0) {
        (void)a3s_setup_fail("a mount that arrived at %s: %s", m->point, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1; /* said */
    }
    if (id != m->id) {
        close(fd); /* its path leads elsewhere: it is mounted over */
        return 0;
    }
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    int rc = 0;
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &a, sizeof a) < 0) {
        (void)a3s_setup_fail("making the mount that arrived at %s read-only: %s", m->point,
                             strerror(errno));
        rc = 1;
    }
    close(fd);
    return rc;
}

int a3s_setup_harden(void)
{
    own o = {0, 0};
    int d = a3s_setup_openat2(AT_FDCWD, "/dev", O_PATH | O_DIRECTORY | O_NOFOLLOW, RESOLVE_NO_SYMLINKS);
    int p = a3s_setup_openat2(AT_FDCWD, "/proc", O_PATH | O_DIRECTORY | O_NOFOLLOW, RESOLVE_NO_SYMLINKS);
    bool ok = d >= 0 && p >= 0 && a3s_setup_mnt_id(d, &o.dev) == 0 && a3s_setup_mnt_id(p, &o.proc) == 0;
    int e = errno;
    if (d >= 0)
        close(d);
    if (p >= 0)
        close(p);
    if (!ok)
        return a3s_setup_fail("the sandbox's /dev and /proc: %s", strerror(e));
    int rc = a3s_mountinfo_each(harden_one, &o);
    if (rc < 0)
        return a3s_setup_fail("reading the mount table: %s", strerror(errno));
    return rc ? -1 : 0;
}

static int below_one(void *ud, const a3s_mountinfo *m)
{
    const char *ws = ud;
    size_t wl = strlen(ws);
    if (strncmp(m->point, ws, wl) != 0 || m->point[wl] != '/')
        return 0;
    (void)a3s_setup_fail("a mount at %s appeared in the workspace while the session was "
                         "being set up", m->point);
    return 1; /* said */
}

int a3s_setup_nothing_below(const char *ws)
{
    int rc = a3s_mountinfo_each(below_one, (void *)ws);
    if (rc < 0)
        return a3s_setup_fail("reading the mount table: %s", strerror(errno));
    return rc ? -1 : 0;
}
