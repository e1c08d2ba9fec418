/* a3s-sandbox-launch: the trusted first program inside the sandbox.
 *
 * bwrap runs it after every mount and the seccomp filter are in place. Protocol on fd 3
 * (a pipe to the supervisor): "S" once the sandbox is set up — anything failing before
 * that is the sandbox's failure, not the command's — then, after the command ended,
 * "X<wait status>\n", so the supervisor can report a death by signal exactly (bwrap's own
 * status folds it into 128+N). fd 3 and 4 (bwrap's status pipe) never reach the command.
 *
 * The command runs as a child with PATH lookup; 127 when it is not found, 126 when it
 * cannot be executed, as a shell would say. Built static: it must start fast and depend
 * on nothing. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FD_SUPERVISOR 3
#define FD_BWRAP_STATUS 4

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("a3s-sandbox-launch: usage: a3s-sandbox-launch PROGRAM [ARG...]\n", stderr);
        return 125;
    }
    /* Not started by the supervisor (no pipe on fd 3): refuse rather than guess. */
    if (fcntl(FD_SUPERVISOR, F_SETFD, FD_CLOEXEC) < 0 || write(FD_SUPERVISOR, "S", 1) != 1)
        return 125;
    (void)fcntl(FD_BWRAP_STATUS, F_SETFD, FD_CLOEXEC);

    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "a3s-sandbox: cannot start %s: %s\n", argv[1], strerror(errno));
        return 126;
    }
    if (pid == 0) {
        execvp(argv[1], argv + 1);
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            fprintf(stderr, "a3s-sandbox: %s: command not found\n", argv[1]);
            _exit(127);
        }
        fprintf(stderr, "a3s-sandbox: %s: cannot execute: %s\n", argv[1], strerror(e));
        _exit(126);
    }
    (void)close(FD_BWRAP_STATUS);

    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return 125;
    }
    char msg[32];
    int n = snprintf(msg, sizeof msg, "X%d\n", status);
    if (n > 0)
        (void)!write(FD_SUPERVISOR, msg, (size_t)n);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}
