/* See ptypeer.h. */
#include "ptypeer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "util.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

int a3s_pty_open(int master, int *slave, int *rd, int *wr, a3s_error *err)
{
    *slave = *rd = *wr = -1;
    /* TIOCGPTPEER (Linux 4.13) opens the slave of exactly this master, whatever /dev/pts
     * holds; it fails on anything that is not a pty master, which is the check. */
    int s = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s < 0)
        return a3s_fail_errno(err, A3S_ERR_INVALID, errno,
                              "tty: fd %d is not a pseudo-terminal master", master);
    int r = fcntl(master, F_DUPFD_CLOEXEC, 3);
    int w = r >= 0 ? fcntl(master, F_DUPFD_CLOEXEC, 3) : -1;
    /* Never block the supervisor (its deadline): its reads and writes wait in poll. The
     * flag is on the caller's open file description too, which only it uses for ioctls. */
    int fl = w >= 0 ? fcntl(w, F_GETFL) : -1;
    if (fl < 0 || fcntl(w, F_SETFL, fl | O_NONBLOCK) < 0) {
        int e = errno;
        close(s);
        if (r >= 0)
            close(r);
        if (w >= 0)
            close(w);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "tty: the master's copies");
    }
    *slave = s;
    *rd = r;
    *wr = w;
    return 0;
}
