/* The platforms at run time (bindings/compose.h): the backends this build knows, a
 * named backend that cannot run here (macos-seatbelt on Linux) refusing every run with
 * its reason and never replaced by a weaker one, process-host only with the opt-in, and
 * a platform without a backend (windows) refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "a3s_sandbox.h"
#include "compose.h"
#include "tap.h"

static char ws[64];

static void test_known(void)
{
    const char *const *k = a3s_compose_backends();
    size_t n = 0;
    while (k[n])
        n++;
    ok(n == 3 && !strcmp(k[0], "linux-bwrap") && !strcmp(k[1], "macos-seatbelt") &&
           !strcmp(k[2], "process-host"),
       "Linux knows linux-bwrap (its own, first), macos-seatbelt and process-host");
}

/* A run through the named backend: refused, and why. */
static void test_macos_here(bool opt_in)
{
    a3s_options o = {.workspace = ws, .defer_policy = true, .allow_process_host = opt_in};
    a3s_error e = {0};
    a3s_sandbox *sb = a3s_compose_new(&o, "macos-seatbelt", &e);
    ok(sb != NULL, "macos-seatbelt is made on Linux%s (%s)", opt_in ? " (opt-in given)" : "",
       e.msg);
    if (!sb)
        return;
    ok(!strcmp(a3s_sandbox_backend(sb), "macos-seatbelt") && !a3s_sandbox_fallback_reason(sb),
       "it stays macos-seatbelt: no fallback%s", opt_in ? ", even with the opt-in" : "");
    static const char *const argv[] = {"true", NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = argv;
    a3s_result r;
    int rc = a3s_sandbox_exec(sb, &req, &r, &e);
    ok(rc == A3S_ERR_SETUP && strstr(e.msg, "macOS only"),
       "a run is refused: macOS only (%s)", e.msg);
    if (rc == A3S_OK)
        a3s_result_free(&r);
    char *caps = a3s_sandbox_capabilities_json(sb, &e);
    ok(caps && strstr(caps, "\"boundary_usable\":false") && strstr(caps, "macOS only") &&
           strstr(caps, "\"seccomp_filter\":false") && strstr(caps, "\"pid_namespace\":false"),
       "capabilities: not usable here, why, and nothing it never provides");
    free(caps);
    char *plan = a3s_sandbox_plan_json(sb, &e);
    ok(plan && strstr(plan, "\"sbpl_profile\"") && strstr(plan, "(version 1)") &&
           strstr(plan, "(deny default)"),
       "the plan carries the profile");
    free(plan);
    a3s_sandbox_free(sb);
}

static void test_refused(const char *name, bool opt_in, const char *why)
{
    a3s_options o = {.workspace = ws, .defer_policy = true, .allow_process_host = opt_in};
    a3s_error e = {0};
    a3s_sandbox *sb = a3s_compose_new(&o, name, &e);
    ok(!sb && e.code == A3S_ERR_INVALID && strstr(e.msg, why), "%s%s: refused, '%s' (%s)", name,
       opt_in ? " (opt-in)" : "", why, e.msg);
    a3s_sandbox_free(sb);
}

int main(void)
{
    snprintf(ws, sizeof ws, "/tmp/a3s-platforms-XXXXXX");
    if (!mkdtemp(ws)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    test_known();
    test_macos_here(false);
    test_macos_here(true);
    test_refused("windows", true, "unsupported platform");
    test_refused("windows", false, "linux-bwrap, macos-seatbelt, process-host");
    test_refused("process-host", false, "--allow-process-host");
    test_refused("", false, "unknown backend");
    if (rmdir(ws) < 0)
        printf("# could not remove %s\n", ws);
    return tap_done();
}
