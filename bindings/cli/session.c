/* a3s-sandbox session start|exec|stop|list (README "Sessions"); the client side of exec,
 * stop and list is session_client.c.
 *
 * `start` forks a supervisor that opens the session (a3s_session_open) and serves a
 * Unix socket in the caller's private state directory; it prints the session's id once
 * the session is ready. Each `exec` connects, hands over its request and its stdin,
 * stdout and stderr, and gets the exit status back: a worker forked by the supervisor
 * runs the command with those descriptors as its own 0, 1 and 2 (cli_run), so the output,
 * --json result, messages and exit status are a fresh run's. A client that goes away or
 * is interrupted shuts its end of the connection: the worker's cancel fd, which kills the
 * command's tree. `stop` (or the end of the --owner process, or SIGTERM) stops the
 * workers, closes the session and removes its socket.
 *
 * Frames on the socket: a 4-byte length (host order) and that many bytes of JSON; the
 * request's first byte carries the client's fds 0, 1, 2 (SCM_RIGHTS). Only the caller's
 * own uid may connect (the directory is 0700 and SO_PEERCRED is checked). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "instdir.h"
#include "json.h"
#include "prefault.h"
#include "sandbox.h"
#include "session_gate.h"
#include "session_io.h"

#define MAX_WORKERS 256

/* ------------------------------------------------------------------ supervisor */

static int sv_pipe[2] = {-1, -1};
static volatile sig_atomic_t sv_stop;

static void sv_on_signal(int sig)
{
    int saved = errno;
    if (sig != SIGCHLD)
        sv_stop = 1;
    (void)!write(sv_pipe[1], "s", 1);
    errno = saved;
}

/* A spare worker, idle: stopped. */
static volatile sig_atomic_t spare_term;

static void spare_on_term(int sig)
{
    (void)sig;
    spare_term = 1;
}

/* The table of running commands that every worker shares (session_gate.h). */
static cli_gate *gate;

/* A worker: one command on one connection. */
static volatile sig_atomic_t wk_conn = -1;

static void wk_on_term(int sig)
{
    (void)sig;
    /* The cancel fd (the connection) becomes readable: the tree is killed, the worker
     * still answers and releases everything; what is left to write to a reader that
     * does not read is given up (the stop must not wait for it). */
    if (wk_conn >= 0)
        (void)shutdown(wk_conn, SHUT_RD);
    cli_run_abandon_output();
}

static char *json_strv_get(json_t *a, const char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!a)
        return NULL;
    if (!json_is_array(a))
        return "not a list";
    const char **v = calloc(json_array_size(a) + 1, sizeof *v);
    if (!v)
        return "out of memory";
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
    {
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
            free(v);
            return "not a list of strings without NUL";
        }
        v[i] = json_string_value(e);
    }
    *out = v;
    *n = json_array_size(a);
    return NULL;
}

/* A fork with SIGTERM blocked: until the child has its own disposition, a SIGTERM (the
 * supervisor stopping) stays pending for it instead of running the supervisor's handler
 * in the child, which only sets a flag there (the command would run on unstopped). */
static pid_t term_blocked_fork(void)
{
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &term, &old) < 0)
        return -1;
    pid_t pid = fork();
    if (pid != 0) {
        int e = errno;
        (void)sigprocmask(SIG_SETMASK, &old, NULL);
        errno = e;
    }
    return pid;
}

static void unblock_term(void)
{
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    (void)sigprocmask(SIG_UNBLOCK, &term, NULL);
}

/* A worker's end: a launcher started ahead for its command and not used is stopped
 * and reaped first (it would otherwise die only after this process, unreaped). */
static __attribute__((noreturn)) void worker_exit(a3s_session *sess, int rc)
{
    a3s_session_unwarm(sess);
    _exit(rc);
}

static __attribute__((noreturn)) void worker(int conn, a3s_sandbox *sb, a3s_session *sess,
                                            pid_t daemon)
{
    int fds[3] = {-1, -1, -1};
    char *req = NULL;
    size_t len = 0;
    int rc = EXIT_REFUSED;
    wk_conn = conn;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wk_on_term;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGTERM, &sa, NULL);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGCHLD, SIG_DFL);
    /* Forked with SIGTERM blocked (term_blocked_fork): a stop that came meanwhile is
     * delivered now, to this handler, not lost in the supervisor's. */
    unblock_term();
    /* A connection that sends no request within 10 s holds no worker longer. */
    struct timeval tv = {10, 0};
    (void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (a3s_sio_recv(conn, &req, &len, fds, 3) < 0)
        worker_exit(sess, EXIT_REFUSED);
    json_error_t je;
    json_t *j = json_loadb(req, len, 0, &je);
    const char *op = json_string_value(json_object_get(j, "op"));
    if (op && !strcmp(op, "stop")) {
        if (getppid() == daemon)
            (void)kill(daemon, SIGTERM);
        (void)a3s_sio_send_rc(conn, 0);
        worker_exit(sess, 0);
    }
    cli c;
    memset(&c, 0, sizeof c);
    c.cmd = "run";
    const char **argv = NULL, **env = NULL;
    size_t nargv = 0;
    const char *bad = j && op && !strcmp(op, "exec") ? NULL : "not an exec request";
    if (!bad)
        bad = json_strv_get(json_object_get(j, "argv"), &argv, &nargv);
    if (!bad)
        bad = json_strv_get(json_object_get(j, "env"), &env, &c.nenv);
    json_t *cmd = json_object_get(j, "command");
    if (!bad && (!argv == !json_is_string(cmd)))
        bad = "give exactly one of argv and command";
    json_t *t = json_object_get(j, "timeout");
    if (!bad && t && !json_is_number(t))
        bad = "the timeout is not a number";
    bool closed[3] = {false, false, false};
    json_t *cl = json_object_get(j, "closed");
    for (int k = 0; k < 3; k++) {
        closed[k] = json_is_true(json_array_get(cl, (size_t)k));
        if (!bad && fds[k] < 0)
            bad = "the client's descriptors did not come";
    }
    if (bad) {
        if (fds[2] >= 0)
            dprintf(fds[2], "a3s-sandbox: session: %s\n", bad);
        (void)a3s_sio_send_rc(conn, EXIT_REFUSED);
        worker_exit(sess, EXIT_REFUSED);
    }
    c.argv = (char **)argv;
    c.shell_command = argv ? NULL : json_string_value(cmd);
    c.env = env;
    c.json = json_is_true(json_object_get(j, "json"));
    c.verbose = verbose = json_is_true(json_object_get(j, "verbose"));
    json_errors = c.json;
    if (t) {
        c.has_timeout = true;
        c.timeout_s = json_number_value(t);
    }
    /* The client program is protected in its workspace as a fresh run's own program is
     * (engine/selfguard.c): by the paths it was reached by, in this worker's copy of the
     * sandbox, for this command only. Its own directory as the workspace, or a client
     * that cannot be located, refuses the command. */
    a3s_error gerr = {0};
    json_t *gv = json_object_get(j, "guard_image");
    int grc = 0;
    for (int pass = 0; pass < 2 && grc == 0; pass++) {
        json_t *list = json_object_get(j, pass ? "guard_dirs" : "guard_files");
        size_t gi;
        json_t *ge;
        json_array_foreach(list, gi, ge)
        {
            if (grc == 0 && json_is_string(ge))
                grc = a3s_sandbox_guard_path(sb, json_string_value(ge), pass == 1, &gerr);
        }
    }
    if (grc == 0)
        grc = a3s_sandbox_guard_home_dir(sb, json_string_value(gv), &gerr);
    if (grc < 0) {
        dprintf(fds[2], "a3s-sandbox: session: %s\n", gerr.msg);
        (void)a3s_sio_send_rc(conn, EXIT_REFUSED);
        worker_exit(sess, EXIT_REFUSED);
    }
    /* Not while the tree of a command whose client was killed is still there (the
     * caller may have sent this one as soon as it saw that client die). */
    if (cli_gate_enter(gate, conn) < 0) {
        if (errno == EAGAIN) {
            dprintf(fds[2], "a3s-sandbox: session: too many commands at once\n");
            (void)a3s_sio_send_rc(conn, EXIT_REFUSED);
        }
        worker_exit(sess, EXIT_REFUSED); /* else its client is gone: nothing to run */
    }
    /* The client's descriptors are this command's 0, 1 and 2. */
    for (int k = 0; k < 3; k++)
        if (dup2(fds[k], k) < 0)
            worker_exit(sess, EXIT_REFUSED);
    describe(sb, &c);
    /* Answered first, released after: the scratch dir, the run record and the teardown
     * of the command's mounts are no longer the client's to wait for. */
    a3s_session_linger(sess, true);
    rc = cli_run(sb, sess, &c, closed, conn);
    cli_gate_leave(gate); /* the tree is gone (cli_run returns after it) */
    fflush(stdout);
    fflush(stderr);
    (void)a3s_sio_send_rc(conn, rc);
    a3s_session_release(sess);
    worker_exit(sess, rc);
}

/* A spare worker: forked while the session waits, so a request finds a worker whose
 * pages are its own already (a fork, then a copy-on-write fault per page the command's
 * run writes, took ~2.5 ms of each command on a virtual machine). It waits on its end of
 * a socketpair for the connection it is to serve, then is a worker as any other; it exits
 * when the supervisor closes that end first. The supervisor's state never changes after
 * the session is ready, so a spare forked early serves exactly as one forked on demand. */
static pid_t spare_start(int *ctl, int lfd, int owner, pid_t self, a3s_sandbox *sb,
                         a3s_session *sess)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    pid_t pid = term_blocked_fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
            _exit(EXIT_REFUSED);
        /* SIGTERM (the supervisor stopping) stays blocked but while it waits for a
         * connection: idle, it then leaves as when not needed; once it has taken one, the
         * stop is delivered to the worker's own handler (worker unblocks it). */
        struct sigaction st;
        memset(&st, 0, sizeof st);
        st.sa_handler = spare_on_term;
        sigemptyset(&st.sa_mask);
        (void)sigaction(SIGTERM, &st, NULL);
        sigset_t waiting;
        (void)sigprocmask(SIG_SETMASK, NULL, &waiting);
        sigdelset(&waiting, SIGTERM);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGCHLD, SIG_DFL);
        close(sv[0]);
        close(sv_pipe[0]);
        close(sv_pipe[1]);
        if (owner >= 0)
            close(owner);
        /* The command's launcher enters the session meanwhile (best effort: without it,
         * the command starts its own). */
        a3s_error werr = {0};
        (void)a3s_session_warm(sess, &werr);
        a3s_prefault_writable();
        /* It takes the next connection itself (the supervisor does not listen while
         * there is a spare) and says so ("t"); the supervisor's end closed first: it is
         * not needed (its launcher is gone before the supervisor reaps it). */
        int conn = -1;
        while (!spare_term) {
            struct pollfd p[2] = {{lfd, POLLIN, 0}, {sv[1], POLLIN, 0}};
            if (ppoll(p, 2, NULL, &waiting) < 0) {
                if (errno == EINTR)
                    continue;
                break;
            }
            if (p[1].revents)
                break;
            if (!(p[0].revents & POLLIN))
                continue;
            int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (c < 0)
                continue;
            /* Only the caller's uid, and never from inside a sandbox (see below). */
            if (!a3s_sio_peer_trusted(c) || fcntl(c, F_SETFL, 0) < 0) {
                close(c);
                continue;
            }
            if (send(sv[1], "t", 1, MSG_NOSIGNAL) != 1) {
                close(c); /* the session is stopping */
                break;
            }
            conn = c;
            break;
        }
        close(lfd);
        close(sv[1]);
        if (conn < 0) {
            a3s_session_unwarm(sess);
            _exit(0);
        }
        worker(conn, sb, sess, self);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return -1;
    }
    *ctl = sv[0];
    return pid;
}

typedef struct sv_opts {
    const char *policy, *workspace, *audit, *grant_digest;
    const char **grants;
    size_t ngrants;
    bool allow_host_root;
    pid_t owner;
} sv_opts;

/* Tell the waiting `start` how it went: "OK ID" or "ERR message" (the three parts
 * joined). */
static void report(int fd, const char *kind, const char *a, const char *b)
{
    if (fd < 0)
        return;
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "%s %s%s", kind, a, b);
    if (n > 0)
        (void)!write(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    close(fd);
}

static __attribute__((noreturn)) void supervisor(const sv_opts *so, const char *id,
                                                const char *dir, int ready)
{
    a3s_error err;
    memset(&err, 0, sizeof err);
    a3s_options o = {
        .workspace = so->workspace,
        .policy = so->policy,
        .audit_path = so->audit,
        .allow_host_root = so->allow_host_root || truthy(getenv("A3S_SANDBOX_ALLOW_HOST_ROOT")),
    };
    a3s_sandbox *sb = a3s_sandbox_new(&o, &err);
    a3s_session *sess = NULL;
    int lfd = -1, owner = -1;
    char sock[512], info[512];
    if (!sb) {
        report(ready, "ERR", "cannot create the sandbox: ", err.msg);
        _exit(EXIT_REFUSED);
    }
    if (so->ngrants && a3s_sandbox_grant_set(sb, so->grants, so->ngrants, so->grant_digest,
                                             NULL, &err) != A3S_OK) {
        report(ready, "ERR", "--grant: ", err.msg);
        _exit(EXIT_REFUSED);
    }
    if (a3s_session_open(sb, &sess, &err) != A3S_OK) {
        report(ready, "ERR", err.msg, "");
        _exit(EXIT_REFUSED);
    }
    if (so->owner > 0 && (owner = (int)syscall(SYS_pidfd_open, so->owner, 0)) < 0) {
        report(ready, "ERR", "--owner: ", strerror(errno));
        goto stop;
    }
    snprintf(sock, sizeof sock, "%s/%s.sock", dir, id);
    snprintf(info, sizeof info, "%s/%s.json", dir, id);
    if ((lfd = a3s_sio_listen(sock)) < 0) {
        report(ready, "ERR", "the session's socket: ", strerror(errno));
        goto stop;
    }
    json_t *ij = json_pack("{s:s, s:I, s:s, s:s}", "id", id, "pid", (json_int_t)getpid(),
                           "workspace", a3s_sandbox_workspace(sb), "policy",
                           a3s_sandbox_policy_name(sb));
    if (!ij || json_dump_file(ij, info, JSON_COMPACT) < 0) {
        json_decref(ij);
        report(ready, "ERR", "writing ", info);
        goto stop;
    }
    json_decref(ij);
    if (pipe2(sv_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        report(ready, "ERR", "pipe2: ", strerror(errno));
        goto stop;
    }
    if (!(gate = cli_gate_new(MAX_WORKERS + 1))) { /* the workers and the spare */
        report(ready, "ERR", "the table of commands: ", strerror(errno));
        goto stop;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sv_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        (void)sigaction(sigs[i], &sa, NULL);
    report(ready, "OK", id, "");
    ready = -1;
    pid_t workers[MAX_WORKERS];
    size_t nworkers = 0;
    pid_t self = getpid(), spare = -1;
    int spare_ctl = -1;
    while (!sv_stop) {
        /* The spare (and the next command's launcher it starts) is made while no
         * command runs: made beside a running one, its work slowed that command down by
         * as much as it saved the next (2 CPUs). */
        if (spare < 0 && nworkers == 0)
            spare = spare_start(&spare_ctl, lfd, owner, self, sb, sess);
        /* While there is a spare, it takes the next connection itself. */
        struct pollfd pf[4] = {{spare > 0 ? -1 : lfd, POLLIN, 0},
                               {sv_pipe[0], POLLIN, 0},
                               {owner, POLLIN, 0},
                               {spare > 0 ? spare_ctl : -1, POLLIN, 0}};
        int pr = poll(pf, 4, -1);
        if (pr < 0 && errno != EINTR)
            break;
        char drain[64];
        while (read(sv_pipe[0], drain, sizeof drain) > 0) {
        }
        char took;
        if (pr > 0 && spare > 0 && (pf[3].revents & POLLIN) &&
            recv(spare_ctl, &took, 1, MSG_DONTWAIT) == 1 && took == 't') {
            workers[nworkers++] = spare; /* a worker now, serving its connection */
            close(spare_ctl);
            spare = spare_ctl = -1;
        }
        for (size_t i = 0; i < nworkers;) {
            if (waitpid(workers[i], NULL, WNOHANG) == workers[i]) {
                cli_gate_forget(gate, workers[i]);
                workers[i] = workers[--nworkers];
            } else {
                i++;
            }
        }
        if (spare > 0 && waitpid(spare, NULL, WNOHANG) == spare) {
            cli_gate_forget(gate, spare);
            close(spare_ctl); /* it died idle: another one is forked next round */
            spare = spare_ctl = -1;
        }
        if (pr > 0 && owner >= 0 && (pf[2].revents & POLLIN))
            break; /* the owner is gone: so is the session */
        if (pr <= 0 || spare > 0 || !(pf[0].revents & POLLIN))
            continue;
        int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0)
            continue;
        /* Only the caller's uid, and never from inside a sandbox (a command with the
         * socket in reach must not run commands in this session's workspace). */
        if (nworkers == MAX_WORKERS || !a3s_sio_peer_trusted(conn)) {
            close(conn);
            continue;
        }
        pid_t pid = term_blocked_fork();
        if (pid == 0) {
            /* A worker never outlives its supervisor (the session's owner): its command
             * is killed with it (the launcher dies with the worker). */
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
                _exit(EXIT_REFUSED);
            close(lfd);
            close(sv_pipe[0]);
            close(sv_pipe[1]);
            if (owner >= 0)
                close(owner);
            worker(conn, sb, sess, self);
        }
        if (pid > 0)
            workers[nworkers++] = pid;
        close(conn);
    }
    /* Stop: every running command is cancelled (its tree killed, its run released),
     * then the session itself. An idle spare sees its end closed and exits; one that
     * has just taken a connection is a worker as the others. */
    if (spare > 0) {
        close(spare_ctl);
        workers[nworkers++] = spare; /* stopped as a worker, or idle: leaves as such */
    }
    for (size_t i = 0; i < nworkers; i++)
        (void)kill(workers[i], SIGTERM);
    for (size_t i = 0; i < nworkers; i++)
        while (waitpid(workers[i], NULL, 0) < 0 && errno == EINTR) {
        }
stop:
    if (lfd >= 0) {
        (void)unlink(sock);
        (void)unlink(info);
        close(lfd);
    }
    report(ready, "ERR", "the session stopped before it was ready", "");
    a3s_session_close(sess);
    a3s_sandbox_free(sb);
    _exit(0);
}

/* ------------------------------------------------------------------ subcommands */

static int start(int argc, char **argv)
{
    sv_opts so;
    memset(&so, 0, sizeof so);
    static const struct option lo[] = {
        {"policy", required_argument, NULL, 'p'}, {"workspace", required_argument, NULL, 'w'},
        {"audit", required_argument, NULL, 'A'}, {"grant", required_argument, NULL, 'g'},
        {"grant-digest", required_argument, NULL, 'G'}, {"owner", required_argument, NULL, 'o'},
        {"allow-host-root", no_argument, NULL, 'R'}, {NULL, 0, NULL, 0}};
    const char **grants = calloc((size_t)argc + 1, sizeof *grants);
    if (!grants)
        return EXIT_REFUSED;
    int ch;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "+p:w:", lo, NULL)) != -1) {
        switch (ch) {
        case 'p': so.policy = optarg; break;
        case 'w': so.workspace = optarg; break;
        case 'A': so.audit = optarg; break;
        case 'g': grants[so.ngrants++] = optarg; break;
        case 'G': so.grant_digest = optarg; break;
        case 'R': so.allow_host_root = true; break;
        case 'o': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v <= 0 || v > INT32_MAX)
                return cli_session_usage("--owner needs a process id, not", optarg);
            so.owner = (pid_t)v;
            break;
        }
        default:
            return cli_session_usage("unknown option or missing value:", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_session_usage("unexpected", argv[optind]);
    so.grants = grants;
    char dir[256], id[A3S_SIO_ID_LEN + 1];
    if (a3s_sio_dir(dir, sizeof dir) < 0) {
        fprintf(stderr, "a3s-sandbox: session: the state directory %s: %s\n", dir,
                strerror(errno));
        return EXIT_REFUSED;
    }
    if (a3s_sio_new_id(id) < 0) {
        fprintf(stderr, "a3s-sandbox: session: getrandom: %s\n", strerror(errno));
        return EXIT_REFUSED;
    }
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return EXIT_REFUSED;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "a3s-sandbox: session: fork: %s\n", strerror(errno));
        return EXIT_REFUSED;
    }
    if (pid == 0) {
        /* The supervisor: its own session, nothing of the caller's terminal. */
        close(ready[0]);
        (void)setsid();
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
            _exit(EXIT_REFUSED);
        /* Nothing else of the caller's (a pipe its caller waits to see closed): only
         * the ready pipe, as fd 3. */
        if (dup3(ready[1], 3, O_CLOEXEC) < 0 || syscall(SYS_close_range, 4U, ~0U, 0) < 0)
            _exit(EXIT_REFUSED);
        ready[1] = 3;
        /* The working directory stays: relative -w, --policy and --audit mean what they
         * meant to the caller. */
        /* Not the supervisor's own child: the double fork leaves it to init. */
        pid_t p2 = fork();
        if (p2 != 0)
            _exit(p2 < 0 ? EXIT_REFUSED : 0);
        supervisor(&so, id, dir, ready[1]);
    }
    close(ready[1]);
    (void)waitpid(pid, NULL, 0);
    char buf[2048];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(ready[0], buf + n, sizeof buf - 1 - n);
        if (r > 0 && (n += (size_t)r) < sizeof buf - 1)
            continue;
        if (r < 0 && errno == EINTR)
            continue;
        break;
    }
    close(ready[0]);
    buf[n] = '\0';
    free(grants);
    if (!strncmp(buf, "OK ", 3)) {
        printf("%s\n", buf + 3);
        return 0;
    }
    fprintf(stderr, "a3s-sandbox: session start: %s\n",
            !strncmp(buf, "ERR ", 4) ? buf + 4 : "the session's supervisor died");
    return EXIT_REFUSED;
}

int cli_session_main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2)
        return cli_session_usage("missing subcommand", NULL);
    const char *sub = argv[1];
    if (!strcmp(sub, "start"))
        return start(argc - 1, argv + 1);
    if (!strcmp(sub, "exec"))
        return cli_session_exec(argc - 1, argv + 1, a3s_instdir_guard_paths);
    if (!strcmp(sub, "stop"))
        return cli_session_stop(argc - 1, argv + 1);
    if (!strcmp(sub, "list") && argc == 2)
        return cli_session_list();
    return cli_session_usage("unknown subcommand", sub);
}
