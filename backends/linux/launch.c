/* a3s-sandbox-launch: the trusted first program inside the sandbox for the argv form.
 *
 * bwrap runs it after every mount and the seccomp filter are in place. It announces
 * "started" with one byte on fd 3 (so the supervisor can tell a setup failure from a
 * command failure), closes the supervisor's fds 3 and 4, then execs PROGRAM with PATH
 * lookup. Exit 127 when PROGRAM is not found, 126 when it cannot be executed — the codes
 * a shell would use. Built static: it must start fast and depend on nothing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("a3s-sandbox-launch: usage: a3s-sandbox-launch PROGRAM [ARG...]\n", stderr);
        return 125;
    }
    if (write(3, "S", 1) != 1)
        return 125; /* not started by the supervisor: refuse */
    close(3);
    close(4);
    execvp(argv[1], argv + 1);
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
        fprintf(stderr, "a3s-sandbox: %s: command not found\n", argv[1]);
        return 127;
    }
    fprintf(stderr, "a3s-sandbox: %s: cannot execute: %s\n", argv[1], strerror(e));
    return 126;
}
