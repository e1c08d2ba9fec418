/* Root callers run the command under an unprivileged host id.
 *
 * A command running as host uid 0, even without capabilities, passes every owner check
 * on root's files (0600 keys, databases). So for a root caller bwrap joins a prepared
 * user namespace (--userns) whose uid/gid 0 is host root, for bwrap and the trusted
 * setup step only, and whose uid/gid 1 is an unprivileged host id (A3S_MAPPED_ID_DEFAULT,
 * or $A3S_SANDBOX_MAPPED_ID). The setup step switches to 1 before the command starts.
 * The workspace and the scratch dir are bound through idmapped mounts (a second user
 * namespace maps on-disk 0 to that id), so the command owns its files inside and what it
 * creates belongs to root on the host, while everything else owned by root is out of its
 * reach. The namespaces are made the way systemd and runc make them: a child in a new
 * user namespace that only waits, its maps written from here, its ns fd kept. */
#include "rootid.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = a3s_write_all(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* In the namespace child: every fd above stderr but keep closed (async-signal-safe only). */
static void close_all_but(int keep)
{
    if (keep > 3 && syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0U) < 0)
        goto one_by_one;
    if (syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U) == 0)
        return;
one_by_one:;
    struct rlimit rl;
    int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int)rl.rlim_cur
                                                                          : 65536;
    for (int fd = 3; fd < max; fd++)
        if (fd != keep)
            (void)close(fd);
}

static int ns_child(void *arg)
{
    int rfd = *(const int *)arg;
    /* Nothing of the host process's but its own pipe end: this child never execs, so a
     * copy it kept of another thread's pipe (that thread's own namespace child waiting
     * for it to close) would wait on us as we wait on it. */
    close_all_but(rfd);
    /* (errno here is our caller's: only a kernel without close_range could write it.) */
    char c;
    while (read(rfd, &c, 1) < 0 && errno == EINTR)
        ;
    _exit(0);
}

/* A user namespace with `map` as both its uid and gid map; returns its fd.
 * The child that holds it shares our memory (CLONE_VM) and only waits for the pipe to
 * close, on a stack of its own, with every signal blocked: a forked child would copy the
 * page tables and leave each page we write afterwards to a copy-on-write fault. */
#define NS_CHILD_STACK (64 * 1024)
static int make_userns(const char *map, a3s_error *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "user namespace: pipe2");
    void *stack = mmap(NULL, NS_CHILD_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    sigset_t all, old;
    sigfillset(&all);
    pid_t pid = -1;
    int e = ENOMEM;
    if (stack != MAP_FAILED && (e = pthread_sigmask(SIG_SETMASK, &all, &old)) == 0) {
#ifdef A3S_UNDER_ASAN
        pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, NULL, NULL, 0);
        if (pid == 0)
            ns_child(&p[0]);
#else
        pid = clone(ns_child, (char *)stack + NS_CHILD_STACK, CLONE_VM | CLONE_NEWUSER | SIGCHLD,
                    &p[0]);
#endif
        e = errno;
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (pid < 0) {
        if (stack != MAP_FAILED)
            (void)munmap(stack, NS_CHILD_STACK);
        close(p[0]);
        close(p[1]);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "cannot create a user namespace");
    }
    close(p[0]);
    char path[64];
    int fd = -1, rc = 0;
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
    if (write_file(path, map) < 0)
        rc = -1;
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
    if (rc == 0 && write_file(path, map) < 0)
        rc = -1;
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    if (rc == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        rc = -1;
    e = errno;
    close(p[1]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    (void)munmap(stack, NS_CHILD_STACK); /* the child is gone: its stack with it */
    if (rc < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "cannot set up the user namespace for "
                              "the unprivileged command id");
    return fd;
}

int a3s_rootid_open(a3s_rootid *r, uint32_t id, a3s_error *err)
{
    char map[80];
    r->id = id;
    snprintf(map, sizeof map, "0 0 1\n1 %u 1\n", id);
    if ((r->sandbox_ns = make_userns(map, err)) < 0)
        return -1;
    snprintf(map, sizeof map, "0 %u 1\n", id);
    if ((r->idmap_ns = make_userns(map, err)) < 0) {
        a3s_rootid_close(r);
        return -1;
    }
    return 0;
}

void a3s_rootid_close(a3s_rootid *r)
{
    if (r->sandbox_ns >= 0)
        close(r->sandbox_ns);
    if (r->idmap_ns >= 0)
        close(r->idmap_ns);
    r->sandbox_ns = r->idmap_ns = -1;
}

int a3s_rootid_clone(const a3s_rootid *r, int dirfd, const char *what, const char *path,
                     bool rdonly, a3s_error *err)
{
    int fd = (int)syscall(SYS_open_tree, dirfd, "",
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (fd < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot clone the %s %s", what, path);
    struct mount_attr a = {
        .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                    (rdonly ? MOUNT_ATTR_RDONLY : 0),
        .userns_fd = (unsigned long long)r->idmap_ns,
    };
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0) {
        int e = errno;
        close(fd);
        if (e == EINVAL || e == EOPNOTSUPP || e == EPERM)
            return a3s_fail_errno(err, A3S_ERR_SETUP, e,
                                  "the %s %s cannot be idmapped (its filesystem, or one mounted "
                                  "below it, does not support idmapped mounts), so the command "
                                  "cannot run under an unprivileged id; --allow-host-root runs "
                                  "it as host root instead",
                                  what, path);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "idmapping the %s %s", what, path);
    }
    return fd;
}
