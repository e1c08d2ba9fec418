/* The root caller's user namespaces (backends/linux/rootid.c), made by threads of one host
 * at once. Each is made by a forked child that never execs and waits for its pipe to
 * close: a copy of another thread's pipe end in it made two such children wait on each
 * other for good. A watchdog turns a hang into a failure. TAP output; needs root (skips
 * 77 otherwise, or where user namespaces are unavailable). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rootid.h"
#include "tap.h"

#define THREADS 4
#define ROUNDS 150

static atomic_int made, failed;

static void *make_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        a3s_rootid r = A3S_ROOTID_INIT;
        a3s_error err = {0};
        if (a3s_rootid_open(&r, 2139095040u, &err) == 0)
            atomic_fetch_add(&made, 1);
        else
            atomic_fetch_add(&failed, 1);
        a3s_rootid_close(&r);
    }
    return NULL;
}

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "not ok 1 - the threads finished (the watchdog fired: a hang)\n1..1\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(1);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (the mapped id's namespaces)\n");
        return 77;
    }
    a3s_rootid probe = A3S_ROOTID_INIT;
    a3s_error err = {0};
    if (a3s_rootid_open(&probe, 2139095040u, &err) < 0) {
        printf("1..0 # SKIP user namespaces unavailable: %s\n", err.msg);
        return getenv("A3S_MUST_WORK") && !strcmp(getenv("A3S_MUST_WORK"), "1") ? 1 : 77;
    }
    a3s_rootid_close(&probe);
    signal(SIGALRM, watchdog);
    alarm(90); /* the work takes a few seconds; a hang never ends */
    pthread_t th[THREADS];
    int n = 0;
    for (; n < THREADS; n++)
        if (pthread_create(&th[n], NULL, make_many, NULL) != 0)
            break;
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    alarm(0);
    ok(n == THREADS, "%d threads made user namespaces at once", n);
    ok(atomic_load(&made) == n * ROUNDS && atomic_load(&failed) == 0,
       "every one was made (%d made, %d failed)", atomic_load(&made), atomic_load(&failed));
    return tap_done();
}
