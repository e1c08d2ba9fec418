/* Sessions, the launcher's side (protocol.h: A3S_FD_HOLD, A3S_FD_NS_*).
 *
 * --hold runs once per session, started by bwrap like a fresh run's setup step: it sends
 * the namespaces bwrap made to the session's owner and exits. Nothing of the session runs
 * between its commands; its namespaces live on as the owner's descriptors.
 *
 * --join runs once per command, started on the host by the owner's supervisor. It enters
 * the session's user, mount, UTS and (when unshared) network namespaces, keeps only the
 * capabilities bwrap gives the setup step, and makes the command's own mount, IPC, pid
 * and cgroup namespaces. It stays behind as the namespace's parent (it only waits, holds
 * no descriptor and exits with its child's status); the child is pid 1 of the new pid
 * namespace, mounts the namespace's own /proc, makes its mounts private (nothing it mounts
 * reaches the session's base) and goes on as the setup step, exactly as under bwrap. */
#include "join.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol.h"
#include "setup.h"

extern char **environ;

#ifndef MOUNT_ATTR_SIZE_VER0
#define MOUNT_ATTR_SIZE_VER0 32
#endif

static int fail(const char *what)
{
    fprintf(stderr, "a3s-sandbox: setup: session: %s: %s\n", what, strerror(errno));
    return -1;
}

/* One byte on sock, with the n descriptors fds (at most 4; none when n is 0). */
static int send_byte(int sock, char byte, const int *fds, int n)
{
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
    }
    ssize_t w;
    do
        w = sendmsg(sock, &m, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    return w == 1 ? 0 : -1;
}

int a3s_join_hold(bool with_net, const char *ws)
{
    static const char *const name[4] = {"/proc/self/ns/user", "/proc/self/ns/mnt",
                                        "/proc/self/ns/uts", "/proc/self/ns/net"};
    int fd[4] = {-1, -1, -1, -1};
    int n = with_net ? 4 : 3, rc = -1;
    /* bwrap's /proc stays below each command's own: read-only, as a fresh run's is made
     * (its procfs instance is the session's, not a command's). */
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
    if (syscall(SYS_mount_setattr, AT_FDCWD, "/proc", AT_RECURSIVE, &ro, sizeof ro) < 0)
        return fail("making /proc read-only");
    /* The session's view of the host is the one it started with: a mount the host makes
     * later must not propagate in (it would arrive writable, and under names the
     * session's plan never hid), here nor into any command copied from here. */
    struct mount_attr priv = {.propagation = MS_PRIVATE};
    if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &priv, sizeof priv) < 0)
        return fail("making the session's mounts private");
    /* And what arrived until then made read-only, nosuid and nodev, and none below the
     * workspace, once for all its commands: each is a copy of this view, where nothing
     * arrives any more. */
    if (a3s_setup_harden() < 0 || (ws && a3s_setup_nothing_below(ws) < 0))
        return -1;
    for (int i = 0; i < n; i++)
        if ((fd[i] = open(name[i], O_RDONLY | O_CLOEXEC)) < 0) {
            fail(name[i]);
            goto out;
        }
    if (send_byte(A3S_FD_HOLD, 'N', fd, n) < 0) {
        fail("handing the namespaces over");
        goto out;
    }
    rc = 0;
out:
    for (int i = 0; i < 4; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    return rc;
}

/* The capabilities bwrap gives the setup step (bwrap.c), and no other. */
static int keep_setup_caps(void)
{
    static const int keep[] = {CAP_SYS_ADMIN, CAP_DAC_OVERRIDE, CAP_SETUID, CAP_SETGID,
                               CAP_SETFCAP};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
        d[keep[i] / 32].effective |= 1u << (keep[i] % 32);
        d[keep[i] / 32].permitted |= 1u << (keep[i] % 32);
    }
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++) {
        bool kept = (d[cap / 32].permitted >> (cap % 32)) & 1u;
        if (!kept && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return fail("dropping capabilities");
    }
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    if (syscall(SYS_capset, &h, d) < 0)
        return fail("capset");
    return 0;
}

static int fresh_proc(void)
{
    int fs = (int)syscall(SYS_fsopen, "proc", FSOPEN_CLOEXEC);
    if (fs < 0)
        return fail("procfs");
    int m = -1;
    /* Read-only as bwrap leaves it (the command's uid may be the host's root, and procfs
     * checks host-global knobs by uid alone). */
    if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                              MOUNT_ATTR_NOEXEC)) < 0) {
        int e = errno;
        close(fs);
        errno = e;
        return fail("procfs");
    }
    close(fs);
    int rc = (int)syscall(SYS_move_mount, m, "", AT_FDCWD, "/proc", MOVE_MOUNT_F_EMPTY_PATH);
    int e = errno;
    close(m);
    errno = e;
    return rc < 0 ? fail("mounting /proc") : 0;
}

/* A fresh detached instance of filesystem `type` with the given string options. */
static int new_fs(const char *type, const char *const *opts, unsigned attrs)
{
    int fs = (int)syscall(SYS_fsopen, type, FSOPEN_CLOEXEC);
    if (fs < 0)
        return -1;
    int m = -1;
    bool ok = true;
    for (size_t i = 0; opts && opts[i] && ok; i += 2)
        ok = syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, opts[i], opts[i + 1], 0) == 0;
    if (ok && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
        m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs);
    int e = errno;
    close(fs);
    errno = e;
    return m;
}

static int move_to(int from, int dfd, const char *path)
{
    int rc = (int)syscall(SYS_move_mount, from, "", dfd, path, MOVE_MOUNT_F_EMPTY_PATH);
    int e = errno;
    close(from);
    errno = e;
    return rc;
}

/* The command's own /dev, as bwrap's --dev makes it (the session's is shared by its
 * commands, and writable by them: /dev/shm): a new tmpfs with the same device nodes
 * (bound from the session's), links and empty directories, and a devpts instance of its
 * own (another command's terminals are not there). */
static int fresh_dev(void)
{
    int base = open("/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (base < 0)
        return fail("/dev");
    static const char *const dev_opts[] = {"mode", "0755", NULL};
    int m = new_fs("tmpfs", dev_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    int dup_base = -1, rc = -1;
    DIR *d = NULL;
    if (m < 0) {
        fail("tmpfs for /dev");
        goto out;
    }
    /* Attached first: mounts are then made beneath an attached mount, as always. */
    int m2 = fcntl(m, F_DUPFD_CLOEXEC, 0);
    if (m2 < 0 || move_to(m2, AT_FDCWD, "/dev") < 0) {
        fail("mounting /dev");
        goto out;
    }
    if ((dup_base = fcntl(base, F_DUPFD_CLOEXEC, 0)) < 0 || !(d = fdopendir(dup_base))) {
        fail("reading /dev");
        goto out;
    }
    dup_base = -1; /* the stream's now */
    struct dirent *e;
    while ((errno = 0, e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, ".."))
            continue;
        struct stat st;
        if (fstatat(base, n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            fail(n);
            goto out;
        }
        if (S_ISLNK(st.st_mode)) {
            char target[256];
            ssize_t len = readlinkat(base, n, target, sizeof target - 1);
            if (len < 0 || (target[len] = '\0', symlinkat(target, m, n) < 0)) {
                fail(n);
                goto out;
            }
        } else if (S_ISDIR(st.st_mode)) {
            if (mkdirat(m, n, st.st_mode & 07777) < 0) {
                fail(n);
                goto out;
            }
            if (!strcmp(n, "pts")) {
                static const char *const pts_opts[] = {"mode", "620", "ptmxmode", "666", NULL};
                int pts = new_fs("devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
                if (pts < 0 || move_to(pts, m, "pts") < 0) {
                    fail("devpts");
                    goto out;
                }
            }
        } else if (S_ISCHR(st.st_mode)) {
            int f = openat(m, n, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
            if (f < 0) {
                fail(n);
                goto out;
            }
            close(f);
            int src = (int)syscall(SYS_open_tree, base, n, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
            if (src < 0 || move_to(src, m, n) < 0) {
                fail(n);
                goto out;
            }
        }
    }
    if (errno != 0) {
        fail("reading /dev");
        goto out;
    }
    rc = 0;
out:
    if (d)
        closedir(d);
    if (dup_base >= 0)
        close(dup_base);
    if (m >= 0)
        close(m);
    close(base);
    return rc;
}

int a3s_join_enter(void)
{
    static const struct {
        int fd, type;
        const char *what;
    } ns[] = {
        {A3S_FD_NS_USER, CLONE_NEWUSER, "the session's user namespace"},
        {A3S_FD_NS_MNT, CLONE_NEWNS, "the session's mount namespace"},
        {A3S_FD_NS_UTS, CLONE_NEWUTS, "the session's UTS namespace"},
        {A3S_FD_NS_NET, CLONE_NEWNET, "the session's network namespace"},
    };
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        if (ns[i].fd == A3S_FD_NS_NET && fcntl(ns[i].fd, F_GETFD) < 0 && errno == EBADF)
            continue; /* the host's network (a plan that keeps it) */
        if (setns(ns[i].fd, ns[i].type) < 0)
            return fail(ns[i].what);
        if (close(ns[i].fd) < 0)
            return fail("closing a namespace");
    }
    if (keep_setup_caps() < 0)
        return -1;
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWCGROUP) < 0)
        return fail("the command's namespaces");
    /* The child learns of this process's death by its pipe (a parent in another pid
     * namespace is not its getppid()). */
    int life[2];
    if (pipe2(life, O_CLOEXEC) < 0)
        return fail("pipe2");
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork");
    if (pid > 0) {
        /* Hold nothing the command's tree or the supervisor waits on, only the child's
         * lifeline: wait. */
        if (life[1] > 0)
            (void)syscall(SYS_close_range, 0U, (unsigned)life[1] - 1, 0);
        (void)syscall(SYS_close_range, (unsigned)life[1] + 1, ~0U, 0);
        int status;
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR)
                _exit(A3S_EXIT_SETUP);
        if (WIFEXITED(status))
            _exit(WEXITSTATUS(status));
        _exit(128 + WTERMSIG(status));
    }
    close(life[1]);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        return fail("prctl(PR_SET_PDEATHSIG)");
    struct pollfd p = {life[0], POLLIN, 0};
    if (poll(&p, 1, 0) != 0)
        _exit(A3S_EXIT_SETUP); /* the parent is already gone */
    close(life[0]);
    /* Nothing mounted here may reach the session's base namespace. */
    struct mount_attr a = {.propagation = MS_PRIVATE};
    if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &a, sizeof a) < 0)
        return fail("private mounts");
    return fresh_proc() < 0 || fresh_dev() < 0 ? -1 : 0;
}

/* ---- a warm launcher (protocol.h: A3S_FD_WARM) ------------------------------------------ */

#define WARM_MAX_FDS 12

/* The numbers a command's descriptors may take: its stdio and what a launcher started
 * for it would have been given (protocol.h). */
static bool warm_target_ok(int t)
{
    return t == 0 || t == 1 || t == 2 || t == A3S_FD_STARTED || t == A3S_FD_SECCOMP ||
           t == A3S_FD_SETUP || t == A3S_FD_WS_MOUNT || t == A3S_FD_SCRATCH_MOUNT;
}

/* NUL-terminated strings from *p on (before end): a count, then that many strings, as a
 * NULL-terminated vector pointing into the buffer. NULL when malformed. */
static char **warm_strings(char **p, char *end)
{
    char *nul = memchr(*p, '\0', (size_t)(end - *p));
    if (!nul || nul == *p)
        return NULL;
    char *stop;
    errno = 0;
    unsigned long n = strtoul(*p, &stop, 10);
    if (errno || stop != nul || n > (size_t)(end - *p))
        return NULL;
    *p = nul + 1;
    char **v = calloc(n + 1, sizeof *v);
    for (unsigned long i = 0; v && i < n; i++) {
        if (*p >= end || !(nul = memchr(*p, '\0', (size_t)(end - *p)))) {
            free(v);
            return NULL;
        }
        v[i] = *p;
        *p = nul + 1;
    }
    return v;
}

/* The launcher argv and the environment from the sealed memfd fd (closed here). */
static int warm_args(int fd, int *argc, char ***argv)
{
    struct stat st;
    char *buf = NULL;
    int rc = -1;
    if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > (64 << 20) ||
        !(buf = malloc((size_t)st.st_size))) {
        close(fd);
        return fail("warm: the command's arguments");
    }
    size_t len = (size_t)st.st_size, have = 0;
    while (have < len) {
        ssize_t r = pread(fd, buf + have, len - have, (off_t)have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    close(fd);
    char *p = buf, *end = buf + have;
    char **av = NULL, **env = NULL;
    if (have == len && len > sizeof A3S_WARM_ARGS_MAGIC &&
        !memcmp(p, A3S_WARM_ARGS_MAGIC, sizeof A3S_WARM_ARGS_MAGIC)) {
        p += sizeof A3S_WARM_ARGS_MAGIC;
        if ((av = warm_strings(&p, end)) && av[0] && (env = warm_strings(&p, end)) &&
            p == end)
            rc = 0;
    }
    if (rc < 0) {
        free(av);
        free(env);
        free(buf);
        errno = EINVAL;
        return fail("warm: the command's arguments");
    }
    int n = 0;
    while (av[n])
        n++;
    *argc = n;
    *argv = av;
    environ = env; /* the command's, as a launcher started for it would have had */
    return 0;      /* buf stays: the vectors point into it */
}

/* "R", with this process's mount namespace when it can be opened (protocol.h). */
static int say_ready(void)
{
    int ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    int rc = send_byte(A3S_FD_WARM, 'R', &ns, ns >= 0 ? 1 : 0);
    if (ns >= 0)
        close(ns);
    return rc;
}

int a3s_join_warm(int *argc, char ***argv)
{
    if (say_ready() < 0)
        return fail("warm: saying it is ready");
    char payload[1 + sizeof(int) * WARM_MAX_FDS];
    union {
        char buf[CMSG_SPACE(sizeof(int) * WARM_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {payload, sizeof payload};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    ssize_t r;
    do
        r = recvmsg(A3S_FD_WARM, &m, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        _exit(0); /* its worker went away before any command came: nothing to say */
    if (r < 0)
        return fail("warm: waiting for the command");
    int fds[WARM_MAX_FDS], tgt[WARM_MAX_FDS];
    size_t nfd = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfd < WARM_MAX_FDS; i++)
            memcpy(&fds[nfd++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    size_t nt = r > 0 ? ((size_t)r - 1) / sizeof(int) : 0;
    bool ok = !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && payload[0] == 'W' &&
              ((size_t)r - 1) % sizeof(int) == 0 && nt == nfd;
    memcpy(tgt, payload + 1, nt * sizeof(int));
    int args = -1;
    for (size_t i = 0; ok && i < nt; i++) {
        for (size_t j = 0; j < i; j++)
            ok = ok && tgt[j] != tgt[i];
        if (tgt[i] == -1)
            args = (int)i;
        else
            ok = ok && warm_target_ok(tgt[i]);
    }
    ok = ok && args >= 0;
    /* Above every number first, so that placing one never closes another still to be
     * placed. */
    for (size_t i = 0; ok && i < nfd; i++) {
        int hi = fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
        ok = hi >= 0;
        if (ok) {
            close(fds[i]);
            fds[i] = hi;
        }
    }
    for (size_t i = 0; ok && i < nfd; i++)
        if (tgt[i] >= 0)
            ok = dup2(fds[i], tgt[i]) == tgt[i];
    for (size_t i = 0; i < nfd; i++)
        if (!ok || (int)i != args)
            close(fds[i]);
    close(A3S_FD_WARM);
    if (!ok) {
        errno = EPROTO;
        return fail("warm: the command's descriptors");
    }
    return warm_args(fds[args], argc, argv);
}
