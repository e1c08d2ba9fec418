/* a3s-sandbox session exec|stop, and a3s-sandbox-exec: the client side (session.c has
 * the supervisor; session_list.c the list).
 *
 * `exec` sends one request (argv or -c, environment entries, timeout, the paths by which
 * this program was reached, which the worker protects as a fresh run protects its own)
 * with this process's fds 0, 1 and 2, then waits for the exit status. A signal to the
 * client shuts its end of the connection, and the worker kills the command's tree. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "jsonw.h"
#include "session_io.h"

static int connect_to(const char *id, int *pidfd)
{
    char dir[256], sock[512];
    if (!a3s_sio_valid_id(id)) {
        fprintf(stderr, "a3s-sandbox: session: '%s' is not a session id\n", id);
        return -1;
    }
    if (a3s_sio_dir(dir, sizeof dir) < 0) {
        fprintf(stderr, "a3s-sandbox: session: the state directory %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    snprintf(sock, sizeof sock, "%s/%s.sock", dir, id);
    int fd = a3s_sio_connect(sock, pidfd);
    if (fd < 0)
        fprintf(stderr, "a3s-sandbox: session %s: %s (see 'a3s-sandbox session list')\n", id,
                errno == ENOENT || errno == ECONNREFUSED ? "no such session" : strerror(errno));
    return fd;
}

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    int saved = errno;
    got_signal = sig;
    (void)!write(sig_pipe[1], "s", 1);
    errno = saved;
}

/* A string of the request: never one left out (the worker refuses text that is not
 * UTF-8, and a missing argument or guard path would change what runs). */
static void req_str(cli_jw *w, const char *v)
{
    if (!cli_jw_str(w, v))
        die_usage("a session takes arguments, environment entries and paths in UTF-8 only "
                  "('%s' is not): run this command on its own", v);
}

/* ,"key":[...] of the strings v[0..n) */
static void req_strs(cli_jw *w, const char *key, char *const *v, size_t n)
{
    cli_jw_raw(w, ",\"");
    cli_jw_raw(w, key);
    cli_jw_raw(w, "\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            cli_jw_raw(w, ",");
        req_str(w, v[i]);
    }
    cli_jw_raw(w, "]");
}

int cli_session_exec(int argc, char **argv, cli_guard_paths_fn guard_paths)
{
    if (argc < 2)
        return cli_session_usage("exec needs a session id", NULL);
    const char *id = argv[1];
    bool json_out = false, verbose_req = false, has_timeout = false;
    double timeout = 0;
    a3s_strv env = {0};
    static const struct option lo[] = {
        {"timeout", required_argument, NULL, 't'}, {"env", required_argument, NULL, 'e'},
        {"json", no_argument, NULL, 'J'}, {"verbose", no_argument, NULL, 'v'},
        {"tty", no_argument, NULL, 'T'}, {NULL, 0, NULL, 0}};
    const char *command = NULL;
    int ch;
    opterr = 0;
    /* --json as getopt reads it (abbreviated too; never the value of -c or a word of
     * the program): a refusal of the command line itself is then JSON as well. */
    json_errors = false;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "+t:e:c:v", lo, NULL)) != -1)
        if (ch == 'J')
            json_errors = true;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "+t:e:c:v", lo, NULL)) != -1) {
        switch (ch) {
        case 't': {
            char *end;
            double s = strtod(optarg, &end);
            if (*end || !(s > 0) || s > 86400 || !isfinite(s))
                die_usage("invalid timeout '%s' (seconds, greater than zero, at most 86400)",
                          optarg);
            timeout = s;
            has_timeout = true;
            break;
        }
        case 'e':
            if (!strchr(optarg, '='))
                die_usage("%s", "-e needs NAME=VALUE");
            if (a3s_strv_push(&env, optarg) < 0)
                die_usage("%s", "out of memory");
            break;
        case 'c': command = optarg; break;
        case 'J': json_out = true; break;
        case 'v': verbose_req = true; break;
        case 'T': die_usage("%s", "--tty is not available in a session (run the command on its own)");
        default: die_usage("unknown option or missing value: '%s'", argv[optind - 1]);
        }
    }
    bool has_argv = optind < argc;
    if (has_argv == !!command)
        die_usage("%s", "give either -c COMMAND or -- PROGRAM [ARG...]");
    cli_jw w = {0};
    cli_jw_raw(&w, "{\"op\":\"exec\"");
    if (command) {
        cli_jw_raw(&w, ",\"command\":");
        req_str(&w, command);
    } else {
        req_strs(&w, "argv", argv + optind, (size_t)(argc - optind));
    }
    req_strs(&w, "env", env.v, env.n);
    a3s_strv_free(&env);
    if (has_timeout) {
        char t[64];
        snprintf(t, sizeof t, ",\"timeout\":%.17g", timeout);
        cli_jw_raw(&w, t);
    }
    if (verbose_req)
        cli_jw_raw(&w, ",\"verbose\":true");
    /* Where this program lies and the names it was run by: the worker protects them in
     * the workspace, as a fresh run protects its own (bindings/instdir.h). */
    char *img = NULL;
    a3s_strv gfiles = {0}, gdirs = {0};
    if (guard_paths(&img, &gfiles, &gdirs) < 0)
        die_usage("%s", "out of memory");
    /* Relative names are the kernel's from this process's directory, not the worker's:
     * sent absolute. */
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        die_usage("session exec: the current directory: %s", strerror(errno));
    for (int pass = 0; pass < 2; pass++) {
        a3s_strv *l = pass ? &gdirs : &gfiles;
        for (size_t i = 0; i < l->n; i++) {
            char *abs = NULL;
            if (l->v[i][0] != '/' && asprintf(&abs, "%s/%s", cwd, l->v[i]) < 0)
                die_usage("%s", "out of memory");
            if (abs) {
                free(l->v[i]);
                l->v[i] = abs;
            }
        }
    }
    req_strs(&w, "guard_files", gfiles.v, gfiles.n);
    req_strs(&w, "guard_dirs", gdirs.v, gdirs.n);
    cli_jw_raw(&w, ",\"guard_image\":");
    if (img)
        req_str(&w, img);
    else
        cli_jw_raw(&w, "null");
    free(img);
    a3s_strv_free(&gfiles);
    a3s_strv_free(&gdirs);
    cli_jw_raw(&w, json_out ? ",\"json\":true" : ",\"json\":false");
    /* A closed 0, 1 or 2 goes as /dev/null, said so (a closed output is not mirrored). */
    cli_jw_raw(&w, ",\"closed\":[");
    for (int fd = 0; fd < 3; fd++) {
        bool c = fcntl(fd, F_GETFD) < 0;
        if (c && open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd)
            return EXIT_REFUSED;
        cli_jw_raw(&w, c ? (fd ? ",true" : "true") : (fd ? ",false" : "false"));
    }
    cli_jw_raw(&w, "]}");
    char *text = cli_jw_take(&w);
    if (text && strlen(text) > A3S_SIO_MAX_FRAME) {
        free(text);
        die_usage("the request is larger than a session takes (%u MiB of arguments, "
                  "environment entries and paths): run this command on its own",
                  A3S_SIO_MAX_FRAME >> 20);
    }
    int conn = connect_to(id, NULL);
    if (!text || conn < 0) {
        json_error("setup", "session %s: no such session", id);
        free(text);
        return EXIT_REFUSED;
    }
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
        for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
            (void)sigaction(sigs[i], &sa, NULL);
    }
    int rc = a3s_sio_exec(conn, text, strlen(text), sig_pipe[0]);
    free(text);
    if (got_signal) {
        fprintf(stderr, "a3s-sandbox: interrupted by %s; the process tree was killed\n",
                strsignal(got_signal));
        json_error("aborted", "interrupted by %s; the process tree was killed",
                   strsignal(got_signal));
        return 128 + got_signal;
    }
    if (rc < 0) {
        fprintf(stderr, "a3s-sandbox: session %s: the session ended during the command\n", id);
        json_error("setup", "session %s: the session ended during the command", id);
        return EXIT_REFUSED;
    }
    return rc;
}

int cli_session_stop(int argc, char **argv)
{
    if (argc != 2)
        return cli_session_usage("stop needs exactly one session id", NULL);
    int pidfd = -1;
    int conn = connect_to(argv[1], &pidfd);
    if (conn < 0)
        return EXIT_REFUSED;
    static const char stop[] = "{\"op\":\"stop\"}";
    const int fds[3] = {0, 1, 2};
    if (a3s_sio_send(conn, stop, sizeof stop - 1, fds, 3) < 0 || a3s_sio_wait_rc(conn, -1) < 0) {
        fprintf(stderr, "a3s-sandbox: session %s: %s\n", argv[1], strerror(errno));
        return EXIT_REFUSED;
    }
    close(conn);
    /* Returns once the supervisor is gone (its commands killed, the session closed). */
    struct pollfd pf = {pidfd, POLLIN, 0};
    if (pidfd >= 0 && poll(&pf, 1, 30000) <= 0) {
        fprintf(stderr, "a3s-sandbox: session %s: still stopping after 30 s\n", argv[1]);
        return EXIT_REFUSED;
    }
    return 0;
}
