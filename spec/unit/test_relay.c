/* Tests of the built a3s-sandbox-relay on the host, outside any sandbox: an echo server
 * in a thread stands in for the mediator and takes the connections the relay hands over
 * on its channel (a socketpair, fd 9 in the relay), a libseccomp filter that denies
 * socket(AF_UNIX) goes in as --filter-fd, and the command is a bash script. Checked:
 * connections on both ports reach the mediator as fds (small, 1 MiB with back-pressure,
 * half-close, a mediator that refuses and closes mid-request), one fd per TCP
 * connection, the command under the filter while the relay is not, fds 3/4 reaching the
 * command and not kept by the relay, the filter fd, the channel and the listeners not
 * leaking to the command, the exit status passed on (code and signal), listeners gone
 * afterwards, and setup errors (exit 125, command never run). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

#define FILTER_FD 7
#define CHANNEL_FD 9
#define ECHO_MAX 1024

static char dir[] = "/tmp/a3s-test-relay-XXXXXX";
static int relay_end = -1; /* the relay's end of the channel, passed as CHANNEL_FD */
static char relay_bin[4096];

/* ---- the stand-in mediator: echoes every connection; "DENY\n" first => "403\n", close */

typedef struct echo_server {
    int lfd, stop[2];
    pthread_t th;
    atomic_int accepted;
} echo_server;

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* One connection handed over on the channel (SCM_RIGHTS), or -1. */
static int take_fd(int chan)
{
    char kind;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &kind, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    if (recvmsg(chan, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) <= 0)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    int fd = -1;
    if (c && c->cmsg_type == SCM_RIGHTS && (kind == 'H' || kind == 'S'))
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

static void *echo_main(void *arg)
{
    echo_server *s = arg;
    int fds[ECHO_MAX];
    bool fresh[ECHO_MAX];
    size_t n = 0;
    static char buf[65536];
    for (;;) {
        struct pollfd p[ECHO_MAX + 2];
        p[0] = (struct pollfd){.fd = s->stop[0], .events = POLLIN};
        p[1] = (struct pollfd){.fd = n < ECHO_MAX && s->lfd >= 0 ? s->lfd : -1, .events = POLLIN};
        for (size_t i = 0; i < n; i++)
            p[2 + i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        if (poll(p, 2 + n, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents)
            break;
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            bool done = false;
            if (p[2 + i].revents) {
                ssize_t r = recv(fds[i], buf, sizeof buf, 0);
                if (r <= 0) {
                    done = true;
                } else if (fresh[i] && r >= 5 && memcmp(buf, "DENY\n", 5) == 0) {
                    write_all(fds[i], "403\n", 4);
                    done = true; /* close with the rest of the request unread */
                } else {
                    write_all(fds[i], buf, (size_t)r);
                }
                fresh[i] = false;
            }
            if (done) {
                close(fds[i]);
            } else {
                fds[kept] = fds[i];
                fresh[kept++] = fresh[i];
            }
        }
        n = kept;
        if (p[1].revents & POLLIN) {
            int c = take_fd(s->lfd);
            if (c >= 0) {
                atomic_fetch_add(&s->accepted, 1);
                (void)fcntl(c, F_SETFL, 0); /* blocking, as the echo loop expects */
                fds[n] = c;
                fresh[n++] = true;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    return NULL;
}

static int echo_start(echo_server *s)
{
    memset(s, 0, sizeof *s);
    int chan[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0 ||
        pipe2(s->stop, O_CLOEXEC) < 0)
        return -1;
    s->lfd = chan[0];
    relay_end = chan[1];
    return pthread_create(&s->th, NULL, echo_main, s) == 0 ? 0 : -1;
}

static void echo_stop(echo_server *s)
{
    (void)!write(s->stop[1], "x", 1);
    pthread_join(s->th, NULL);
    close(s->stop[0]);
    close(s->stop[1]);
    close(s->lfd);
    close(relay_end);
}

/* ---- helpers */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* A filter for the command: socket(AF_UNIX) fails with EPERM, everything else passes. */
static int filter_memfd(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return -1;
    int fd = -1;
    /* Spelled out (SCMP_A0 leaves datum_b to default, which clang warns about). */
    struct scmp_arg_cmp unix_only = {.arg = 0, .op = SCMP_CMP_EQ, .datum_a = AF_UNIX, .datum_b = 0};
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1, unix_only) == 0 &&
        (fd = memfd_create("relay-test-filter", MFD_CLOEXEC | MFD_ALLOW_SEALING)) >= 0) {
        if (seccomp_export_bpf(ctx, fd) != 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
            lseek(fd, 0, SEEK_SET) != 0) {
            close(fd);
            fd = -1;
        }
    }
    seccomp_release(ctx);
    return fd;
}

static int bytes_memfd(const void *p, size_t n)
{
    int fd = memfd_create("relay-test-bytes", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (write(fd, p, n) != (ssize_t)n || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Start argv with the given fds on 0, 1, 2, 3, 4 and FILTER_FD (-1: left closed). */
static pid_t spawn(char *const *argv, const int map[6])
{
    static const int target[6] = {0, 1, 2, 3, 4, FILTER_FD};
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int high[6];
    for (int i = 0; i < 6; i++)
        high[i] = map[i] >= 0 ? fcntl(map[i], F_DUPFD_CLOEXEC, 100) : -1;
    int chan = relay_end >= 0 ? fcntl(relay_end, F_DUPFD_CLOEXEC, 100) : -1;
    for (int i = 0; i < 6; i++) {
        if (high[i] >= 0) {
            if (dup2(high[i], target[i]) < 0)
                _exit(99);
        } else if (target[i] > 2) {
            close(target[i]);
        }
    }
    if (chan >= 0 && dup2(chan, CHANNEL_FD) < 0)
        _exit(99);
    signal(SIGPIPE, SIG_DFL); /* as a supervisor would start it */
    execv(argv[0], argv);
    _exit(98);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Exit code (128+N for signal N), or -1 after killing it at the deadline. */
static int wait_exit(pid_t pid, int timeout_ms)
{
    int status;
    for (int t = 0;; t += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return -2;
        if (t >= timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        sleep_ms(10);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Read fd until EOF (or error, or the deadline) into a malloc'd string. */
static char *read_all(int fd, int timeout_ms)
{
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0)
            break;
        if (n + 1024 >= cap)
            s = realloc(s, cap *= 2);
        ssize_t r = read(fd, s + n, cap - n - 1);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    s[n] = '\0';
    return s;
}

/* Read fd until a line equal to `line` arrives; everything read so far goes to acc. */
static bool read_until(int fd, const char *line, char *acc, size_t cap, int timeout_ms)
{
    size_t n = strlen(acc);
    char want[64];
    snprintf(want, sizeof want, "%s\n", line);
    while (!strstr(acc, want)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (n + 1 >= cap || poll(&p, 1, timeout_ms) <= 0)
            return false;
        ssize_t r = read(fd, acc + n, cap - n - 1);
        if (r <= 0)
            return false;
        n += (size_t)r;
        acc[n] = '\0';
    }
    return true;
}

static char *file_text(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return strdup("");
    char *s = read_all(fd, 1000);
    close(fd);
    return s;
}

/* Send all of out while reading back, then half-close and read to EOF (or reset):
 * what came back goes into *in. false when the exchange stalled for 10 s. With
 * send_first, everything is sent (blocking) before anything is read, as simple HTTP
 * clients do; false when that send fails. */
static bool exchange(int fd, const char *out, size_t out_len, char **in, size_t *in_len,
                     bool send_first)
{
    size_t sent = 0, cap = out_len + 4096, got = 0;
    if (send_first) {
        while (sent < out_len) {
            ssize_t w = send(fd, out + sent, out_len - sent, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return false;
            sent += (size_t)w;
        }
    }
    char *buf = malloc(cap);
    bool shut = false, send_failed = false;
    (void)fcntl(fd, F_SETFL, O_NONBLOCK);
    for (;;) {
        if (!shut && (sent == out_len || send_failed)) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        struct pollfd p = {.fd = fd, .events = (short)(POLLIN | (shut ? 0 : POLLOUT))};
        if (poll(&p, 1, 10000) <= 0) {
            free(buf);
            return false;
        }
        if (!shut && (p.revents & POLLOUT)) {
            ssize_t w = send(fd, out + sent, out_len - sent, MSG_NOSIGNAL);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN)
                send_failed = true;
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            if (got == cap)
                buf = realloc(buf, cap *= 2);
            ssize_t r = recv(fd, buf + got, cap - got, 0);
            if (r == 0 || (r < 0 && errno != EAGAIN))
                break;
            if (r > 0)
                got += (size_t)r;
        }
    }
    *in = buf;
    *in_len = got;
    return true;
}

static bool port_closed(int port)
{
    int fd = tcp_connect(port);
    if (fd >= 0) {
        close(fd);
        return false;
    }
    return errno == ECONNREFUSED;
}

/* ---- the scenarios */

static const char script[] =
    "set -u\n"
    "n=0; for f in /proc/$$/fd/*; do case $(readlink \"$f\") in socket:*) n=$((n+1));; esac;"
    " done; echo \"sockets:$n\"\n"
    "if [ -e /proc/$$/fd/7 ]; then echo filter-fd-leaked; else echo filter-fd-closed; fi\n"
    "exec 5<>/dev/tcp/127.0.0.1/$1 || exit 20\n"
    "printf ping >&5; IFS= read -r -t 10 -N 4 -u 5 r; echo \"http:$r\"; exec 5>&-\n"
    "exec 5<>/dev/tcp/127.0.0.1/$2 || exit 21\n"
    "printf pong >&5; IFS= read -r -t 10 -N 4 -u 5 r; echo \"socks:$r\"; exec 5>&-\n"
    "python3 -c 'import socket\ntry: socket.socket(socket.AF_UNIX)\n"
    "except PermissionError: print(\"unix-denied\")\nelse: print(\"unix-allowed\")'\n"
    "python3 -c 'import socket; socket.socket(socket.AF_INET).close()' && echo inet-allowed\n"
    "printf x >&3; printf y >&4\n"
    "a=$(readlink /proc/$$/fd/3); b=$(readlink /proc/$$/fd/4); kept=closed\n"
    "for f in /proc/$PPID/fd/*; do l=$(readlink \"$f\");"
    " if [ \"$l\" = \"$a\" ] || [ \"$l\" = \"$b\" ]; then kept=kept; fi; done\n"
    "echo \"parent-$kept-3-4\"\n"
    "echo ready\n"
    "IFS= read -r line\n"
    "exit 7\n";

static void test_main_run(echo_server *es)
{
    int hp = free_port(), sp = free_port();
    char http[32], socks[32], hport[16], sport[16];
    snprintf(http, sizeof http, "127.0.0.1:%d", hp);
    snprintf(socks, sizeof socks, "127.0.0.1:%d", sp);
    snprintf(hport, sizeof hport, "%d", hp);
    snprintf(sport, sizeof sport, "%d", sp);
    char errpath[256];
    snprintf(errpath, sizeof errpath, "%s/stderr", dir);

    int in[2], out[2], p3[2], p4[2];
    int filt = filter_memfd();
    int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ok(filt >= 0 && errfd >= 0 && pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 &&
           pipe2(p3, O_CLOEXEC) == 0 && pipe2(p4, O_CLOEXEC) == 0,
       "setup: filter memfd, pipes");
    char *argv[] = {relay_bin, "--channel-fd", "9", "--http", http, "--socks", socks,
                    "--filter-fd", "7", "--", "bash", "-c", (char *)script, "relay-test",
                    hport, sport, NULL};
    int map[6] = {in[0], out[1], errfd, p3[1], p4[1], filt};
    int before = atomic_load(&es->accepted);
    pid_t pid = spawn(argv, map);
    close(in[0]);
    close(out[1]);
    close(errfd);
    close(p3[1]);
    close(p4[1]);
    close(filt);

    char acc[8192] = "";
    bool ready = read_until(out[0], "ready", acc, sizeof acc, 30000);
    ok(ready, "the command reached its checkpoint");
    ok(strstr(acc, "sockets:0\n") != NULL, "the command inherits no socket (listeners closed)");
    ok(strstr(acc, "filter-fd-closed\n") != NULL, "the filter fd does not reach the command");
    ok(strstr(acc, "http:ping\n") != NULL, "HTTP port: the command's bytes come back via Unix");
    ok(strstr(acc, "socks:pong\n") != NULL, "SOCKS port: the command's bytes come back via Unix");
    ok(strstr(acc, "unix-denied\n") != NULL, "the command cannot create an AF_UNIX socket");
    ok(strstr(acc, "inet-allowed\n") != NULL, "the command can still create AF_INET sockets");
    ok(strstr(acc, "parent-closed-3-4\n") != NULL, "the relay keeps no copy of fds 3 and 4");
    ok(atomic_load(&es->accepted) - before == 2, "each TCP connection handed over as its own fd");

    if (ready) {
        /* 1 MiB both ways through 16 KiB buffers: back-pressure and partial writes. */
        size_t big = 1u << 20;
        char *payload = malloc(big), *back = NULL;
        for (size_t i = 0; i < big; i++)
            payload[i] = (char)('a' + (i * 7 + i / 251) % 26);
        size_t back_len = 0;
        int fd = tcp_connect(hp);
        bool done = fd >= 0 && exchange(fd, payload, big, &back, &back_len, false);
        ok(done && back_len == big && memcmp(back, payload, big) == 0,
           "1 MiB echoed intact, then EOF after the client's half-close (got %zu)", back_len);
        if (fd >= 0)
            close(fd);
        free(back);
        back = NULL;

        /* Half-close: the reply still arrives after the client stopped sending. */
        fd = tcp_connect(sp);
        done = fd >= 0 && exchange(fd, "abc", 3, &back, &back_len, false);
        ok(done && back_len == 3 && memcmp(back, "abc", 3) == 0,
           "half-close: the reply arrives after SHUT_WR, then EOF");
        if (fd >= 0)
            close(fd);
        free(back);
        back = NULL;

        /* A refusal while the client still sends is the mediator's to handle now (it
         * owns the connection): test_mediator checks that it drains before closing. */
        free(payload);

        /* Many at once, all served. */
        int many[40];
        bool all = true;
        for (int i = 0; i < 40; i++)
            many[i] = tcp_connect(i % 2 ? hp : sp);
        for (int i = 0; i < 40; i++) {
            char msg[16], got[16] = "";
            int len = snprintf(msg, sizeof msg, "m%02d", i);
            if (many[i] < 0 || send(many[i], msg, (size_t)len, 0) != len) {
                all = false;
                continue;
            }
            size_t g = 0;
            while (g < (size_t)len) {
                struct pollfd p = {.fd = many[i], .events = POLLIN};
                if (poll(&p, 1, 10000) <= 0)
                    break;
                ssize_t r = recv(many[i], got + g, (size_t)len - g, 0);
                if (r <= 0)
                    break;
                g += (size_t)r;
            }
            if (g != (size_t)len || memcmp(got, msg, (size_t)len) != 0)
                all = false;
        }
        for (int i = 0; i < 40; i++)
            if (many[i] >= 0)
                close(many[i]);
        ok(all, "40 concurrent connections relayed independently");
    }

    (void)!write(in[1], "\n", 1);
    close(in[1]);
    char *rest = read_all(out[0], 20000);
    close(out[0]);
    int rc = wait_exit(pid, 20000);
    ok(rc == 7, "the relay exits with the command's exit code (got %d)", rc);
    char *r3 = read_all(p3[0], 2000), *r4 = read_all(p4[0], 2000);
    ok_streq(r3, "x", "fd 3 reaches the command (and closes when it is done)");
    ok_streq(r4, "y", "fd 4 reaches the command (and closes when it is done)");
    ok(port_closed(hp) && port_closed(sp), "both listeners are gone after the exit");
    char *err = file_text(errpath);
    ok(err[0] == '\0', "nothing on stderr");
    if (err[0])
        printf("# stderr: %s\n", err);
    free(err);
    free(r3);
    free(r4);
    free(rest);
    close(p3[0]);
    close(p4[0]);
}

/* Run the relay with a command; returns the exit code, stderr in *err_out. */
static int run_simple(char **extra, int nextra, const char *filter_bytes, size_t filter_len,
                      char **err_out, int hp, int sp)
{
    char http[32], socks[32], errpath[256];
    snprintf(http, sizeof http, "127.0.0.1:%d", hp);
    snprintf(socks, sizeof socks, "127.0.0.1:%d", sp);
    snprintf(errpath, sizeof errpath, "%s/stderr-simple", dir);
    int filt = filter_bytes ? bytes_memfd(filter_bytes, filter_len) : filter_memfd();
    int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    char *argv[32] = {relay_bin, "--channel-fd", "9", "--http", http, "--socks", socks,
                      "--filter-fd", "7", "--"};
    int n = 10;
    for (int i = 0; i < nextra && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    int map[6] = {devnull, devnull, errfd, -1, -1, filt};
    pid_t pid = spawn(argv, map);
    close(filt);
    close(errfd);
    close(devnull);
    int rc = wait_exit(pid, 20000);
    *err_out = file_text(errpath);
    return rc;
}

static void test_statuses(void)
{
    int hp = free_port(), sp = free_port();
    char *err;
    char *killed[] = {"/bin/sh", "-c", "kill -TERM $$"};
    int rc = run_simple(killed, 3, NULL, 0, &err, hp, sp);
    ok(rc == 128 + SIGTERM, "a command killed by SIGTERM: the relay exits 143 (got %d)", rc);
    free(err);

    char *missing[] = {"a3s-no-such-command-here"};
    rc = run_simple(missing, 1, NULL, 0, &err, hp, sp);
    ok(rc == 127 && strstr(err, "command not found"), "a missing command: 127 (got %d)", rc);
    free(err);

    /* SIGPIPE is ignored in the relay, but the command gets the default back. */
    static char check_sigpipe[] = "m=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status);"
                                  " [ $(( 0x$m & 0x1000 )) -eq 0 ] && exit 0 || exit 3";
    char *sigign[] = {"/bin/sh", "-c", check_sigpipe};
    rc = run_simple(sigign, 3, NULL, 0, &err, hp, sp);
    ok(rc == 0, "the command does not inherit an ignored SIGPIPE (got %d)", rc);
    free(err);
}

static void test_setup_errors(void)
{
    int hp = free_port(), sp = free_port();
    char marker[256], touch[300];
    snprintf(marker, sizeof marker, "%s/ran", dir);
    snprintf(touch, sizeof touch, "touch %s", marker);
    char *cmd[] = {"/bin/sh", "-c", touch};
    char *err;

    /* A filter the kernel refuses: the command must not run without it. */
    static const unsigned char bad_insn[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0};
    int rc = run_simple(cmd, 3, (const char *)bad_insn, sizeof bad_insn, &err, hp, sp);
    ok(rc == 125 && access(marker, F_OK) != 0 && strstr(err, "seccomp filter"),
       "a filter the kernel refuses: 125, the command never runs (got %d)", rc);
    free(err);

    static const char partial[5] = {0};
    rc = run_simple(cmd, 3, partial, sizeof partial, &err, hp, sp);
    ok(rc == 125 && access(marker, F_OK) != 0 && strstr(err, "a3s-sandbox-relay: "),
       "a filter of 5 bytes: 125, the command never runs (got %d)", rc);
    free(err);

    /* A taken port: setup error before the command. */
    int busy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)hp),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool listening = busy >= 0 && bind(busy, (struct sockaddr *)&sa, sizeof sa) == 0 &&
                     listen(busy, 1) == 0;
    rc = run_simple(cmd, 3, NULL, 0, &err, hp, sp);
    ok(listening && rc == 125 && access(marker, F_OK) != 0 && strstr(err, "cannot listen on"),
       "a port in use: 125 with a message, the command never runs (got %d)", rc);
    free(err);
    if (busy >= 0)
        close(busy);

    /* The relay works with the same arguments once the port is free (the check above
     * was not failing for some other reason). */
    rc = run_simple(cmd, 3, NULL, 0, &err, hp, sp);
    ok(rc == 0 && access(marker, F_OK) == 0, "same arguments, port free: the command runs");
    free(err);
    unlink(marker);

    /* Argument errors. */
    struct {
        char *argv[12];
        const char *msg;
    } bad[] = {
        {{relay_bin, "--http", "127.0.0.1:1", "--filter-fd", "7", "--", "true", NULL},
         "missing --channel-fd"},
        {{relay_bin, "--channel-fd", "9", "--", "true", NULL}, "missing --filter-fd"},
        {{relay_bin, "--channel-fd", "9", "--filter-fd", "7", "--", NULL}, "missing the command"},
        {{relay_bin, "--channel-fd", "9", "--http", "0.0.0.0:8080", "--filter-fd", "7", "--",
          "true", NULL},
         "--http 0.0.0.0:8080"},
        {{relay_bin, "--channel-fd", "9", "--socks", "127.0.0.1:70000", "--filter-fd", "7",
          "--", "true", NULL},
         "--socks 127.0.0.1:70000"},
        {{relay_bin, "--channel-fd", "9", "--filter-fd", "3", "--", "true", NULL},
         "--filter-fd 3"},
        {{relay_bin, "--channel-fd", "9", "--filter-fd", "50", "--", "true", NULL},
         "cannot read the command filter"},
        {{relay_bin, "--channel-fd", "7", "--filter-fd", "50", "--", "true", NULL},
         "--channel-fd 7: not a usable Unix socket"},
        {{relay_bin, "--bogus", "--", "true", NULL}, "unknown argument"},
    };
    char errpath[256];
    snprintf(errpath, sizeof errpath, "%s/stderr-args", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int map[6] = {-1, -1, errfd, -1, -1, -1};
        pid_t pid = spawn(bad[i].argv, map);
        close(errfd);
        rc = wait_exit(pid, 10000);
        char *e = file_text(errpath);
        bool good = rc == 125 && strncmp(e, "a3s-sandbox-relay: ", 19) == 0 &&
                    strstr(e, bad[i].msg) != NULL;
        ok(good, "argument error '%s': 125 with a message (got %d)", bad[i].msg, rc);
        if (!good)
            printf("#   stderr: %s\n", e);
        free(e);
    }

    char outpath[256];
    snprintf(outpath, sizeof outpath, "%s/stdout-help", dir);
    int outfd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    char *help[] = {relay_bin, "--help", NULL};
    int map[6] = {-1, outfd, -1, -1, -1, -1};
    pid_t pid = spawn(help, map);
    close(outfd);
    rc = wait_exit(pid, 10000);
    char *o = file_text(outpath);
    ok(rc == 0 && strstr(o, "usage: a3s-sandbox-relay --channel-fd C"), "--help: usage, exit 0");
    free(o);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *bd = getenv("A3S_BUILD_DIR");
    if (!bd || !*bd) {
        ok(0, "A3S_BUILD_DIR is set (the relay binary lives there)");
        return tap_done();
    }
    snprintf(relay_bin, sizeof relay_bin, "%s/a3s-sandbox-relay", bd);
    if (access(relay_bin, X_OK) != 0) {
        ok(0, "the relay binary exists: %s", relay_bin);
        return tap_done();
    }
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    echo_server es;
    if (echo_start(&es) < 0) {
        ok(0, "the echo server starts");
        return tap_done();
    }
    test_main_run(&es);
    test_statuses();
    test_setup_errors();
    echo_stop(&es);

    char p[256];
    const char *names[] = {"stderr", "stderr-simple", "stderr-args", "stdout-help"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return tap_done();
}
