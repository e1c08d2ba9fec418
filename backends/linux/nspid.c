/* The sandbox's pid 1, as the supervisor learns of it and waits for it (nspid.h). */
#include "nspid.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The launcher's words on fd 3. A session's command's launcher is pid 1 of the
 * command's pid namespace and sends a pidfd of itself with its "S" (fd 3 is a socket
 * then): kept as ns_pidfd unless one is known already (bwrap's status). */
ssize_t a3s_nspid_read_started(int fd, char *buf, size_t len, int *ns_pidfd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == ENOTSOCK)
        return read(fd, buf, len);
    struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&m) : NULL;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
        int fd2;
        memcpy(&fd2, CMSG_DATA(c), sizeof fd2);
        /* Signal 0 refuses with EBADF/EINVAL what is not a pidfd. */
        bool pidfd = syscall(SYS_pidfd_send_signal, fd2, 0, NULL, 0) == 0 || errno == ESRCH ||
                     errno == EPERM;
        if (pidfd && *ns_pidfd < 0)
            *ns_pidfd = fd2;
        else
            close(fd2);
    }
    return r;
}

/* Nothing of the tree outlives its run: pid 1 of the pid namespace (killed by now)
 * ends only once the kernel has emptied the namespace; its parent, the top process,
 * may be gone sooner (killed at the deadline). Unbounded, as waiting for a SIGKILLed
 * process is. */
void a3s_nspid_wait(int ns_pidfd)
{
    if (ns_pidfd < 0)
        return;
    (void)syscall(SYS_pidfd_send_signal, ns_pidfd, SIGKILL, NULL, 0);
    struct pollfd p = {ns_pidfd, POLLIN, 0};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
}
