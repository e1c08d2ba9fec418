/* The client side of `session exec` (session_io.h): the request, the client's stdio, the
 * answer. A pipe, file or socket among 0, 1 and 2 is handed over as it is (the worker
 * reads and writes it directly, the fast path). A terminal never is: the worker is not in
 * the terminal's session, so the kernel's job control (a background job that reads the
 * terminal) would not apply to it, and a suspended or backgrounded client would let the
 * command read what the user types for the shell. So a terminal is relayed by the client
 * itself through a pipe: stopped with ^Z, the client reads nothing and passes nothing on
 * (the command then waits on its output, as under a fresh run); in the background, its
 * reads fail (EIO: SIGTTIN is blocked, as in a fresh run) and it retries later. */
#include "session_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RELAY_CHUNK 65536

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* All of buf to a blocking fd (a terminal); false when it is gone. */
static bool put_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
            struct pollfd pf = {fd, POLLOUT, 0};
            (void)poll(&pf, 1, 100);
            continue;
        }
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

int a3s_sio_exec(int conn, const char *req, size_t len, int sig_fd)
{
    int pass[3] = {0, 1, 2};
    int in_w = -1, out_r[2] = {-1, -1};
    int rc = -1;
    char *buf = malloc(RELAY_CHUNK);
    if (!buf)
        return -1;
    for (int k = 0; k < 3; k++) {
        if (!isatty(k))
            continue;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            goto out;
        if (k == 0) {
            pass[0] = p[0];
            in_w = p[1];
        } else {
            pass[k] = p[1];
            out_r[k - 1] = p[0];
        }
    }
    if (in_w >= 0) {
        /* Our own pipe: never blocking on a command that reads no stdin. */
        if (fcntl(in_w, F_SETFL, O_NONBLOCK) < 0)
            goto out;
        sigset_t ttin;
        sigemptyset(&ttin);
        sigaddset(&ttin, SIGTTIN);
        (void)sigprocmask(SIG_BLOCK, &ttin, NULL);
    }
    if (a3s_sio_send(conn, req, len, pass, 3) < 0)
        goto out;
    for (int k = 0; k < 3; k++)
        if (pass[k] != k)
            close(pass[k]);
    pass[0] = 0, pass[1] = 1, pass[2] = 2;

    bool shut = false, have_rc = false;
    char *pend = NULL; /* typed bytes not yet in the command's pipe */
    size_t npend = 0;
    struct timespec resume = {0, 0};
    for (;;) {
        if (have_rc && out_r[0] < 0 && out_r[1] < 0)
            break;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        bool paused = now.tv_sec < resume.tv_sec ||
                      (now.tv_sec == resume.tv_sec && now.tv_nsec < resume.tv_nsec);
        struct pollfd pf[6];
        int n = 0, i_conn = -1, i_sig = -1, i_in = -1, i_w = -1, i_out[2] = {-1, -1};
        if (!have_rc) {
            i_conn = n;
            pf[n++] = (struct pollfd){conn, POLLIN, 0};
        }
        if (!shut && sig_fd >= 0) {
            i_sig = n;
            pf[n++] = (struct pollfd){sig_fd, POLLIN, 0};
        }
        if (in_w >= 0 && npend == 0 && !paused) {
            i_in = n;
            pf[n++] = (struct pollfd){0, POLLIN, 0};
        }
        if (in_w >= 0 && npend > 0) {
            i_w = n;
            pf[n++] = (struct pollfd){in_w, POLLOUT, 0};
        }
        for (int k = 0; k < 2; k++)
            if (out_r[k] >= 0) {
                i_out[k] = n;
                pf[n++] = (struct pollfd){out_r[k], POLLIN, 0};
            }
        int pr = poll(pf, (nfds_t)n, paused ? 100 : -1);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0)
            continue;
        if (i_sig >= 0 && (pf[i_sig].revents & POLLIN)) {
            (void)shutdown(conn, SHUT_WR); /* the worker's cancel: the tree is killed */
            shut = true;
        }
        for (int k = 0; k < 2; k++) {
            if (i_out[k] < 0 || !pf[i_out[k]].revents)
                continue;
            ssize_t r = read(out_r[k], buf, RELAY_CHUNK);
            if (r > 0) {
                if (!put_all(k + 1, buf, (size_t)r)) {
                    /* Our reader is gone: so is the command's (the worker sees EPIPE). */
                    close_fd(&out_r[k]);
                }
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                close_fd(&out_r[k]);
            }
        }
        if (i_w >= 0 && pf[i_w].revents) {
            ssize_t w = write(in_w, pend, npend);
            if (w > 0) {
                memmove(pend, pend + w, npend - (size_t)w);
                npend -= (size_t)w;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                close_fd(&in_w); /* the command closed its stdin */
                npend = 0;
            }
        }
        if (i_in >= 0 && pf[i_in].revents) {
            ssize_t r = read(0, buf, RELAY_CHUNK);
            if (r > 0) {
                free(pend);
                if (!(pend = malloc((size_t)r))) {
                    npend = 0;
                } else {
                    memcpy(pend, buf, (size_t)r);
                    npend = (size_t)r;
                }
            } else if (r < 0 && (errno == EIO || errno == EAGAIN || errno == EINTR)) {
                /* In the background (EIO): nothing read; tried again later. */
                resume = now;
                resume.tv_nsec += 100 * 1000000L;
                if (resume.tv_nsec >= 1000000000L) {
                    resume.tv_sec++;
                    resume.tv_nsec -= 1000000000L;
                }
            } else {
                close_fd(&in_w); /* end of the typed input: EOF for the command */
            }
        }
        if (i_conn >= 0 && (pf[i_conn].revents & (POLLIN | POLLHUP | POLLERR))) {
            rc = a3s_sio_wait_rc(conn, -1);
            have_rc = true;
            close_fd(&in_w);
            if (rc < 0)
                break;
        }
    }
    free(pend);
out:
    for (int k = 0; k < 3; k++)
        if (pass[k] != k)
            close(pass[k]);
    close_fd(&in_w);
    close_fd(&out_r[0]);
    close_fd(&out_r[1]);
    free(buf);
    return rc;
}
