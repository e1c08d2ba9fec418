/* bubblewrap's --json-status-fd, as the supervisor reads it (bwstatus.h). */
#include "bwstatus.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <jansson.h>

/* A pidfd for the process bwrap reported as the sandbox's first one, only if it still is
 * bwrap's child: it could have ended and its pid been taken by another process before
 * the pidfd was opened (bwrap, not reaped by us yet, keeps its own pid). -1 otherwise. */
static int ns_pidfd_of(pid_t child, pid_t bwrap)
{
    int fd = (int)syscall(SYS_pidfd_open, child, 0);
    if (fd < 0)
        return -1;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)child);
    int sf = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = sf >= 0 ? read(sf, buf, sizeof buf - 1) : -1;
    if (sf >= 0)
        close(sf);
    /* "pid (comm) state ppid ...": comm may hold anything, so from the last ')'. */
    char *rp = n > 0 ? (buf[n] = '\0', strrchr(buf, ')')) : NULL;
    int ppid = 0;
    if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1 || ppid != (int)bwrap) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One line of bwrap's --json-status-fd: a JSON object, {"child-pid": N, ...} once the
 * namespaces exist and {"exit-code": N} at the end. Only top-level integer members count
 * (a child-pid must be a positive pid_t); other keys are ignored, and so is a line that
 * is not one JSON object. */
static void status_line(const a3s_launch *l, const char *line, size_t n, a3s_outcome *o,
                        pid_t top, int *ns_pidfd)
{
    json_t *j = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return;
    }
    json_t *cp = json_object_get(j, "child-pid");
    if (json_is_integer(cp) && json_integer_value(cp) > 0 && json_integer_value(cp) <= INT_MAX) {
        o->ns_started = true;
        if (l->on_pid)
            l->on_pid(l->pid_ud, (pid_t)json_integer_value(cp));
        if (*ns_pidfd < 0)
            *ns_pidfd = ns_pidfd_of((pid_t)json_integer_value(cp), top);
    }
    json_t *ec = json_object_get(j, "exit-code");
    if (json_is_integer(ec) && json_integer_value(ec) >= INT_MIN &&
        json_integer_value(ec) <= INT_MAX)
        o->reported_exit = (int)json_integer_value(ec);
    json_decref(j);
}

/* Parse the complete lines in buf[0..*len); an incomplete last line stays for the next
 * read. */
void a3s_bwstatus_parse(const a3s_launch *l, char *buf, size_t *len, a3s_outcome *o,
                        pid_t top, int *ns_pidfd)
{
    char *start = buf, *nl;
    while ((nl = memchr(start, '\n', *len - (size_t)(start - buf))) != NULL) {
        status_line(l, start, (size_t)(nl - start), o, top, ns_pidfd);
        start = nl + 1;
    }
    size_t rest = *len - (size_t)(start - buf);
    memmove(buf, start, rest);
    *len = rest;
}

/* The keep fds belong to this call: the parent's copies must go, or pipe EOFs (the
 * started marker, bwrap's status) would never arrive. */
