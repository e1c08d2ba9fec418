/* The setup step's last part before the filter: the command's identity (setup_identity.h). */
#include "setup_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "setup.h"

#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#endif

static int write_at(int dfd, const char *name, const char *text)
{
    int fd = openat(dfd, name, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return w == (ssize_t)strlen(text) ? 0 : -1;
}

/* The nested namespace does not own the mount namespace, so whatever capabilities it
 * would give cannot change a mount. */
int a3s_setup_identity(unsigned run_uid_, unsigned run_gid_, unsigned show_uid_,
                       unsigned show_gid_)
{
    uid_t run_uid = (uid_t)run_uid_, show_uid = (uid_t)show_uid_;
    gid_t run_gid = (gid_t)run_gid_, show_gid = (gid_t)show_gid_;
    /* A private procfs instance: /proc itself is already read-only, and the maps of the
     * nested namespace are written through this one. */
    int pfs = (int)syscall(SYS_fsopen, "proc", FSOPEN_CLOEXEC);
    int proc = -1;
    if (pfs < 0 || syscall(SYS_fsconfig, pfs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (proc = (int)syscall(SYS_fsmount, pfs, FSMOUNT_CLOEXEC,
                             MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0) {
        int e = errno;
        if (pfs >= 0)
            close(pfs);
        return a3s_setup_fail("procfs for the identity switch: %s", strerror(e));
    }
    close(pfs);
    if (run_uid != 0 || run_gid != 0) {
        if (setgroups(0, NULL) < 0 || setresgid(run_gid, run_gid, run_gid) < 0 ||
            setresuid(run_uid, run_uid, run_uid) < 0) {
            int e = errno;
            close(proc);
            return a3s_setup_fail("switching to uid %u: %s", (unsigned)run_uid, strerror(e));
        }
        /* A uid change makes the process non-dumpable, and /proc/self would then belong
         * to root: the maps below could not be written. */
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0) {
            int e = errno;
            close(proc);
            return a3s_setup_fail("prctl(PR_SET_DUMPABLE): %s", strerror(e));
        }
    }
    uid_t cur_uid = getuid();
    gid_t cur_gid = getgid();
    char map[64];
    if (unshare(CLONE_NEWUSER) < 0) {
        int e = errno;
        close(proc);
        return a3s_setup_fail("nested user namespace: %s", strerror(e));
    }
    int rc = 0;
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)show_uid, (unsigned)cur_uid);
    if (write_at(proc, "self/setgroups", "deny") < 0 || write_at(proc, "self/uid_map", map) < 0)
        rc = a3s_setup_fail("uid map of the command: %s", strerror(errno));
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)show_gid, (unsigned)cur_gid);
    if (rc == 0 && write_at(proc, "self/gid_map", map) < 0)
        rc = a3s_setup_fail("gid map of the command: %s", strerror(errno));
    close(proc);
    if (rc < 0)
        return -1;
    if (setresgid(show_gid, show_gid, show_gid) < 0 || setresuid(show_uid, show_uid, show_uid) < 0)
        return a3s_setup_fail("taking the command's identity: %s", strerror(errno));
    /* No capability survives, and none can come back through exec (also as uid 0). */
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return a3s_setup_fail("dropping capability %d: %s", cap, strerror(errno));
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return a3s_setup_fail("clearing ambient capabilities: %s", strerror(errno));
    if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
                                     SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED,
              0, 0, 0) < 0)
        return a3s_setup_fail("securebits: %s", strerror(errno));
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) < 0)
        return a3s_setup_fail("capset: %s", strerror(errno));
    return 0;
}
