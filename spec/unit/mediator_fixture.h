/* The live mediator of the mediator's unit tests (test_mediator_http.c, _limits.c,
 * _own.c): upstreams on 127.0.0.1, a3s_mediator_serve in a forked child on a Unix socket,
 * the client helpers that talk to it (`cur`), the SOCKS5 request helpers and the reader of
 * its denial records. Loopback only: nothing here contacts another host. */
#ifndef A3S_MEDIATOR_FIXTURE_H
#define A3S_MEDIATOR_FIXTURE_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "grant.h"
#include "mediator.h"
#include "mediator_cases.h"
#include "tap.h"
#include "util.h"

/* ---------------------------------------------------------------- upstream on loopback */

static pthread_mutex_t up_lock = PTHREAD_MUTEX_INITIALIZER;
static int up_accepts;
static char up_head[8192];
static int up_listen = -1;
static int up_port;

static inline int upstream_accepts(void)
{
    pthread_mutex_lock(&up_lock);
    int n = up_accepts;
    pthread_mutex_unlock(&up_lock);
    return n;
}

/* "ping" -> "pong" as often as asked; an HTTP head -> recorded, answered, closed. */
static inline void *up_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[8192];
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        while (len >= 4 && memcmp(buf, "ping", 4) == 0) {
            (void)send(fd, "pong", 4, MSG_NOSIGNAL);
            memmove(buf, buf + 4, len - 4);
            len -= 4;
            buf[len] = '\0';
        }
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            pthread_mutex_lock(&up_lock);
            snprintf(up_head, sizeof up_head, "%.*s", (int)(end + 4 - buf), buf);
            pthread_mutex_unlock(&up_lock);
            static const char resp[] = "HTTP/1.0 200 OK\r\n\r\nbody";
            (void)send(fd, resp, sizeof resp - 1, MSG_NOSIGNAL);
            break;
        }
        if (len >= sizeof buf - 1)
            break;
    }
    close(fd);
    return NULL;
}

static inline void *up_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept4(up_listen, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        pthread_mutex_lock(&up_lock);
        up_accepts++;
        pthread_mutex_unlock(&up_lock);
        pthread_t t;
        if (pthread_create(&t, NULL, up_conn, (void *)(intptr_t)fd) != 0)
            close(fd);
        else
            pthread_detach(t);
    }
}

static inline int tcp_socket_on_loopback(int *port, int backlog)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        (backlog >= 0 && listen(fd, backlog) < 0) ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
        perror("upstream socket");
        exit(2);
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

/* ---------------------------------------------------------------- the mediator child */

typedef struct mediator {
    pid_t pid;
    int stop_w;
    char sock[80], denials[96];
} mediator;

/* The main mediator (each test program starts its own); the client helpers talk to
 * `cur`. */
static mediator main_med = {.pid = -1, .stop_w = -1};
static mediator *cur = &main_med;

static inline void start_mediator_grants(mediator *m, const a3s_grant *g, size_t n,
                                         const a3s_mediator_opts *o)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", m->sock);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int stop[2];
    int dfd = open(m->denials, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 512) < 0 ||
        pipe2(stop, O_CLOEXEC) < 0 || dfd < 0) {
        perror("mediator setup");
        exit(2);
    }
    fflush(stdout);
    m->pid = fork();
    if (m->pid < 0) {
        perror("fork");
        exit(2);
    }
    if (m->pid == 0) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(stop[1]);
        int rc = a3s_mediator_serve(lfd, stop[0], g, n, dfd, o);
        _exit(rc == 0 ? 0 : 3);
    }
    close(lfd);
    close(dfd);
    close(stop[0]);
    m->stop_w = stop[1];
}

static inline void start_mediator(mediator *m, const char *const *specs, size_t n,
                                  const a3s_mediator_opts *o)
{
    a3s_grant g[8];
    a3s_error err;
    for (size_t i = 0; i < n; i++)
        if (a3s_grant_parse(specs[i], &g[i], &err) < 0) {
            fprintf(stderr, "grant %s: %s\n", specs[i], err.msg);
            exit(2);
        }
    start_mediator_grants(m, g, n, o);
}

static inline int med_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    /* Bounded by the member: a program whose `cur` never changes lets the compiler see
     * only main_med, and it would count the next member in (-Wformat-truncation). */
    snprintf(sa.sun_path, sizeof sa.sun_path, "%.*s", (int)sizeof cur->sock, cur->sock);
    struct timeval tv = {5, 0};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
        perror("connect to mediator");
        exit(2);
    }
    return fd;
}

static inline void send_buf(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the mediator may already have hung up: what it answered is checked */
        c += w;
        n -= (size_t)w;
    }
}

static inline void send_str(int fd, const char *s)
{
    send_buf(fd, s, strlen(s));
}

/* Read until the peer closes (a reset after its answer counts as closing). */
static inline size_t read_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return len;
}

static inline size_t read_n(int fd, void *buf, size_t want)
{
    size_t len = 0;
    while (len < want) {
        ssize_t n = recv(fd, (char *)buf + len, want - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    return len;
}

/* Read an HTTP head (through CRLFCRLF) byte by byte, so nothing after it is consumed. */
static inline size_t read_head(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = recv(fd, buf + len, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len++;
        if (len >= 4 && memcmp(buf + len - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    buf[len] = '\0';
    return len;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Timing checks must hold on a loaded machine, so none is a tight absolute figure: a
 * timeout is checked against what it allows + 5x a reference exchange measured in the
 * same test (it slows down with the machine) + 3 s of slack. What they guard against is
 * far longer: no timeout at all (a hang; the kernel gives up a connect after ~2 min), the
 * 60 s default instead of the configured one, or for a stop (10 s) the 30 s idle timeout
 * of connections a stopping serve would wait for. */
enum { STOP_BOUND_MS = 10000 };
static inline unsigned long long bound_ms(unsigned long long allowed, unsigned long long ref)
{
    return allowed + 5 * ref + 3000;
}

/* A client socket whose reads end at the mediator's answer or hang-up, not at the
 * client's own 5 s receive timeout (which would look like a hang-up to read_all). */
static inline void patient(int fd)
{
    struct timeval tv = {60, 0};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) {
        perror("SO_RCVTIMEO");
        exit(2);
    }
}

static inline bool mediator_alive(void)
{
    int st;
    return cur->pid > 0 && waitpid(cur->pid, &st, WNOHANG) == 0;
}

static inline int count_fds(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(p);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* An HTTP request whose answer we expect to be a refusal that never reaches upstream. */
static inline void expect_refused(const void *req, size_t n, const char *status, const char *what)
{
    int before = upstream_accepts();
    int fd = med_connect();
    send_buf(fd, req, n);
    char resp[1024];
    read_all(fd, resp, sizeof resp);
    close(fd);
    sleep_ms(200);
    ok(strncmp(resp, status, strlen(status)) == 0 && upstream_accepts() == before,
       "%s -> '%s', upstream untouched (got '%.20s')", shown(what), status, shown(resp));
}

/* One request, its whole answer (for floods: no waiting, no upstream check). */
static inline void expect_quiet_refusal(const char *req, char *resp, size_t cap)
{
    int fd = med_connect();
    send_str(fd, req);
    read_all(fd, resp, cap);
    close(fd);
}

static inline bool connect_and_ping(void)
{
    int fd = med_connect();
    char req[256], resp[512];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
             up_port, up_port);
    send_str(fd, req);
    read_head(fd, resp, sizeof resp);
    bool good = strcmp(resp, "HTTP/1.1 200 Connection established\r\n\r\n") == 0;
    char pong[5] = "";
    send_str(fd, "ping");
    good = good && read_n(fd, pong, 4) == 4 && memcmp(pong, "pong", 4) == 0;
    close(fd);
    return good;
}
/* ---------------------------------------------------------------- SOCKS5 requests */

static inline size_t socks_connect_req(unsigned char *m, unsigned char cmd, const char *domain,
                                       int port)
{
    size_t n = 0;
    m[n++] = 5;
    m[n++] = cmd;
    m[n++] = 0;
    m[n++] = 3;
    m[n++] = (unsigned char)strlen(domain);
    memcpy(m + n, domain, strlen(domain));
    n += strlen(domain);
    m[n++] = (unsigned char)(port >> 8);
    m[n++] = (unsigned char)port;
    return n;
}

/* Greeting, then request; returns the reply code (or -1), leaves *fdp open for relaying. */
static inline int socks_exchange(const unsigned char *req, size_t n, int *fdp)
{
    int fd = med_connect();
    send_buf(fd, "\x05\x01\x00", 3);
    unsigned char rep[10];
    if (read_n(fd, rep, 2) != 2 || rep[0] != 5 || rep[1] != 0) {
        close(fd);
        return -1;
    }
    send_buf(fd, req, n);
    int code = read_n(fd, rep, 10) == 10 && rep[0] == 5 ? rep[1] : -1;
    if (fdp)
        *fdp = fd;
    else
        close(fd);
    return code;
}

/* ---------------------------------------------------------------- denial records */

/* Read a denial file: the records (appended to arr when given, counted in *records) and
 * the summary line (*summary, a new reference or NULL). Returns the number of lines, -1
 * when a line is not one JSON object or something follows the summary. */
static inline int read_denials(const char *path, json_t *arr, int *records, json_t **summary)
{
    *records = 0;
    *summary = NULL;
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lines = 0;
    bool bad = false;
    while ((n = getline(&line, &cap, f)) > 0) {
        lines++;
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)n, 0, &je);
        if (!json_is_object(o) || line[n - 1] != '\n' || *summary) {
            bad = true;
            json_decref(o);
            continue;
        }
        if (json_is_true(json_object_get(o, "summary"))) {
            *summary = o;
            continue;
        }
        (*records)++;
        if (arr)
            json_array_append_new(arr, o);
        else
            json_decref(o);
    }
    free(line);
    fclose(f);
    return bad ? -1 : lines;
}

static inline bool has_record(json_t *arr, const char *proto, const char *target,
                              const char *reason)
{
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        const char *p = json_string_value(json_object_get(o, "protocol"));
        const char *t = json_string_value(json_object_get(o, "target"));
        const char *r = json_string_value(json_object_get(o, "reason"));
        if (p && t && r && (!proto || strcmp(p, proto) == 0) && (!target || strcmp(t, target) == 0) &&
            strcmp(r, reason) == 0)
            return true;
    }
    return false;
}

#endif
