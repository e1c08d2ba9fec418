/* `a3s-sandbox plan --explain`: the frozen plan as readable text, every rule with the
 * policy file:line that produced it. Rendered from the plan JSON, so the text can never
 * say something the JSON (and therefore the enforcement) does not. */
#include "explain.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

/* {"base64": ...} (engine/json.h) as a jansson string of the exact bytes, so the text
 * below shows a path that is not UTF-8 as it is (jansson's _nocheck strings hold any
 * bytes; this tree is only read, never dumped). 1: *out is the string; 0: x is not such
 * an object (left as it is); -1: ENOMEM. */
static int unwrap_one(json_t *x, json_t **out)
{
    if (!json_is_object(x) || json_object_size(x) != 1 || !json_object_get(x, "base64"))
        return 0;
    size_t n = 0;
    char *b = a3s_json_bytes(x, &n);
    if (!b)
        return errno == ENOMEM ? -1 : 0;
    *out = json_stringn_nocheck(b, n);
    free(b);
    return *out ? 1 : -1;
}

/* Replace every base64 object in the tree; -1 on ENOMEM. */
static int unwrap_all(json_t *v)
{
    json_t *s = NULL;
    int rc = 0;
    if (json_is_object(v)) {
        for (void *it = json_object_iter(v); rc == 0 && it; it = json_object_iter_next(v, it)) {
            json_t *x = json_object_iter_value(it);
            int u = unwrap_one(x, &s);
            rc = u < 0 ? -1 : u ? json_object_iter_set_new(v, it, s) : unwrap_all(x);
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; rc == 0 && i < json_array_size(v); i++) {
            json_t *x = json_array_get(v, i);
            int u = unwrap_one(x, &s);
            rc = u < 0 ? -1 : u ? json_array_set_new(v, i, s) : unwrap_all(x);
        }
    }
    return rc < 0 ? -1 : 0;
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* Provenance as written in the plan, shortened for reading to its last two path
 * components ("policies/baseline.lua:72"); the JSON keeps the full path. */
static const char *short_path(const char *f)
{
    const char *end = strrchr(f, '/');
    if (!end)
        return f;
    const char *p = end;
    while (p > f && p[-1] != '/')
        p--;
    return p > f ? p : f;
}

static const char *from(json_t *o, const char *unused)
{
    (void)unused;
    return short_path(str(o, "from"));
}

static const char *kind_meaning(const char *kind)
{
    if (!strcmp(kind, "hide"))
        return "hidden: empty and read-only";
    if (!strcmp(kind, "tmpfs"))
        return "private writable tmpfs";
    if (!strcmp(kind, "read_only"))
        return "read-only";
    if (!strcmp(kind, "writable"))
        return "writable";
    if (!strcmp(kind, "protect"))
        return "protected: read-only";
    if (!strcmp(kind, "mask"))
        return "secret: unreadable and unwritable";
    return kind;
}

/* A list of {name, from} objects, names grouped by provenance. */
static void names(FILE *f, const char *title, json_t *arr, const char *trim)
{
    size_t n = json_array_size(arr);
    if (!n)
        return;
    size_t i = 0;
    while (i < n) {
        const char *pv = from(json_array_get(arr, i), trim);
        fprintf(f, "  %-14s", title);
        size_t col = 0;
        for (; i < n && !strcmp(from(json_array_get(arr, i), trim), pv); i++) {
            const char *nm = str(json_array_get(arr, i), "name");
            if (col && col + strlen(nm) > 60) {
                fprintf(f, "\n  %-14s", "");
                col = 0;
            }
            col += (size_t)fprintf(f, "%s ", nm);
        }
        fprintf(f, "\n  %-14s  ^ %s\n", "", pv);
        title = "";
    }
}

/* An option vector, one option and its values a line. */
static void options(FILE *f, const char *title, json_t *argv)
{
    size_t i;
    json_t *r;
    if (!json_array_size(argv))
        return;
    fprintf(f, "%s ", title);
    json_array_foreach(argv, i, r) {
        const char *a = json_string_value(r);
        bool opt = a && a[0] == '-' && a[1] == '-';
        fprintf(f, "%s%s", opt && i ? "\n  " : " ", a ? a : "");
    }
    fprintf(f, "\n");
}

char *a3s_plan_explain(const char *plan_json)
{
    json_error_t je;
    json_t *p = json_loads(plan_json, 0, &je);
    if (!p || unwrap_all(p) < 0) {
        json_decref(p);
        return NULL;
    }
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    if (!f) {
        json_decref(p);
        return NULL;
    }
    const char *trim = NULL;
    const char *source = str(p, "source");
    json_t *roots = json_object_get(p, "roots");
    size_t i_g;
    json_t *g_r;
    fprintf(f, "Policy %s (%s)\n", str(p, "name"), source);
    fprintf(f, "  digest     %s\n", str(p, "policy_digest"));
    fprintf(f, "  backend    %s\n", str(p, "backend"));
    fprintf(f, "  workspace  %s\n  scratch    %s (created per run, removed afterwards)\n"
               "  home       %s\n  host tmp   %s\n",
            str(roots, "workspace"), str(roots, "scratch"), str(roots, "home"),
            str(roots, "tmp"));

    fprintf(f, "\nNetwork\n  %-52s ^ %s\n",
            !strcmp(str(p, "network"), "none")
                ? "none: private namespace, loopback only"
                : "mediated: private namespace; the relay's proxies reach the host mediator",
            short_path(str(p, "network_from")));

    if (json_is_true(json_object_get(p, "allow_host_root")))
        fprintf(f, "\nIdentity\n  root callers may run the command as HOST ROOT where the "
                   "workspace cannot be idmapped\n");

    json_array_foreach(json_object_get(p, "network_grants"), i_g, g_r)
        fprintf(f, "  grant     %s:%lld%s\n", str(g_r, "host"),
                (long long)json_integer_value(json_object_get(g_r, "port")),
                json_integer_value(json_object_get(g_r, "port")) ? "" : " (port 0: any port)");
    fprintf(f, "\nFilesystem (host root read-only; rules as declared; the mounts actually "
               "applied,\nshallowest first and secrets last, are in the bubblewrap section)\n");
    json_t *fs = json_object_get(p, "fs");
    size_t i;
    json_t *r;
    json_array_foreach(fs, i, r) {
        const char *kind = str(r, "kind");
        bool disc = json_is_true(json_object_get(r, "discovered"));
        bool opt = json_is_true(json_object_get(r, "optional"));
        bool broad = json_is_true(json_object_get(r, "broaden"));
        char what[96];
        snprintf(what, sizeof what, "%s%s%s%s", kind_meaning(kind),
                 broad ? ", BROADENING" : "", disc ? ", discovered" : "",
                 opt && strcmp(kind, "mask") ? ", if present" : "");
        fprintf(f, "  %-9s %-40s %-36s ^ %s\n", kind, str(r, "path"), what,
                *str(r, "from") ? from(r, trim) : (disc ? "<scan>" : "<engine>"));
    }
    json_t *pins = json_object_get(p, "pins");
    if (json_array_size(pins)) {
        fprintf(f, "  pinned    ");
        json_array_foreach(pins, i, r) fprintf(f, "%s ", json_string_value(r));
        fprintf(f, "\n            missing protected names: an empty placeholder is bound "
                   "read-only for the run and removed afterwards\n");
    }

    fprintf(f, "\nWorkspace rules\n");
    names(f, "protect dirs", json_object_get(p, "protect_dirs"), trim);
    names(f, "protect files", json_object_get(p, "protect_files"), trim);
    names(f, "secret prefix", json_object_get(p, "secret_prefixes"), trim);
    names(f, "scan skips", json_object_get(p, "scan_skip"), trim);

    json_t *env = json_object_get(p, "env");
    fprintf(f, "\nEnvironment (keep -> explicit -> strip -> set)\n");
    names(f, "keep", json_object_get(env, "keep"), trim);
    names(f, "keep prefix", json_object_get(env, "keep_prefix"), trim);
    names(f, "strip", json_object_get(env, "strip"), trim);
    names(f, "strip prefix", json_object_get(env, "strip_prefix"), trim);
    json_array_foreach(json_object_get(env, "set"), i, r)
        fprintf(f, "  %-14s%s=%s%s  ^ %s\n", i ? "" : "set", str(r, "name"), str(r, "value"),
                json_is_true(json_object_get(r, "discovered")) ? " (discovered)" : "",
                from(r, trim));
    fprintf(f, "  %-14s", "result");
    json_array_foreach(json_object_get(p, "env_result"), i, r)
        fprintf(f, "%s%s\n", i ? "                " : "", json_string_value(r));
    if (!json_array_size(json_object_get(p, "env_result")))
        fprintf(f, "(empty)\n");

    json_t *sc = json_object_get(p, "seccomp");
    fprintf(f, "\nSeccomp (libseccomp; everything not listed is allowed)\n");
    json_array_foreach(json_object_get(sc, "deny"), i, r)
        fprintf(f, "  deny %-22s -> %-12s ^ %s\n", str(r, "syscall"), str(r, "errno"),
                from(r, trim));
    fprintf(f, "  socket(): %s -> %s; socketpair(AF_UNIX) %s\n",
            json_array_size(json_object_get(sc, "socket_allow")) ? "families not allowed"
                                                                 : "every family",
            str(sc, "socket_errno"),
            json_is_true(json_object_get(sc, "socketpair_unix")) ? "allowed" : "denied");
    fprintf(f, "  clone() with namespace flags: %s; TIOCSTI/TIOCLINUX: %s\n",
            json_is_true(json_object_get(sc, "deny_clone_ns")) ? "EPERM" : "allowed",
            json_is_true(json_object_get(sc, "deny_tty_inject")) ? "EPERM" : "allowed");
    fprintf(f, "  a foreign architecture or an x32 syscall kills the process (always)\n");
    fprintf(f, "  a set-uid/set-gid mode (chmod, mkdir, mknod, creating open) -> EPERM, openat2 "
               "-> ENOSYS\n    (always, unless denied outright above)\n");
    fprintf(f, "  %-52s ^ %s\n", "", from(sc, trim));

    json_t *lim = json_object_get(p, "limits");
    fprintf(f, "\nLimits\n  deadline ceiling %lld ms, output %lld bytes, open files %lld, "
               "core %lld bytes,\n  scan depth %lld, scan entries %lld\n  %-52s ^ %s\n",
            (long long)json_integer_value(json_object_get(lim, "timeout_ms")),
            (long long)json_integer_value(json_object_get(lim, "output_bytes")),
            (long long)json_integer_value(json_object_get(lim, "nofile")),
            (long long)json_integer_value(json_object_get(lim, "core_bytes")),
            (long long)json_integer_value(json_object_get(lim, "scan_depth")),
            (long long)json_integer_value(json_object_get(lim, "scan_entries")), "",
            from(lim, trim));

    options(f, "\nbubblewrap (options passed with --args; seccomp with --seccomp)\n",
            json_object_get(p, "bwrap_argv"));
    options(f, "\nmounts the setup step makes first, in this order (bubblewrap's syntax)\n",
            json_object_get(p, "setup_mounts"));
    json_decref(p);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}
