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
    while (tcsetattr(0, TCSANOW, &saved) < 0 && errno == EINTR)
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

void cli_tty_end(void)
{
    restore();
    signal(SIGWINCH, SIG_DFL);
    if (master >= 0) {
        close(master);
        master = -1;
    }
}
