/* Tests of the built a3s-sandbox-mediator program on its own (relay/protocol.h, "The
 * helper program"), started here with its descriptors at the fixed numbers as the
 * library does: strict arguments and descriptors (exit 2 and a reason on the ready pipe,
 * nothing served), a parent that is not the one named (exit 3, silent), "R" once it
 * serves, a connection handed over on the channel decided (403 for an origin not granted,
 * its record and the summary in the denials file), the stop (exit 0), descriptors leaked
 * by the spawner closed, SIGPIPE ignored, and death with its parent (SIGKILL). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mediator.h"
#include "protocol.h"
#include "tap.h"

static char bin[4096];
static char self_pid[24];

typedef struct med {
    pid_t pid;
    int chan;    /* our end of the channel: we play the relay */
    int stop_w;  /* closing it stops the mediator */
    int denials; /* the memfd it writes to */
    int ready_r;
} med;

enum { USE_OURS = -1, LEAVE_CLOSED = -2 };

static unsigned long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000ULL + (unsigned long long)ts.tv_nsec / 1000000ULL;
}

/* Start the program with argv, fds 3..6 as the library passes them, except where
 * swap[i] names another fd (or LEAVE_CLOSED); leak (>= 0) is left inheritable on fd 9. */
static int med_start(med *m, char **argv, const int swap[4], int leak)
{
    int chan[2], stop[2], ready[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0 ||
        pipe2(stop, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0 ||
        (m->denials = memfd_create("test-denials", MFD_CLOEXEC)) < 0)
        return -1;
    int src[4] = {chan[1], stop[0], m->denials, ready[1]};
    m->pid = fork();
    if (m->pid < 0)
        return -1;
    if (m->pid == 0) {
        int high[4], lk = leak >= 0 ? fcntl(leak, F_DUPFD, 100) : -1;
        for (int i = 0; i < 4; i++) {
            int s = swap && swap[i] != USE_OURS ? swap[i] : src[i];
            high[i] = s >= 0 ? fcntl(s, F_DUPFD_CLOEXEC, 100) : -1;
        }
        for (int i = 0; i < 4; i++) {
            if (high[i] >= 0 ? dup2(high[i], 3 + i) < 0 : close(3 + i) < 0 && errno != EBADF)
                _exit(99);
        }
        if (lk >= 0 && dup2(lk, 9) < 0)
            _exit(99);
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 2) < 0)
            _exit(99);
        execv(bin, argv);
        _exit(98);
    }
    close(chan[1]);
    close(stop[0]);
    close(ready[1]);
    m->chan = chan[0];
    m->stop_w = stop[1];
    m->ready_r = ready[0];
    return 0;
}

/* What it said on the ready pipe ("R", "E...", or "" for EOF without a word). */
static void med_word(med *m, char *out, size_t cap)
{
    size_t len = 0;
    unsigned long long end = now_ms() + 5000;
    while (len + 1 < cap && now_ms() < end) {
        struct pollfd p = {m->ready_r, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(m->ready_r, out + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (out[0] == 'R')
            break;
    }
    out[len] = '\0';
    out[strcspn(out, "\n")] = '\0'; /* one line is all it says */
}

/* Its wait status within ms (killed and reaped after that: -1). */
static int med_wait(pid_t pid, int ms)
{
    unsigned long long end = now_ms() + (unsigned long long)ms;
    int st;
    while (now_ms() < end) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return st;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void med_close(med *m)
{
    int fds[] = {m->chan, m->stop_w, m->denials, m->ready_r};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Run argv to its end: its exit code (-1: it did not exit), what it said in word. */
static int run_once(char **argv, const int swap[4], char *word, size_t cap)
{
    med m;
    if (med_start(&m, argv, swap, -1) < 0)
        return -1;
    med_word(&m, word, cap);
    close(m.stop_w);
    m.stop_w = -1;
    int st = med_wait(m.pid, 5000);
    med_close(&m);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_arguments(void)
{
    char *bad[][10] = {
        {bin, NULL},
        {bin, "--parent-pid", NULL},
        {bin, "--parent-pid", "0", NULL},
        {bin, "--parent-pid", "+1", NULL},
        {bin, "--parent-pid", "099", NULL},
        {bin, "--grant", "example.com", "443", "--parent-pid", self_pid, NULL},
        {bin, "--parent-pid", self_pid, "--grant", "example.com", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "example.com", "443", "--x", NULL},
        {bin, "--parent-pid", self_pid, "--grants", "example.com", "443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "Example.com", "443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "example.com:443", "0", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "[::1]", "443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "::0:1", "443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "*.example.com", "443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "a b", "443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "", "443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "0.0.0.0", "443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "example.com", "65536", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "example.com", "0443", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "example.com", "-1", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "example.com", "", NULL},
        {bin, "--parent-pid", self_pid, "--grant", "example.com", "443 ", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char word[600], shown[300] = "";
        for (char **a = bad[i] + 1; *a; a++)
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), " '%s'", *a);
        int rc = run_once(bad[i], NULL, word, sizeof word);
        ok(rc == A3S_MEDIATOR_EXIT_USAGE && word[0] == 'E',
           "arguments%s: refused (exit %d, said '%.80s')", shown, rc, word);
    }

    /* At most A3S_MAX_GRANTS grants. */
    char **many = calloc(3 + 3 * (A3S_MAX_GRANTS + 1) + 1, sizeof *many);
    char(*names)[32] = calloc(A3S_MAX_GRANTS + 1, sizeof *names);
    if (!many || !names) {
        ok(0, "memory");
        return;
    }
    for (int limit = A3S_MAX_GRANTS; limit <= A3S_MAX_GRANTS + 1; limit++) {
        size_t k = 0;
        many[k++] = bin;
        many[k++] = "--parent-pid";
        many[k++] = self_pid;
        for (int i = 0; i < limit; i++) {
            snprintf(names[i], sizeof names[i], "h%d.example", i);
            many[k++] = "--grant";
            many[k++] = names[i];
            many[k++] = "1";
        }
        many[k] = NULL;
        char word[600];
        int rc = run_once(many, NULL, word, sizeof word);
        if (limit == A3S_MAX_GRANTS)
            ok(rc == 0 && word[0] == 'R', "%d grants: served, then stopped (exit %d)", limit, rc);
        else
            ok(rc == A3S_MEDIATOR_EXIT_USAGE, "%d grants: refused (exit %d)", limit, rc);
    }
    free(many);
    free(names);

    /* Accepted forms: an IPv6 literal as normalized (no brackets), any port (0). */
    char *good[] = {bin,           "--parent-pid", self_pid,  "--grant",   "::1",  "0", "--grant",
                    "example.com", "65535",        "--grant", "127.0.0.1", "8080", NULL};
    char word[600];
    int rc = run_once(good, NULL, word, sizeof word);
    ok(rc == 0 && strcmp(word, "R") == 0,
       "normalized grants: 'R', then exit 0 at the stop "
       "(exit %d, said '%.80s')",
       rc, word);
}

static void test_descriptors(void)
{
    int stream[2], sock[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stream) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) < 0) {
        ok(0, "socketpair");
        return;
    }
    int ro = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    struct {
        int swap[4];
        const char *what;
    } bad[] = {
        {{stream[0], USE_OURS, USE_OURS, USE_OURS}, "a stream socket as the channel"},
        {{LEAVE_CLOSED, USE_OURS, USE_OURS, USE_OURS}, "no channel"},
        {{USE_OURS, sock[0], USE_OURS, USE_OURS}, "a socket as the stop pipe"},
        {{USE_OURS, LEAVE_CLOSED, USE_OURS, USE_OURS}, "no stop pipe"},
        {{USE_OURS, USE_OURS, ro, USE_OURS}, "a read-only file for the denials"},
        {{USE_OURS, USE_OURS, LEAVE_CLOSED, USE_OURS}, "no denials file"},
        {{USE_OURS, USE_OURS, USE_OURS, LEAVE_CLOSED}, "no ready pipe"},
    };
    char *argv[] = {bin, "--parent-pid", self_pid, NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char word[600];
        int rc = run_once(argv, bad[i].swap, word, sizeof word);
        ok(rc == A3S_MEDIATOR_EXIT_USAGE && word[0] != 'R', "%s: refused (exit %d)", bad[i].what,
           rc);
    }
    close(stream[0]);
    close(stream[1]);
    close(sock[0]);
    close(sock[1]);
    if (ro >= 0)
        close(ro);

    /* Another process's pid: a parent gone before the death signal was armed. */
    char other[24];
    snprintf(other, sizeof other, "%d", (int)getppid());
    char *orphan[] = {bin, "--parent-pid", other, NULL};
    char word[600];
    int rc = run_once(orphan, NULL, word, sizeof word);
    ok(rc == A3S_MEDIATOR_EXIT_ORPHAN && word[0] == '\0',
       "a parent other than the one named: exit %d at once, nothing served (exit %d)",
       A3S_MEDIATOR_EXIT_ORPHAN, rc);
}

/* Hand a fresh loopback TCP connection to the mediator as the relay does; returns our
 * (client) end. */
static int hand_over(int chan)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&sa, &sl) < 0 ||
        connect(c, (struct sockaddr *)&sa, sizeof sa) < 0)
        return -1;
    int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    close(l);
    if (s < 0)
        return -1;
    char kind = 'H';
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

static void test_serving(void)
{
    int leak[2];
    if (pipe2(leak, O_CLOEXEC) < 0) {
        ok(0, "pipe2");
        return;
    }
    char *argv[] = {bin, "--parent-pid", self_pid, "--grant", "granted.example", "443", NULL};
    med m;
    if (med_start(&m, argv, NULL, leak[1]) < 0) {
        ok(0, "the mediator starts");
        return;
    }
    close(leak[1]);
    char word[600];
    med_word(&m, word, sizeof word);
    ok_streq(word, "R", "it says 'R' once it serves");

    /* The leaked write end (fd 9 in it) was closed at its start: we read EOF. */
    struct pollfd p = {leak[0], POLLIN, 0};
    char c;
    ok(poll(&p, 1, 2000) == 1 && read(leak[0], &c, 1) == 0,
       "a descriptor the spawner leaked is closed in it");
    close(leak[0]);

    char path[64], line[256];
    unsigned long long ign = 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)m.pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "SigIgn: %llx", &ign) == 1)
            break;
    if (f)
        fclose(f);
    ok(ign == 1ULL << (SIGPIPE - 1), "SIGPIPE is ignored, nothing else (SigIgn %llx)", ign);

    int cl = hand_over(m.chan);
    ok(cl >= 0, "a connection is handed over on the channel");
    static const char req[] = "CONNECT other.example:443 HTTP/1.1\r\nHost: x\r\n\r\n";
    char got[64] = "";
    if (cl >= 0) {
        (void)!write(cl, req, sizeof req - 1);
        struct timeval tv = {5, 0};
        setsockopt(cl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ssize_t n = read(cl, got, sizeof got - 1);
        got[n > 0 ? n : 0] = '\0';
        close(cl);
    }
    ok(strncmp(got, "HTTP/1.1 403", 12) == 0, "an origin not granted: 403 (got '%.20s')", got);

    close(m.stop_w);
    m.stop_w = -1;
    unsigned long long t0 = now_ms();
    int st = med_wait(m.pid, 3000);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == A3S_MEDIATOR_EXIT_STOPPED,
       "closing the stop pipe: exit 0 (in %llu ms)", now_ms() - t0);
    char den[4096];
    ssize_t n = pread(m.denials, den, sizeof den - 1, 0);
    den[n > 0 ? n : 0] = '\0';
    ok(strstr(den, "\"target\":\"other.example:443\"") && strstr(den, "\"not granted\""),
       "its record is in the denials file");
    ok(strstr(den, "\"summary\":true") != NULL, "and the summary, written at the stop");
    med_close(&m);
}

/* It dies with its parent: an intermediate process starts it and is killed. */
static void test_parent_death(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        ok(0, "PR_SET_CHILD_SUBREAPER");
        return;
    }
    /* Its stop pipe is held open here too: the intermediate's death (which closes its
     * fds before the death signal goes out) must not look like a stop. */
    int tell[2], hold[2];
    if (pipe2(tell, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0) {
        ok(0, "pipe2");
        return;
    }
    pid_t mid = fork();
    if (mid == 0) {
        char pp[24];
        snprintf(pp, sizeof pp, "%d", (int)getpid());
        char *argv[] = {bin, "--parent-pid", pp, NULL};
        const int swap[4] = {USE_OURS, hold[0], USE_OURS, USE_OURS};
        med m;
        if (med_start(&m, argv, swap, -1) < 0)
            _exit(1);
        char word[16];
        med_word(&m, word, sizeof word);
        pid_t pid = word[0] == 'R' ? m.pid : -1;
        (void)!write(tell[1], &pid, sizeof pid);
        for (;;)
            pause();
    }
    close(tell[1]);
    pid_t pid = -1;
    ok(read(tell[0], &pid, sizeof pid) == sizeof pid && pid > 0,
       "started by an intermediate process, it serves");
    close(tell[0]);
    kill(mid, SIGKILL);
    waitpid(mid, NULL, 0);
    int st = pid > 0 ? med_wait(pid, 3000) : -1;
    ok(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
       "that process killed: it dies at once of SIGKILL (status %d)", st);
    close(hold[0]);
    close(hold[1]);
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
    snprintf(self_pid, sizeof self_pid, "%d", (int)getpid());
    test_arguments();
    test_descriptors();
    test_serving();
    test_parent_death();
    return tap_done();
}
