/* a3s-sandbox session exec|stop|list: the client side (session.c has the supervisor).
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

#include <jansson.h>

#include "a3s_sandbox.h"
#include "cli.h"
#include "instdir.h"
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

/* A string of the request: never one left out (json_string refuses text that is not
 * UTF-8, and a missing argument or guard path would change what runs). */
static json_t *req_str(const char *v)
{
    json_t *j = json_string(v);
    if (!j)
        die_usage("a session takes arguments, environment entries and paths in UTF-8 only "
                  "('%s' is not): run this command on its own", v);
    return j;
}

int cli_session_exec(int argc, char **argv)
{
    if (argc < 2)
        return cli_session_usage("exec needs a session id", NULL);
    const char *id = argv[1];
    json_t *req = json_object();
    json_t *env = json_array();
    bool json_out = false;
    if (!req || !env)
        return EXIT_REFUSED;
    static const struct option lo[] = {
        {"timeout", required_argument, NULL, 't'}, {"env", required_argument, NULL, 'e'},
        {"json", no_argument, NULL, 'J'}, {"verbose", no_argument, NULL, 'v'},
        {"tty", no_argument, NULL, 'T'}, {NULL, 0, NULL, 0}};
    const char *command = NULL;
    int ch;
    opterr = 0;
    optind = 2;
    json_errors = false;
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--json"))
            json_errors = true;
    while ((ch = getopt_long(argc, argv, "+t:e:c:v", lo, NULL)) != -1) {
        switch (ch) {
        case 't': {
            char *end;
            double s = strtod(optarg, &end);
            if (*end || !(s > 0) || s > 86400 || !isfinite(s))
                die_usage("invalid timeout '%s' (seconds, greater than zero, at most 86400)",
                          optarg);
            json_object_set_new(req, "timeout", json_real(s));
            break;
        }
        case 'e':
            if (!strchr(optarg, '='))
                die_usage("%s", "-e needs NAME=VALUE");
            json_array_append_new(env, req_str(optarg));
            break;
        case 'c': command = optarg; break;
        case 'J': json_out = true; break;
        case 'v': json_object_set_new(req, "verbose", json_true()); break;
        case 'T': die_usage("%s", "--tty is not available in a session (run the command on its own)");
        default: die_usage("unknown option or missing value: '%s'", argv[optind - 1]);
        }
    }
    bool has_argv = optind < argc;
    if (has_argv == !!command)
        die_usage("%s", "give either -c COMMAND or -- PROGRAM [ARG...]");
    if (command) {
        json_object_set_new(req, "command", req_str(command));
    } else {
        json_t *a = json_array();
        for (int i = optind; i < argc; i++)
            json_array_append_new(a, req_str(argv[i]));
        json_object_set_new(req, "argv", a);
    }
    json_object_set_new(req, "op", json_string("exec"));
    /* Where this program lies and the names it was run by: the worker protects them in
     * the workspace, as a fresh run protects its own (bindings/instdir.h). */
    char *img = NULL;
    a3s_strv gfiles = {0}, gdirs = {0};
    if (a3s_instdir_guard_paths(&img, &gfiles, &gdirs) < 0)
        die_usage("%s", "out of memory");
    /* Relative names are the kernel's from this process's directory, not the worker's:
     * sent absolute. */
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        die_usage("session exec: the current directory: %s", strerror(errno));
    json_t *gf = json_array(), *gd = json_array();
    for (int pass = 0; pass < 2; pass++) {
        const a3s_strv *l = pass ? &gdirs : &gfiles;
        for (size_t i = 0; i < l->n; i++) {
            char *abs = NULL;
            if (l->v[i][0] != '/' && asprintf(&abs, "%s/%s", cwd, l->v[i]) < 0)
                die_usage("%s", "out of memory");
            json_array_append_new(pass ? gd : gf, req_str(abs ? abs : l->v[i]));
            free(abs);
        }
    }
    json_object_set_new(req, "guard_files", gf);
    json_object_set_new(req, "guard_dirs", gd);
    json_object_set_new(req, "guard_image", img ? req_str(img) : json_null());
    free(img);
    a3s_strv_free(&gfiles);
    a3s_strv_free(&gdirs);
    json_object_set_new(req, "env", env);
    json_object_set_new(req, "json", json_boolean(json_out));
    /* A closed 0, 1 or 2 goes as /dev/null, said so (a closed output is not mirrored). */
    json_t *closed = json_array();
    for (int fd = 0; fd < 3; fd++) {
        bool c = fcntl(fd, F_GETFD) < 0;
        if (c && open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd)
            return EXIT_REFUSED;
        json_array_append_new(closed, json_boolean(c));
    }
    json_object_set_new(req, "closed", closed);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    int conn = connect_to(id, NULL);
    if (!text || conn < 0) {
        json_error("setup", "session %s: no such session", id);
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

int cli_session_list(void)
{
    char dir[256];
    if (a3s_sio_dir(dir, sizeof dir) < 0) {
        fprintf(stderr, "a3s-sandbox: session: the state directory %s: %s\n", dir,
                strerror(errno));
        return EXIT_REFUSED;
    }
    return a3s_sio_list(dir, stdout) < 0 ? EXIT_REFUSED : 0;
}
