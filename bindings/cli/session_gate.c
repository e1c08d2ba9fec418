/* The order of a session's commands when a client goes away (session_gate.h). */
#include "session_gate.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* worker: 0 free, -pid while being filled in, pid once client and start are set. */
typedef struct gate_slot {
    pid_t worker;
    pid_t client;
    unsigned long long start;
} gate_slot;

struct cli_gate {
    size_t n;
    gate_slot slot[];
};

/* This process's slot once registered (a worker has one command). */
static size_t gate_mine = (size_t)-1;

cli_gate *cli_gate_new(size_t n)
{
    size_t size = sizeof(cli_gate) + n * sizeof(gate_slot);
    cli_gate *g = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED)
        return NULL;
    g->n = n;
    return g;
}

/* A process's start time (clock ticks since boot, /proc/PID/stat field 22): with its pid,
 * it names the process even after the pid is taken again. 0 when it is gone, or has
 * ended and is only waiting to be reaped. */
static unsigned long long start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (r <= 0)
        return 0;
    buf[r] = '\0';
    /* After the command name, which may hold anything: from the last ')'. */
    char *p = strrchr(buf, ')');
    unsigned long long t = 0;
    char state = 0;
    if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                            "%*d %*d %*d %llu", &state, &t) != 2)
        return 0;
    return state == 'Z' || state == 'X' ? 0 : t;
}

/* Is the client of a registered command gone (or not that process any more)? A client
 * whose pid this pid namespace cannot name (0) is never taken for gone. */
static bool client_gone(pid_t client, unsigned long long start)
{
    return client > 0 && start_time(client) != start;
}

int cli_gate_enter(cli_gate *g, int conn)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    pid_t self = getpid();
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0)
        return -1;
    unsigned long long start = cr.pid > 0 ? start_time(cr.pid) : 0;
    if (cr.pid > 0 && start == 0)
        return -1; /* its client is gone already: nothing to run */
    for (;;) {
        bool wait = false;
        for (size_t i = 0; i < g->n; i++) {
            gate_slot *s = &g->slot[i];
            pid_t w = __atomic_load_n(&s->worker, __ATOMIC_ACQUIRE);
            if (w <= 0 || w == self || !client_gone(s->client, s->start))
                continue;
            /* A worker that died registered (before its supervisor forgot it). */
            if (kill(w, 0) < 0 && errno == ESRCH) {
                (void)__atomic_compare_exchange_n(&s->worker, &w, 0, false, __ATOMIC_ACQ_REL,
                                                  __ATOMIC_ACQUIRE);
                continue;
            }
            wait = true;
        }
        if (!wait)
            break;
        struct timespec ts = {0, 2 * 1000 * 1000};
        (void)nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < g->n; i++) {
        gate_slot *s = &g->slot[i];
        pid_t free_slot = 0;
        if (!__atomic_compare_exchange_n(&s->worker, &free_slot, -self, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        s->client = cr.pid;
        s->start = start;
        __atomic_store_n(&s->worker, self, __ATOMIC_RELEASE);
        gate_mine = i;
        return 0;
    }
    errno = EAGAIN;
    return -1;
}

void cli_gate_leave(cli_gate *g)
{
    if (gate_mine < g->n)
        __atomic_store_n(&g->slot[gate_mine].worker, 0, __ATOMIC_RELEASE);
    gate_mine = (size_t)-1;
}

void cli_gate_forget(cli_gate *g, pid_t worker)
{
    for (size_t i = 0; i < g->n; i++) {
        pid_t w = worker, neg = -worker;
        if (!__atomic_compare_exchange_n(&g->slot[i].worker, &w, 0, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            (void)__atomic_compare_exchange_n(&g->slot[i].worker, &neg, 0, false,
                                              __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
}
