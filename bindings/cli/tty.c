/* See tty.h. The command never gets the caller's terminal: only the slave of the pty
 * opened here reaches it (the library derives it from the master), and the CLI forwards
 * raw bytes both ways through the supervisor. */
#include "tty.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

static int master = -1;
static struct termios saved;
static volatile sig_atomic_t raw_on;

/* The terminal whose size the command's follows: stdin's, else stdout's. */
static int size_source(void)
{
    return isatty(0) ? 0 : isatty(1) ? 1 : -1;
}

/* Async-signal-safe (SIGWINCH): two ioctls; the kernel then signals the command's
 * foreground group itself. */
static void copy_size(void)
{
    struct winsize ws;
    int src = size_source();
    if (master >= 0 && src >= 0 && ioctl(src, TIOCGWINSZ, &ws) == 0)
        (void)ioctl(master, TIOCSWINSZ, &ws);
}

static void on_winch(int sig)
{
    (void)sig;
    int e = errno;
    copy_size();
    errno = e;
}

int cli_tty_open(void)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return -1;
    if (grantpt(m) < 0 || unlockpt(m) < 0) {
        int e = errno;
        close(m);
        errno = e;
        return -1;
    }
    master = m;
    copy_size();
    return m;
}

/* Async-signal-safe and idempotent. SIGTTOU blocked: a CLI put in the background
 * meanwhile must still give the terminal back its settings rather than stop. */
static void restore(void)
{
    if (!raw_on)
        return;
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    (void)sigprocmask(SIG_BLOCK, &ttou, &old);
    /* TCSAFLUSH: what the terminal typed or answered meanwhile (a reply to a query the
     * command printed last) is dropped, never read by the caller's shell. */
    while (tcsetattr(0, TCSAFLUSH, &saved) < 0 && errno == EINTR)
        ;
    (void)sigprocmask(SIG_SETMASK, &old, NULL);
    raw_on = 0;
}

void cli_tty_start(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_winch;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGWINCH, &sa, NULL);
    copy_size(); /* a resize between the open and now */
    /* Only a terminal we read in its foreground: a background job changing the settings
     * would be stopped (SIGTTOU), and the foreground job owns them. */
    if (!isatty(0) || tcgetpgrp(0) != getpgrp() || tcgetattr(0, &saved) < 0)
        return;
    struct termios raw = saved;
    cfmakeraw(&raw);
    static bool registered;
    if (!registered)
        registered = atexit(restore) == 0;
    raw_on = 1;
    if (tcsetattr(0, TCSANOW, &raw) < 0)
        raw_on = 0;
}

/* Read and drop what the terminal sends until it answers our own status query (terminals
 * answer in order: every answer to a query the command printed came before), at most
 * `ms` milliseconds. */
static void drain_answers(int ms)
{
    static const char query[] = "\033[5n"; /* device status: "\033[0n" comes back */
    if (write(1, query, sizeof query - 1) != (ssize_t)(sizeof query - 1))
        return;
    char tail[4] = {0};
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            return;
        struct pollfd p = {0, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        char buf[256];
        ssize_t n = read(0, buf, sizeof buf);
        if (n <= 0)
            return;
        for (ssize_t i = 0; i < n; i++) {
            memmove(tail, tail + 1, 3);
            tail[3] = buf[i];
            if (!memcmp(tail, "\033[0n", 4) || !memcmp(tail, "\033[3n", 4))
                return;
        }
    }
}

void cli_tty_end(void)
{
    /* The command may have left the terminal in modes of its own (alternate screen, mouse
     * reporting, bracketed paste, another character set, a hidden cursor): back to the
     * plain ones. Then what the terminal answered to queries the command printed last is
     * read and dropped (restore() flushes the rest), so no answer reaches the shell. */
    static const char reset[] = "\033[?1049l\033[?1000l\033[?1002l\033[?1003l\033[?1006l"
                                "\033[?2004l\033(B\033[m\033[?25h";
    if (raw_on && isatty(1)) {
        ssize_t w = write(1, reset, sizeof reset - 1);
        (void)w;
        drain_answers(1000);
    }
    restore();
    signal(SIGWINCH, SIG_DFL);
    if (master >= 0) {
        close(master);
        master = -1;
    }
}
