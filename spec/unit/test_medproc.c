/* Tests of backends/linux/medproc.c, the library side of the mediator process: a3s_medproc_start
 * spawns the built a3s-sandbox-mediator and waits until it serves (the relay's end of the
 * channel works: a connection handed over is decided), with only LOCALDOMAIN and
 * RES_OPTIONS of the host environment, no signal blocked or ignored that the caller had;
 * a3s_medproc_stop stops and reaps it and returns the denial records; failures (no such
 * program, a program that exits at once) are A3S_ERR_SETUP with the reason; every path
 * releases every descriptor and child, also with other threads busy resolving and
 * allocating; the mediator dies with the thread that started it. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "medproc.h"
#include "tap.h"

static char bin[4096];

static int count_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

static bool no_children(void)
{
    return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

/* A loopback TCP connection handed to the mediator as the relay does; our end, or -1. */
static int hand_over(int chan)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int s = -1;
    if (l >= 0 && c >= 0 && bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 1) == 0 &&
        getsockname(l, (struct sockaddr *)&sa, &sl) == 0 &&
        connect(c, (struct sockaddr *)&sa, sizeof sa) == 0)
        s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (l >= 0)
        close(l);
    if (s < 0) {
        if (c >= 0)
            close(c);
        return -1;
    }
    char kind = 'S';
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct iovec iov = {.iov_base = &kind, .iov_len = 1};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &s, sizeof s);
    ssize_t sent = sendmsg(chan, &m, MSG_NOSIGNAL);
    close(s);
    if (sent != 1) {
        close(c);
        return -1;
    }
    return c;
}

static unsigned long long status_mask(pid_t pid, const char *key)
{
    char path[64], line[256];
    unsigned long long v = ~0ULL;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 16);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

static void test_serving(void)
{
    static const char *const env[] = {"SECRET_TOKEN=s3cret",
                                      "RES_OPTIONS=attempts:2",
                                      "LD_PRELOAD=/nonexistent.so",
                                      "LOCALDOMAIN=example.test",
                                      "HOSTALIASES=/etc/hostname",
                                      "RES_OPTIONS=ignored",
                                      NULL};
    a3s_grant g[2];
    a3s_error err = {0};
    ok(a3s_grant_parse("granted.example:443", &g[0], &err) == 0 &&
           a3s_grant_parse("[::1]", &g[1], &err) == 0,
       "grants parse");

    /* The caller blocks and ignores signals: none of that reaches the mediator. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_usr2, old_int;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGUSR2, &ign, &old_usr2);
    sigaction(SIGINT, &ign, &old_int);

    int before = count_fds();
    a3s_medproc m;
    int relay_end = -1;
    int rc = a3s_medproc_start(bin, g, 2, env, &relay_end, &m, &err);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    sigaction(SIGUSR2, &old_usr2, NULL);
    sigaction(SIGINT, &old_int, NULL);
    ok(rc == 0 && m.pid > 0 && relay_end >= 0, "start: it serves (%s)", rc ? err.msg : "ok");
    if (rc != 0)
        return;
    ok(fcntl(relay_end, F_GETFD) == FD_CLOEXEC && fcntl(m.stop_w, F_GETFD) == FD_CLOEXEC &&
           fcntl(m.denials, F_GETFD) == FD_CLOEXEC && fcntl(m.pidfd, F_GETFD) == FD_CLOEXEC,
       "every descriptor kept here is CLOEXEC");
    ok(count_fds() == before + 4,
       "exactly four kept: the relay's end, stop, denials, pidfd "
       "(%d more)",
       count_fds() - before);

    char path[64], envbuf[512] = "";
    snprintf(path, sizeof path, "/proc/%d/environ", (int)m.pid);
    int efd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t en = efd >= 0 ? read(efd, envbuf, sizeof envbuf - 1) : -1;
    if (efd >= 0)
        close(efd);
    for (ssize_t i = 0; i < en; i++)
        if (envbuf[i] == '\0')
            envbuf[i] = ' ';
    envbuf[en > 0 ? en : 0] = '\0';
    ok_streq(envbuf, "LOCALDOMAIN=example.test RES_OPTIONS=attempts:2 ",
             "its environment: the first LOCALDOMAIN and RES_OPTIONS, nothing else");
    unsigned long long classic = 0x7fffffffULL, pipe_bit = 1ULL << (SIGPIPE - 1);
    ok((status_mask(m.pid, "SigIgn") & classic) == pipe_bit,
       "it ignores SIGPIPE and nothing the caller ignored");
    ok((status_mask(m.pid, "SigBlk") & classic & ~pipe_bit) == 0,
       "it blocks nothing the caller blocked");

    int cl = hand_over(relay_end);
    char got[16] = "";
    if (cl >= 0) {
        /* SOCKS5: no authentication, then CONNECT other.example:80 (not granted). */
        static const unsigned char req[] = {5,   1,   0,   5,   1,   0,   3,   13,
                                            'o', 't', 'h', 'e', 'r', '.', 'e', 'x',
                                            'a', 'm', 'p', 'l', 'e', 0,   80};
        (void)!write(cl, req, sizeof req);
        struct timeval tv = {5, 0};
        setsockopt(cl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ssize_t n = 0, r;
        while (n < 4 && (r = read(cl, got + n, sizeof got - (size_t)n)) > 0)
            n += r;
        close(cl);
    }
    ok(got[0] == 5 && got[1] == 0 && got[2] == 5 && got[3] == 2,
       "a SOCKS5 connection handed over on the relay's end is decided: refused (0x02)");
    close(relay_end);

    char *den = a3s_medproc_stop(&m);
    ok(m.pid == -1 && m.stop_w == -1 && m.denials == -1 && m.pidfd == -1,
       "stop: nothing left open");
    ok(m.status != -1 && WIFEXITED(m.status) && WEXITSTATUS(m.status) == 0,
       "it exited 0 at the stop (status %d)", m.status);
    ok(den && strstr(den, "\"target\":\"other.example:80\"") && strstr(den, "\"summary\":true"),
       "its records: the refusal and the summary");
    free(den);
    ok(count_fds() == before, "every descriptor released");
    ok(no_children(), "it was reaped");
    free(a3s_medproc_stop(&m)); /* again: harmless */
}

static void test_failures(void)
{
    int before = count_fds();
    a3s_medproc m;
    int relay_end = -1;
    a3s_error err = {0};
    int rc =
        a3s_medproc_start("/nonexistent/a3s-sandbox-mediator", NULL, 0, NULL, &relay_end, &m, &err);
    ok(rc < 0 && err.code == A3S_ERR_SETUP && strstr(err.msg, "No such file"),
       "no such program: A3S_ERR_SETUP (%s)", err.msg);
    ok(relay_end == -1 && m.pid == -1 && m.denials == -1, "... nothing handed back");

    memset(&err, 0, sizeof err);
    rc = a3s_medproc_start("/bin/false", NULL, 0, NULL, &relay_end, &m, &err);
    ok(rc < 0 && err.code == A3S_ERR_SETUP && strstr(err.msg, "could not start (exit status 1)"),
       "a program that exits at once: refused with its status (%s)", err.msg);
    ok(relay_end == -1 && m.pid == -1 && m.stop_w == -1, "... nothing handed back");
    ok(count_fds() == before, "failures release every descriptor");
    ok(no_children(), "... and every child");
}

/* Other threads resolve names and allocate all along: starting and stopping the mediator
 * never waits on their locks (nothing of the library runs in a child). */
static atomic_int busy_stop;

static void *busy(void *arg)
{
    (void)arg;
    while (!atomic_load(&busy_stop)) {
        struct addrinfo *ai = NULL;
        if (getaddrinfo("localhost", "80", NULL, &ai) == 0)
            freeaddrinfo(ai);
        free(malloc(4096));
    }
    return NULL;
}

static void test_threads(void)
{
    int before = count_fds(), good = 0; /* the busy threads' own fds come and go */
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, busy, NULL);
    a3s_grant g;
    a3s_error err;
    a3s_grant_parse("granted.example", &g, &err);
    for (int i = 0; i < 30; i++) {
        a3s_medproc m;
        int relay_end = -1;
        if (a3s_medproc_start(bin, &g, 1, NULL, &relay_end, &m, &err) == 0) {
            close(relay_end);
            char *den = a3s_medproc_stop(&m);
            good += m.status != -1 && WIFEXITED(m.status) && WEXITSTATUS(m.status) == 0;
            free(den);
        }
    }
    atomic_store(&busy_stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    ok(good == 30, "30 starts and stops with 4 busy threads: all served and stopped (%d)", good);
    ok(count_fds() == before && no_children(), "... nothing left behind (%d more fds)",
       count_fds() - before);
}

/* The death signal follows the thread that spawned it: that thread must be the one that
 * stops it (a3s_sandbox_exec does both). */
typedef struct started {
    a3s_medproc m;
    int relay_end;
    int rc;
} started;

static void *start_in_thread(void *arg)
{
    started *s = arg;
    a3s_error err;
    s->rc = a3s_medproc_start(bin, NULL, 0, NULL, &s->relay_end, &s->m, &err);
    return NULL;
}

static void test_thread_death(void)
{
    started s = {.relay_end = -1};
    pthread_t t;
    pthread_create(&t, NULL, start_in_thread, &s);
    pthread_join(t, NULL);
    ok(s.rc == 0, "started from a thread that then ends");
    if (s.rc != 0)
        return;
    struct pollfd p = {s.m.pidfd, POLLIN, 0};
    ok(poll(&p, 1, 3000) == 1, "the mediator dies with that thread");
    close(s.relay_end);
    free(a3s_medproc_stop(&s.m));
    ok(s.m.status != -1 && WIFSIGNALED(s.m.status) && WTERMSIG(s.m.status) == SIGKILL,
       "... of SIGKILL (status %d)", s.m.status);
}

int main(void)
{
    const char *env = getenv("A3S_SANDBOX_MEDIATOR");
    const char *bd = getenv("A3S_BUILD_DIR");
    if (env && *env)
        snprintf(bin, sizeof bin, "%s", env);
    else if (bd)
        snprintf(bin, sizeof bin, "%s/a3s-sandbox-mediator", bd);
    if (!bin[0] || access(bin, X_OK) != 0) {
        ok(0, "the mediator binary exists (A3S_SANDBOX_MEDIATOR or A3S_BUILD_DIR): '%s'", bin);
        return tap_done();
    }
    signal(SIGPIPE, SIG_IGN);
    test_serving();
    test_failures();
    test_threads();
    test_thread_death();
    return tap_done();
}
