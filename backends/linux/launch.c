/* a3s-sandbox-launch: the trusted first program inside the sandbox.
 *
 *   a3s-sandbox-launch [--tag TAG] [--join] --setup [--exec] -- PROGRAM [ARG...]
 *   a3s-sandbox-launch [--tag TAG] [--join] --setup --warm
 *   a3s-sandbox-launch [--tag TAG] --hold [--net] [--ws WORKSPACE]
 *   a3s-sandbox-launch PROGRAM [ARG...]
 *
 * With --setup, bwrap runs it as uid 0 of the sandbox's user namespace with
 * CAP_SYS_ADMIN: it first makes the workspace mounts by file descriptor, takes the
 * command's identity and installs the seccomp filter (setup.c). Then, with --exec, it
 * becomes PROGRAM (the network relay, which starts this launcher again without --setup);
 * otherwise it launches PROGRAM itself. --join (a session's command, started on the host)
 * first enters the session's namespaces and makes the command's own; --hold (once per
 * session, started by bwrap) hands the session's namespaces to its owner (join.c).
 * --warm: started before its command is known, it waits on A3S_FD_WARM for the command's
 * descriptors, argv (these options again, without --warm) and environment (warm.h).
 *
 * Launching: protocol on fd 3 (a pipe to the supervisor, or a socket for a session's
 * command): "S" once the sandbox is set up (anything failing before that is the
 * sandbox's failure, not the command's; on a socket, with a pidfd of pid 1); then
 * "E<errno>\n" if the command's process could not even be forked (a setup failure too),
 * or, after the command ended, "X<wait status>\n" (as pid 1 of the namespace, "Z...",
 * once nothing else of it is left), so the supervisor can report a death by signal
 * exactly. fd 3 and 4 (bwrap's status pipe) never reach the command. The launcher is not
 * dumpable, so the command (same uid) cannot ptrace it to forge that status.
 *
 * With a terminal on fd 0 (a3s-sandbox --tty: the supervisor passes nothing else that is
 * a terminal, only a pty slave of its caller's, never the caller's own terminal), the
 * command gets a session of its own with that terminal as its controlling terminal, so
 * ^C and ^Z typed reach its foreground process group (and never this launcher).
 *
 * The command runs as a child with PATH lookup; 127 when it is not found, 126 when it
 * cannot be executed, as a shell would say. Built static: it must start fast and depend
 * on nothing. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "join.h"
#include "pathexec.h"
#include "protocol.h"
#include "setup.h"
#include "util.h"

/* Is pid 1 of our pid namespace bwrap (the sandbox's), not a host's init? */
static bool in_sandbox_pidns(void)
{
    char comm[32] = "";
    int fd = open("/proc/1/comm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, comm, sizeof comm - 1) : -1;
    if (fd >= 0)
        close(fd);
    return n > 0 && strncmp(comm, "bwrap\n", 6) == 0;
}

/* The command's end as the launcher reports it (fd 3: "X", or "Z" when nothing else of
 * the namespace is left) and exits with. */
static int report_status(int status, char kind)
{
    char msg[32];
    int n = snprintf(msg, sizeof msg, "%c%d\n", kind, status);
    if (n > 0)
        (void)!write(A3S_FD_STARTED, msg, (size_t)n);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

/* "S" on fd 3. As pid 1 of a session's command, with a pidfd of this process when fd 3
 * is a socket: the supervisor waits on it after a kill, since pid 1 ends only once the
 * kernel has emptied its pid namespace (the process that started it is gone sooner). */
static int say_started(bool init)
{
    int self = init ? (int)syscall(SYS_pidfd_open, getpid(), 0) : -1;
    if (init && self < 0)
        return -1;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {"S", 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (self >= 0) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &self, sizeof self);
    }
    ssize_t w = self >= 0 ? sendmsg(A3S_FD_STARTED, &m, MSG_NOSIGNAL) : -1;
    if (self < 0 || (w < 0 && errno == ENOTSOCK))
        w = write(A3S_FD_STARTED, "S", 1); /* a pipe (under bwrap): its pid 1 is bwrap's */
    if (self >= 0)
        (void)close(self);
    return w == 1 ? 0 : -1;
}

/* fd moved above every fixed number of the protocol (protocol.h): the lowest free number
 * can be one of them (A3S_FD_STATUS is not open in a session's command), which is closed
 * below by number. Returns the new fd, or -1. */
static int above_protocol_fds(int fd)
{
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, A3S_FD_RELAY_IMAGE + 1);
    int e = errno;
    (void)close(fd);
    errno = e;
    return hi;
}

/* The command has ended: everything else of this namespace is killed and reaped (an
 * orphan becomes this process's child before its parent is gone, so no child left means
 * nobody left), this process lets go of the command's stdio, and only then says "Z":
 * the supervisor may take that as the run's end without waiting for this exit. */
static int end_as_init(int status)
{
    (void)kill(-1, SIGKILL); /* this namespace only: we are its pid 1 */
    while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR) {
    }
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++)
        if (null < 0 ? close(fd) < 0 && errno != EBADF : dup2(null, fd) < 0)
            return report_status(status, 'X'); /* the plain end: waited for */
    if (null > 2)
        (void)close(null);
    return report_status(status, 'Z');
}

/* pid 1 of a session's command: wait for the command, reaping every orphan meanwhile;
 * the supervisor's lifeline (fd 3) as below. Once it returns, the kernel kills what is
 * left in the namespace, as when bwrap's pid 1 exits. */
static int reap_as_init(pid_t cmd, int sfd)
{
    for (;;) {
        struct pollfd p[2] = {{sfd, POLLIN, 0}, {A3S_FD_STARTED, 0, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return A3S_EXIT_SETUP;
        if (p[1].revents & (POLLERR | POLLHUP)) {
            (void)kill(-1, SIGKILL); /* this namespace only: we are its pid 1 */
            _exit(A3S_EXIT_SETUP);
        }
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) > 0) {
        }
        int status;
        pid_t w;
        /* Only an end counts: a child that made this process its tracer (PTRACE_TRACEME)
         * reports its stops here too, and a stopped command has not ended (it waits for
         * the deadline, as any stopped command does). */
        while ((w = waitpid(-1, &status, WNOHANG)) > 0)
            if (w == cmd && (WIFEXITED(status) || WIFSIGNALED(status)))
                return end_as_init(status);
        if (w < 0 && errno == ECHILD)
            return A3S_EXIT_SETUP;
    }
}

/* The command's process, until its exec: the terminal (when stdin is one) as its
 * controlling terminal, the launcher's signal mask (SIGCHLD unblocked for a session's
 * init), then the exec (as execvp does it: pathexec.h). It shares the launcher's memory (see spawn_command): only system
 * calls and write(2) here, no stdio and no allocation. */
typedef struct cmd_args {
    char **cmd;
    char **sh_argv; /* the /bin/sh fallback's argv (pathexec.h) */
    sigset_t mask;
} cmd_args;

static void say(const char *a, const char *b, const char *c)
{
    const char *parts[] = {"a3s-sandbox: ", a, b, c, "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        (void)!write(STDERR_FILENO, parts[i], strlen(parts[i]));
}

static int cmd_entry(void *p)
{
    const cmd_args *a = p;
    if (isatty(0) && (setsid() < 0 || ioctl(0, TIOCSCTTY, 0) < 0)) {
        say("setup: the terminal as the command's controlling terminal: ", strerror(errno),
            "");
        _exit(A3S_EXIT_SETUP);
    }
    if (sigprocmask(SIG_SETMASK, &a->mask, NULL) < 0)
        _exit(A3S_EXIT_SETUP);
    a3s_pathexec_run(a->cmd, a->sh_argv);
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
        say(a->cmd[0], ": command not found", "");
        _exit(127);
    }
    say(a->cmd[0], ": cannot execute: ", strerror(e));
    _exit(126);
}

/* The command's process shares the launcher's memory until its exec (CLONE_VM |
 * CLONE_VFORK, as posix_spawn does): a fork copied the page tables and left each page
 * either process wrote afterwards to a copy-on-write fault, 1.5 to 3.5 ms of every run
 * on a virtual machine. The launcher waits meanwhile (it has no signal handlers, and
 * every signal stays blocked until the child set its mask). */
#define CMD_STACK (256 * 1024)
static pid_t spawn_command(cmd_args *a)
{
#ifdef A3S_UNDER_ASAN
    pid_t fpid = fork();
    if (fpid == 0)
        cmd_entry(a);
    return fpid;
#endif
    void *stack = mmap(NULL, CMD_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -1;
    sigset_t all, old;
    sigfillset(&all);
    if (sigprocmask(SIG_SETMASK, &all, &old) < 0) {
        int e = errno;
        (void)munmap(stack, CMD_STACK);
        errno = e;
        return -1;
    }
    pid_t pid = clone(cmd_entry, (char *)stack + CMD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
    int e = errno;
    (void)sigprocmask(SIG_SETMASK, &old, NULL);
    (void)munmap(stack, CMD_STACK);
    errno = e;
    return pid;
}

static int launch(char **cmd)
{
    /* Not started by the supervisor (no pipe on fd 3): refuse rather than guess. */
    if (fcntl(A3S_FD_STARTED, F_SETFD, FD_CLOEXEC) < 0)
        return A3S_EXIT_SETUP;
    (void)fcntl(A3S_FD_STATUS, F_SETFD, FD_CLOEXEC);
    /* The embedded images (protocol.h) never reach the command: the setup step closed
     * them and a launcher the relay started never had them; closed here all the same. */
    for (int fd = A3S_FD_LAUNCHER_IMAGE; fd <= A3S_FD_RELAY_IMAGE; fd++)
        if (close(fd) < 0 && errno != EBADF && errno != EINTR)
            return A3S_EXIT_SETUP;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
        fprintf(stderr, "a3s-sandbox: setup: prctl(PR_SET_DUMPABLE): %s\n", strerror(errno));
        return A3S_EXIT_SETUP;
    }
    /* Dies with the process that started it (bwrap, killed at the deadline; a session's
     * joining launcher): as the pid namespace's init, its end ends the whole tree at
     * once, not once the supervisor stops waiting (the lifeline below). Set here: the
     * identity switch of the setup step clears the parent-death signal. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
        fprintf(stderr, "a3s-sandbox: setup: prctl(PR_SET_PDEATHSIG): %s\n", strerror(errno));
        return A3S_EXIT_SETUP;
    }
    /* In a session's command this launcher is pid 1 of the command's pid namespace (no
     * bwrap there): orphans are its children, and it reaps them as an init must (each
     * zombie would count against the process quota until the end). SIGCHLD is taken by
     * a signalfd; the command gets an unblocked mask. */
    bool init = getpid() == 1;
    if (say_started(init) < 0)
        return A3S_EXIT_SETUP;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = -1;
    if (init && (sigprocmask(SIG_BLOCK, &chld, NULL) < 0 ||
                 (sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
                 (sfd = above_protocol_fds(sfd)) < 0)) {
        fprintf(stderr, "a3s-sandbox: setup: signalfd: %s\n", strerror(errno));
        return A3S_EXIT_SETUP;
    }

    cmd_args ca = {.cmd = cmd, .sh_argv = a3s_pathexec_shell_argv(cmd)};
    if (!ca.sh_argv || sigprocmask(SIG_SETMASK, NULL, &ca.mask) < 0 ||
        (init && sigdelset(&ca.mask, SIGCHLD) < 0))
        return A3S_EXIT_SETUP;
    pid_t pid = spawn_command(&ca);
    if (pid < 0) {
        /* The command never ran: the supervisor reports a setup failure (125), with the
         * reason from this line, not as the command's output. */
        char msg[32];
        int n = snprintf(msg, sizeof msg, "E%d\n", errno);
        if (n > 0)
            (void)!write(A3S_FD_STARTED, msg, (size_t)n);
        return A3S_EXIT_SETUP;
    }
    (void)close(A3S_FD_STATUS);

    /* The supervisor's lifeline: fd 3's reader is the supervisor itself. If it dies
     * (SIGKILL), the pipe reports POLLERR here; the sandbox must not outlive it, whatever
     * became of bwrap's own parent-death signal: kill everything in this pid namespace
     * (pid 1, bwrap, then exits with its last child). */
    if (init)
        return reap_as_init(pid, sfd);
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    while (pfd >= 0) {
        struct pollfd p[2] = {{pfd, POLLIN, 0}, {A3S_FD_STARTED, 0, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break; /* plain waiting below */
        }
        if (p[1].revents & (POLLERR | POLLHUP)) {
            /* kill(-1) reaches only this pid namespace; bwrap always makes one, and its
             * pid 1 is bwrap (or this launcher itself, in a session's command): never
             * signal anything else. */
            if (in_sandbox_pidns())
                (void)kill(-1, SIGKILL);
            else
                (void)kill(pid, SIGKILL);
            _exit(A3S_EXIT_SETUP);
        }
        if (p[0].revents)
            break;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return A3S_EXIT_SETUP;
    }
    return report_status(status, 'X');
}

typedef struct flags {
    bool setup, then_exec, join, hold, net, warm;
    const char *ws; /* --hold: the workspace */
} flags;

/* The launcher's own options; returns the index of the program (argc: none). */
static int parse_flags(int argc, char **argv, flags *f)
{
    int i = 1;
    memset(f, 0, sizeof *f);
    while (i < argc && argv[i][0] == '-' && argv[i][1] == '-') {
        if (strcmp(argv[i], "--tag") == 0 && i + 1 < argc)
            i++; /* the run's tag: only there to be seen on the argv (see bwrap.h) */
        else if (strcmp(argv[i], "--setup") == 0)
            f->setup = true;
        else if (strcmp(argv[i], "--exec") == 0)
            f->then_exec = true;
        else if (strcmp(argv[i], "--join") == 0)
            f->join = true;
        else if (strcmp(argv[i], "--hold") == 0)
            f->hold = true;
        else if (strcmp(argv[i], "--net") == 0)
            f->net = true;
        else if (strcmp(argv[i], "--ws") == 0 && i + 1 < argc && argv[i + 1][0] == '/')
            f->ws = argv[++i];
        else if (strcmp(argv[i], "--warm") == 0)
            f->warm = true;
        else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else
            break;
        i++;
    }
    return i;
}

static int usage(void)
{
    fputs("usage: a3s-sandbox-launch [--join [--warm]] [--setup [--exec] --] PROGRAM [ARG...]\n",
          stderr);
    return A3S_EXIT_SETUP;
}

int main(int argc, char **argv)
{
    flags f;
    int i = parse_flags(argc, argv, &f);
    if (f.hold && !f.setup && !f.join && !f.warm && i == argc)
        return a3s_join_hold(f.net, f.ws) < 0 ? A3S_EXIT_SETUP : 0;
    if (f.ws)
        return usage();
    /* A warm launcher (protocol.h: A3S_FD_WARM) is started without its command: a
     * session's on the host (--join), or a fresh run's by bubblewrap. */
    if (f.warm && (!f.setup || f.then_exec || f.hold || i != argc))
        return usage();
    if (!f.warm && (i >= argc || (f.then_exec && !f.setup) || (f.join && !f.setup) || f.hold))
        return usage();
    if (f.join && a3s_join_enter() < 0)
        return A3S_EXIT_SETUP;
    if (f.warm) {
        /* Its command came: go on as a launcher started for it, in the namespaces entered
         * or made already (its argv: --setup, with --join exactly when this launcher
         * joined a session; never --exec, --warm or --hold). */
        bool joined = f.join;
        if (a3s_join_warm(&argc, &argv) < 0)
            return A3S_EXIT_SETUP;
        i = parse_flags(argc, argv, &f);
        if (i >= argc || f.join != joined || !f.setup || f.then_exec || f.hold || f.warm)
            return usage();
    }
    if (f.setup && a3s_setup_run(f.then_exec, f.join) < 0)
        return A3S_EXIT_SETUP;
    if (f.then_exec) {
        execv(argv[i], argv + i);
        fprintf(stderr, "a3s-sandbox: setup: cannot start %s: %s\n", argv[i], strerror(errno));
        return A3S_EXIT_SETUP;
    }
    return launch(argv + i);
}
