/* Unit tests of a live mediator's limits (relay/mediator*.c, spec/unit/mediator_fixture.h):
 * the idle timeout, the connection cap, a stop with connections in flight, and a flood of
 * refusals against the bounded denial records. Loopback only. */
#include <sys/stat.h>

#include "mediator_fixture.h"

static char root[64];
/* One with a long idle timeout for the connection-cap test. */
static mediator cap_med = {.pid = -1, .stop_w = -1};

/* ---------------------------------------------------------------- live: timeouts, cap */

static void test_live_idle(void)
{
    /* The clock starts before each connection does: never early, late only within the
     * bound (the reference: opening the tunnel). */
    unsigned long long t0 = a3s_now_ms();
    int quiet = med_connect();
    int tunnel = med_connect();
    patient(quiet);
    patient(tunnel);
    char req[128], resp[256];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", up_port);
    send_str(tunnel, req);
    read_head(tunnel, resp, sizeof resp);
    unsigned long long bound = bound_ms(3000, a3s_now_ms() - t0);
    ok(strncmp(resp, "HTTP/1.1 200", 12) == 0, "idle: tunnel open");
    size_t got = read_all(quiet, resp, sizeof resp);
    unsigned long long dq = a3s_now_ms() - t0;
    got += read_all(tunnel, resp, sizeof resp);
    unsigned long long dt = a3s_now_ms() - t0;
    ok(got == 0 && dq >= 2000 && dq < bound, "idle: a silent client is dropped (%llu ms < %llu ms)",
       dq, bound);
    ok(dt >= 2000 && dt < bound, "idle: a silent tunnel is closed (%llu ms < %llu ms)", dt, bound);
    close(quiet);
    close(tunnel);
}

/* 300 connections at once against the default cap (128) on a mediator whose idle timeout
 * is long, so the held ones stay held however slowly it runs (sanitizers). */
static void test_live_cap(void)
{
    enum { N = 300, CAP = 128 };
    cur = &cap_med;
    int fds[N];
    bool answered[N];
    char req[128];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n", up_port); /* no blank line */
    for (int i = 0; i < N; i++) {
        fds[i] = med_connect();
        answered[i] = false;
        if (i % 2)
            send_str(fds[i], req);
    }
    int busy = 0, other = 0;
    for (unsigned long long end = a3s_now_ms() + 8000; busy + other < N - CAP && a3s_now_ms() < end;) {
        for (int i = 0; i < N; i++) {
            struct pollfd p = {fds[i], POLLIN, 0};
            if (answered[i] || poll(&p, 1, 0) != 1)
                continue;
            char resp[256];
            ssize_t n = recv(fds[i], resp, sizeof resp - 1, MSG_DONTWAIT);
            resp[n > 0 ? n : 0] = '\0';
            answered[i] = true;
            if (strncmp(resp, "HTTP/1.1 503 ", 13) == 0)
                busy++;
            else
                other++;
        }
        sleep_ms(20);
    }
    sleep_ms(200); /* nobody else may be answered */
    for (int i = 0; i < N; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        if (!answered[i] && poll(&p, 1, 0) == 1)
            other++;
    }
    ok(busy == N - CAP && other == 0,
       "cap: %d of %d connections refused with 503 at once (cap %d), %d other answers", busy, N,
       CAP, other);
    ok(mediator_alive(), "cap: mediator alive with %d connections open", N);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    bool works = false;
    for (int tries = 0; tries < 50 && !works; tries++) {
        works = connect_and_ping();
        if (!works)
            sleep_ms(100);
    }
    ok(works, "cap: the next allowed CONNECT works once the crowd has gone");

    /* Stop with connections in flight: serve returns at once all the same. */
    int held[5];
    for (int i = 0; i < 5; i++)
        held[i] = med_connect();
    sleep_ms(100);
    unsigned long long t0 = a3s_now_ms();
    close(cap_med.stop_w);
    int st = 0;
    pid_t w = waitpid(cap_med.pid, &st, 0);
    unsigned long long dt = a3s_now_ms() - t0;
    /* A serve that waited for them would return at their 30 s idle timeout. */
    ok(w == cap_med.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 && dt < STOP_BOUND_MS,
       "cap: stop with connections in flight returns 0 promptly (%llu ms < %d ms)", dt,
       STOP_BOUND_MS);
    cap_med.pid = -1;
    for (int i = 0; i < 5; i++)
        close(held[i]);

    json_t *summary = NULL;
    int records = 0, lines = read_denials(cap_med.denials, NULL, &records, &summary);
    json_int_t busy_count = json_integer_value(
        json_object_get(json_object_get(summary, "counts"), "too many connections"));
    /* At least the N - CAP seen above; the retries below and the held connections may add
     * a few while the crowd's threads are still leaving. */
    ok(lines > 0 && records <= 64 && busy_count >= N - CAP && busy_count <= N - CAP + 55,
       "cap: every 'too many connections' refusal counted (%lld for the %d seen), %d records "
       "kept",
       (long long)busy_count, N - CAP, records);
    json_decref(summary);
    cur = &main_med;
}

/* ---------------------------------------------------------------- denial flood */

static mediator flood_med = {.pid = -1, .stop_w = -1};

static bool record_is(json_t *o, const char *proto, const char *target, const char *reason)
{
    const char *p = json_string_value(json_object_get(o, "protocol"));
    const char *t = json_string_value(json_object_get(o, "target"));
    const char *r = json_string_value(json_object_get(o, "reason"));
    return p && t && r && strcmp(p, proto) == 0 && strcmp(t, target) == 0 &&
           strcmp(r, reason) == 0 && json_object_size(o) == 5;
}

/* Thousands of refusals: the file stays bounded, the first and last records are kept
 * verbatim, and the summary counts every refusal exactly, per reason. */
static void test_denial_flood(void)
{
    enum { FLOOD = 3000, KEEP = 32, EDGE = 40 };
    cur = &flood_med;
    int want_not_granted = 0, want_malformed = 0;
    char req[128], resp[256], target[64];
    unsigned char m[300];
    bool all_refused = true;
    for (int i = 0; i < FLOOD; i++) {
        int kind = (i < EDGE || i >= FLOOD - EDGE) ? 2 : i % 3;
        if (kind == 0) {
            expect_quiet_refusal("GARBAGE\r\n\r\n", resp, sizeof resp);
            all_refused = all_refused && strncmp(resp, "HTTP/1.1 400", 12) == 0;
            want_malformed++;
        } else if (kind == 1) {
            size_t n = socks_connect_req(m, 1, "127.0.0.1", 10000 + i);
            all_refused = all_refused && socks_exchange(m, n, NULL) == 2;
            want_not_granted++;
        } else {
            snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", 10000 + i);
            expect_quiet_refusal(req, resp, sizeof resp);
            all_refused = all_refused && strncmp(resp, "HTTP/1.1 403", 12) == 0;
            want_not_granted++;
        }
    }
    ok(all_refused, "flood: %d requests, every one refused (403/400/SOCKS 02)", FLOOD);
    struct stat st;
    ok(stat(flood_med.denials, &st) == 0 && st.st_size < 32 * 512,
       "flood: while serving, the record file holds only the first records (%lld bytes)",
       (long long)st.st_size);
    ok(mediator_alive(), "flood: mediator alive");

    close(flood_med.stop_w);
    int wst = 0;
    ok(waitpid(flood_med.pid, &wst, 0) == flood_med.pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
       "flood: stopped");
    flood_med.pid = -1;
    ok(stat(flood_med.denials, &st) == 0 && st.st_size < 64 * 1024,
       "flood: the record file is bounded (%lld bytes for %d refusals)", (long long)st.st_size,
       FLOOD);
    json_t *arr = json_array();
    json_t *summary = NULL;
    int records = 0, lines = read_denials(flood_med.denials, arr, &records, &summary);
    ok(lines == 2 * KEEP + 1 && records == 2 * KEEP && summary,
       "flood: %d lines: the first %d, the last %d, one summary", lines, KEEP, KEEP);
    bool first = true, last = true;
    for (int i = 0; i < KEEP && records == 2 * KEEP; i++) {
        snprintf(target, sizeof target, "127.0.0.1:%d", 10000 + i);
        first = first &&
                record_is(json_array_get(arr, (size_t)i), "http-connect", target, "not granted");
        snprintf(target, sizeof target, "127.0.0.1:%d", 10000 + FLOOD - KEEP + i);
        last = last && record_is(json_array_get(arr, (size_t)(KEEP + i)), "http-connect", target,
                                 "not granted");
    }
    ok(records == 2 * KEEP && first, "flood: the first %d records verbatim, in order", KEEP);
    ok(records == 2 * KEEP && last, "flood: the last %d records verbatim, in order", KEEP);
    json_t *counts = json_object_get(summary, "counts");
    const char *kind = json_string_value(json_object_get(summary, "kind"));
    ok(kind && strcmp(kind, "network") == 0 &&
           json_integer_value(json_object_get(summary, "total")) == FLOOD &&
           json_integer_value(json_object_get(summary, "dropped")) == FLOOD - 2 * KEEP &&
           json_integer_value(json_object_get(summary, "kept_first")) == KEEP &&
           json_integer_value(json_object_get(summary, "kept_last")) == KEEP,
       "flood: summary: total %d, %d kept first, %d kept last, %d dropped", FLOOD, KEEP, KEEP,
       FLOOD - 2 * KEEP);
    ok(json_object_size(counts) == 2 &&
           json_integer_value(json_object_get(counts, "not granted")) == want_not_granted &&
           json_integer_value(json_object_get(counts, "malformed request")) == want_malformed,
       "flood: exact counts per reason (not granted %d, malformed request %d)", want_not_granted,
       want_malformed);
    json_decref(summary);
    json_decref(arr);
    cur = &main_med;
}

/* ---------------------------------------------------------------- main */

static void cleanup(void)
{
    mediator *all[3] = {&main_med, &cap_med, &flood_med};
    for (int i = 0; i < 3; i++) {
        if (all[i]->pid > 0) {
            kill(all[i]->pid, SIGKILL);
            waitpid(all[i]->pid, NULL, 0);
        }
        if (all[i]->sock[0])
            unlink(all[i]->sock);
        if (all[i]->denials[0])
            unlink(all[i]->denials);
    }
    rmdir(root);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(root, sizeof root, "/tmp/a3s-mediator-test-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(main_med.sock, sizeof main_med.sock, "%s/m.sock", root);
    snprintf(main_med.denials, sizeof main_med.denials, "%s/denials.jsonl", root);
    snprintf(cap_med.sock, sizeof cap_med.sock, "%s/cap.sock", root);
    snprintf(cap_med.denials, sizeof cap_med.denials, "%s/cap.jsonl", root);
    snprintf(flood_med.sock, sizeof flood_med.sock, "%s/flood.sock", root);
    snprintf(flood_med.denials, sizeof flood_med.denials, "%s/flood.jsonl", root);
    atexit(cleanup);

    /* The answering upstream: the one grant of these mediators. */
    up_listen = tcp_socket_on_loopback(&up_port, 64);
    char g0[32];
    snprintf(g0, sizeof g0, "127.0.0.1:%d", up_port);
    const char *grants[] = {g0};
    a3s_mediator_opts o = {.connect_timeout_ms = 1000,
                           .idle_timeout_ms = 3000,
                           .max_connections = 128,
                           .denial_records = 1024};
    start_mediator(&main_med, grants, 1, &o);
    const char *nothing_real[] = {"127.0.0.9:1"};
    a3s_mediator_opts fo = {.connect_timeout_ms = 1000, .idle_timeout_ms = 3000};
    start_mediator(&flood_med, nothing_real, 1, &fo);
    a3s_mediator_opts co = {.connect_timeout_ms = 1000, .idle_timeout_ms = 30000,
                            .max_connections = 0 /* the default, 128 */};
    start_mediator(&cap_med, grants, 1, &co);
    pthread_t up;
    if (pthread_create(&up, NULL, up_main, NULL) != 0) {
        fprintf(stderr, "upstream thread\n");
        return 2;
    }
    sleep_ms(100);

    test_live_idle();
    test_live_cap();
    test_denial_flood();
    return tap_done();
}
