/* Spawn and supervise one process tree: own session (no controlling terminal) and process
 * group, all other fds closed, a poll loop over stdout/stderr/stdin/pidfd/timerfd, the
 * bounded capture, the deadline that kills the whole tree, and the exit status. Knows
 * nothing about bwrap or Lua. */
#ifndef A3S_EXEC_H
#define A3S_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "a3s_sandbox.h"
#include "backend.h"
#include "capture.h"

#define A3S_EXEC_MAX_KEEP 16

typedef struct a3s_fdmap {
    int fd;     /* parent's fd */
    int target; /* number it gets in the child (>= 3), CLOEXEC cleared */
    bool held;  /* a warm launcher (warm) has its own already: not handed over */
} a3s_fdmap;

typedef struct a3s_launch {
    const char *path;  /* absolute program path */
    char *const *argv; /* NULL-terminated */
    char *const *envp; /* NULL-terminated */
    const char *cwd;   /* NULL: inherit */
    /* use_cwd_fd: enter the directory open as cwd_fd instead (caller-owned). */
    bool use_cwd_fd;
    int cwd_fd;
    a3s_fdmap keep[A3S_EXEC_MAX_KEEP];
    size_t nkeep;
    /* >= 0: the caller's stdin. Only a read-only pipe/FIFO is handed to the child; a
     * terminal, socket, regular file, device or writable fd is read by the supervisor and
     * forwarded through a fresh pipe (its flags, and a file's offset, are left unchanged);
     * /dev/null and fds not open for reading become a fresh read-only /dev/null. */
    int stdin_fd;
    const char *stdin_data; /* when stdin_fd < 0: fed through a pipe; NULL: /dev/null */
    size_t stdin_len;
    int started_fd; /* read end of the launcher's pipe ("S", then "X<status>\n"), or -1 */
    int status_fd;  /* read end of bwrap's --json-status-fd pipe, or -1 */
    int64_t timeout_ms; /* the command's deadline; with started_fd, from its start */
    int64_t *deadline_out; /* when set: the deadline (a3s_now_ms) written as it is armed */
    /* With started_fd: the bound on setting up the sandbox (spawn to "S"); 0: none, the
     * deadline then counts from the spawn. */
    int64_t setup_timeout_ms;
    size_t output_budget;
    int64_t nofile;     /* RLIMIT_NOFILE for the tree, < 0: unchanged */
    int64_t core_bytes; /* RLIMIT_CORE, < 0: unchanged */
    int64_t fsize;      /* RLIMIT_FSIZE, <= 0: unchanged */
    /* cgroup.procs fds (caller-owned): the child writes "0" to each before exec, so the
     * whole tree starts inside its cgroups. */
    int cgroup_fds[4];
    size_t ncgroup_fds;
    a3s_output_fn on_output;
    void *output_ud;
    int cancel_fd; /* >= 0: readable -> kill the tree, outcome.aborted (caller-owned) */
    /* mirror: the head bytes of each stream (what went into the capture's head) are also
     * written to mirror_fd[0] (stdout) / [1] (stderr, -1: not mirrored), in arrival
     * order. Never blocking the supervisor: while a chunk waits for its reader, no more
     * output is read (the command blocks as on a pipe), and the deadline still holds.
     * When the reader of a stream the command wrote to goes away (EPIPE, or POLLERR once
     * nothing is pending), the tree is killed: outcome.output_closed. What is still
     * pending when the tree is gone is left in outcome.mirror_pending. */
    bool mirror;
    int mirror_fd[2];
    /* tty: tty_fd is a pty master (caller-owned, a3s_exec_request.tty_fd): its slave is
     * the child's 0, 1 and 2, the master's output the stdout stream (all of it mirrored),
     * the stdin source written into it. tty_ctty: the child itself makes the slave its
     * controlling terminal (the process-host backend); under bwrap the launcher's child
     * does, in the command's own session (launch.c). */
    bool tty, tty_ctty;
    int tty_fd;
    /* Called with each process of the launch as soon as its pid is known: the one forked,
     * and the sandbox's first process when bwrap's status reports it (may be NULL). */
    void (*on_pid)(void *ud, pid_t pid);
    void *pid_ud;
    /* A warm launcher (warm.h) to hand the command to instead of starting one; when it
     * cannot take it, it is discarded and one is started as without it. It gets
     * warm_argv and warm_envp when set (a launcher under bubblewrap: its own argv and
     * the command's environment, where path, argv and envp start bubblewrap), else
     * argv and envp. */
    struct a3s_warm *warm;
    char *const *warm_argv;
    char *const *warm_envp;
    /* A session's command, whose launcher is pid 1 of the command's pid namespace: when
     * it says "Z" (the command ended, and it killed and reaped everything else of its
     * namespace), the run ends there; the top process, still exiting, is not waited for,
     * and its pidfd is left in *late_pidfd for the caller to reap (else -1). NULL: "Z"
     * is read as "X". */
    int *late_pidfd;
} a3s_launch;

/* Run to completion. Returns 0 when the process was spawned and reaped (whatever its
 * status; or its pidfd left in *l->late_pidfd, see there) and fills o; -1 with err when it could not be spawned (nothing ran). The keep
 * fds are consumed (closed on every path); started_fd, status_fd and stdin_fd stay owned
 * by the caller. */
int a3s_exec_run(const a3s_launch *l, a3s_outcome *o, a3s_error *err);

/* Start l's program as a3s_exec_run would, with /dev/null as its 0, 1 and 2, and return
 * its pid once it has executed (the caller reaps it); -1 with err. The keep fds are
 * consumed. */
pid_t a3s_exec_spawn(const a3s_launch *l, a3s_error *err);

#endif
