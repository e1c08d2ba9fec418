/* bubblewrap's --json-status-fd as the supervisor reads it (backends/linux/bwstatus.c):
 * the sandbox's first process is opened as a pidfd only while it is still the child of
 * the bwrap that reported it, so a pid that ended and was taken by another process is
 * never signalled at a deadline; lines are parsed whole, across reads. TAP output. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bwstatus.h"
#include "tap.h"

static pid_t seen_pid;
static void on_pid(void *ud, pid_t pid)
{
    (void)ud;
    seen_pid = pid;
}

/* Feed text as one read; returns the pidfd found (or -1) and fills *o. */
static int feed(const char *text, pid_t top, a3s_outcome *o, size_t *left)
{
    a3s_launch l;
    memset(&l, 0, sizeof l);
    l.on_pid = on_pid;
    char buf[512];
    size_t len = strlen(text);
    memcpy(buf, text, len);
    int fd = -1;
    a3s_bwstatus_parse(&l, buf, &len, o, top, &fd);
    if (left)
        *left = len;
    return fd;
}

int main(void)
{
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    char line[128];
    snprintf(line, sizeof line, "{\"child-pid\": %d}\n", (int)child);

    a3s_outcome o;
    memset(&o, 0, sizeof o);
    o.reported_exit = -1;
    seen_pid = 0;
    int fd = feed(line, getpid(), &o, NULL);
    ok(fd >= 0 && o.ns_started && seen_pid == child,
       "child-pid of the reporting process's own child: opened as a pidfd");
    if (fd >= 0)
        close(fd);

    /* The same pid reported by a "bwrap" that is not its parent: it may be a recycled
     * pid now, some other process's. */
    memset(&o, 0, sizeof o);
    fd = feed(line, getppid(), &o, NULL);
    ok(fd < 0 && o.ns_started, "child-pid whose parent is not the reporter: no pidfd");

    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    memset(&o, 0, sizeof o);
    fd = feed(line, getpid(), &o, NULL);
    ok(fd < 0, "child-pid of a process that is gone: no pidfd");

    memset(&o, 0, sizeof o);
    o.reported_exit = -1;
    size_t left = 0;
    fd = feed("{\"exit-code\": 3}\n{\"exit-co", getpid(), &o, &left);
    ok(o.reported_exit == 3 && left == strlen("{\"exit-co") && fd < 0,
       "exit-code read; an incomplete last line stays for the next read");

    static const char *const ignored[] = {
        "{\"child-pid\": -5}\n", "{\"child-pid\": 0}\n", "{\"child-pid\": \"12\"}\n",
        "{\"child-pid\": 99999999999}\n", "[1]\n", "not json\n",
        "{\"child-pid\": 1, \"child-pid\": 2}\n"};
    bool none = true;
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) {
        memset(&o, 0, sizeof o);
        seen_pid = 0;
        fd = feed(ignored[i], getpid(), &o, NULL);
        none = none && fd < 0 && !o.ns_started && seen_pid == 0;
    }
    ok(none, "no child-pid from a negative, zero, string, too large or duplicate value, "
             "or a line that is not an object");
    return tap_done();
}
