/* Unit tests for engine/env.c: the environment pipeline. The
 * plan's env section is filled directly from static data (no plan builder needed). */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#define MAXN 16

/* A test-local env plan backed by fixed arrays. */
typedef struct test_env {
    a3s_env_plan ep;
    a3s_name keep[MAXN], keep_prefix[MAXN], strip[MAXN], strip_prefix[MAXN];
    a3s_kv set[MAXN];
} test_env;

static void fill_names(a3s_name_list *l, a3s_name *store, const char *const *names)
{
    size_t n = 0;
    while (names && names[n] && n < MAXN) {
        /* The plan owns mutable strings; these static ones are only read. */
        store[n].name = (char *)names[n];
        store[n].prov.file = NULL;
        store[n].prov.line = 0;
        n++;
    }
    l->v = store;
    l->n = n;
    l->cap = MAXN;
}

/* set: alternating name, value, NULL-terminated. */
static void build(test_env *t, const char *const *keep, const char *const *keep_prefix,
                  const char *const *strip, const char *const *strip_prefix,
                  const char *const *set)
{
    memset(t, 0, sizeof *t);
    fill_names(&t->ep.keep, t->keep, keep);
    fill_names(&t->ep.keep_prefix, t->keep_prefix, keep_prefix);
    fill_names(&t->ep.strip, t->strip, strip);
    fill_names(&t->ep.strip_prefix, t->strip_prefix, strip_prefix);
    size_t n = 0;
    while (set && set[2 * n] && n < MAXN) {
        t->set[n].name = (char *)set[2 * n];
        t->set[n].value = (char *)set[2 * n + 1];
        n++;
    }
    t->ep.set = t->set;
    t->ep.nset = n;
    t->ep.capset = MAXN;
}

/* Compare a composed vector with the expected NULL-terminated list; prints diffs. */
static bool same(const a3s_strv *got, const char *const *exp)
{
    size_t n = 0;
    while (exp[n])
        n++;
    bool eq = got->n == n && got->v && got->v[n] == NULL;
    for (size_t i = 0; eq && i < n; i++)
        eq = strcmp(got->v[i], exp[i]) == 0;
    if (!eq) {
        printf("#   got (%zu):", got->n);
        for (size_t i = 0; i < got->n; i++)
            printf(" [%s]", got->v[i]);
        printf("\n#   expected (%zu):", n);
        for (size_t i = 0; i < n; i++)
            printf(" [%s]", exp[i]);
        printf("\n");
    }
    return eq;
}

static void test_name_valid(void)
{
    ok(a3s_env_name_valid("A", 1), "A is valid");
    ok(a3s_env_name_valid("_", 1), "_ is valid");
    ok(a3s_env_name_valid("a_1Z", 4), "a_1Z is valid");
    ok(!a3s_env_name_valid("", 0), "empty name is invalid");
    ok(!a3s_env_name_valid("1A", 2), "leading digit is invalid");
    ok(!a3s_env_name_valid("A-B", 3), "dash is invalid");
    ok(!a3s_env_name_valid("A B", 3), "space is invalid");
    ok(!a3s_env_name_valid("BASH_FUNC_x%%", 13), "BASH_FUNC_x%%%% is invalid");
    ok(!a3s_env_name_valid("\xC3\xA9", 2), "non-ASCII is invalid");
    ok(a3s_env_name_valid("AB-", 2), "only len bytes are checked");
    ok(!a3s_env_name_valid(NULL, 0), "NULL is invalid");
}

static void test_check_entry(void)
{
    a3s_error err;
    static const char *const good[] = {"A=", "_A1=v=w", "PATH=/usr/bin", "X=multi\nline", NULL};
    for (size_t i = 0; good[i]; i++) {
        memset(&err, 0, sizeof err);
        ok(a3s_env_check_entry(good[i], &err) == 0 && err.code == 0,
           "entry %zu accepted", i);
    }
    static const struct {
        const char *entry, *shown;
    } bad[] = {
        {"=x", "\"\""},
        {"1A=b", "1A"},
        {"A-B=c", "A-B"},
        {"NOEQUALS", "NOEQUALS"},
        {"BASH_FUNC_x%%=() { :; }", "BASH_FUNC_x%%"},
        {"A B=c", "A B"},
        {"\x1b[31m=c", "\\x1b[31m"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        char want[256];
        snprintf(want, sizeof want, "invalid explicit command environment entry: %s (",
                 bad[i].shown);
        int rc = a3s_env_check_entry(bad[i].entry, &err);
        ok(rc == -1 && err.code == A3S_ERR_INVALID && strncmp(err.msg, want, strlen(want)) == 0,
           "entry %zu refused as invalid: %s", i, err.msg);
    }

    /* The value never appears in the message. */
    memset(&err, 0, sizeof err);
    ok(a3s_env_check_entry("1A=supersecret-token", &err) == -1 &&
           !strstr(err.msg, "supersecret") && strstr(err.msg, "1A"),
       "the message names the entry but not its value: %s", err.msg);
    memset(&err, 0, sizeof err);
    ok(a3s_env_check_entry("sk-live-secret", &err) == -1 && !strstr(err.msg, "secret"),
       "an entry without '=' that is no name is not echoed: %s", err.msg);
    ok(a3s_env_check_entry(NULL, NULL) == -1, "NULL entry refused (err may be NULL)");
}

static void test_pipeline(void)
{
    static const char *const keep[] = {"PATH", "HOME", "USER", "LANG", NULL};
    static const char *const keep_prefix[] = {"LC_", NULL};
    static const char *const strip[] = {"BASH_ENV", "LD_PRELOAD", "HTTP_PROXY", NULL};
    static const char *const strip_prefix[] = {"LUA_INIT_", "BASH_FUNC_", NULL};
    static const char *const set[] = {"HOME", "/scratch", "TMPDIR", "/scratch/tmp",
                                      "HTTP_PROXY", "http://127.0.0.1:24731", NULL};
    test_env t;
    build(&t, keep, keep_prefix, strip, strip_prefix, set);

    static const char *const host[] = {
        "PATH=/usr/bin",       "HOME=/root",           "SECRET_TOKEN=hunter2",
        "LC_ALL=C.UTF-8",      "LC_TIME=en_DK",        "LCX=not-a-prefix-match",
        "NOEQUALS",            "LD_PRELOAD=/evil.so",  "lang=lower-case-not-kept",
        "PATHX=not-exact",     "USER=alice",           "=empty-name",
        "http_proxy=http://corp:3128", NULL};
    static const char *const explicit_env[] = {
        "FOO=bar",           "PATH=/opt/bin:/usr/bin", "bash_env=/tmp/x.sh",
        "Ld_PreLoad=/y.so",  "LUA_INIT_script=os.exit()", "lua_init_5_4=z",
        "HOME=/explicit",    "FOO=baz",                "http_proxy=http://evil:1",
        "Http_Proxy=http://evil:2", "LC_ALL=POSIX", "EMPTY=", NULL};
    static const char *const expected[] = {
        "EMPTY=",
        "FOO=baz",
        "HOME=/scratch",
        "HTTP_PROXY=http://127.0.0.1:24731",
        "LC_ALL=POSIX",
        "LC_TIME=en_DK",
        "PATH=/opt/bin:/usr/bin",
        "TMPDIR=/scratch/tmp",
        "USER=alice",
        NULL};
    a3s_strv out = {NULL, 0, 0};
    a3s_error err;
    memset(&err, 0, sizeof err);
    int rc = a3s_env_compose(&t.ep, host, explicit_env, &out, &err);
    ok(rc == 0, "compose succeeds (%s)", err.msg);
    ok(same(&out, expected),
       "keep exact + keep_prefix, explicit overlay (later wins), case-insensitive strip, "
       "set last, sorted");
    a3s_strv_free(&out);

    /* Without any explicit entries the host values show through (then set). */
    static const char *const expected_host[] = {
        "HOME=/scratch", "HTTP_PROXY=http://127.0.0.1:24731", "LC_ALL=C.UTF-8",
        "LC_TIME=en_DK", "PATH=/usr/bin", "TMPDIR=/scratch/tmp", "USER=alice", NULL};
    rc = a3s_env_compose(&t.ep, host, NULL, &out, &err);
    ok(rc == 0 && same(&out, expected_host), "host only: kept names, HOME re-homed by set");
    a3s_strv_free(&out);

    /* Nothing from anywhere but set. */
    static const char *const expected_set[] = {
        "HOME=/scratch", "HTTP_PROXY=http://127.0.0.1:24731", "TMPDIR=/scratch/tmp", NULL};
    rc = a3s_env_compose(&t.ep, NULL, NULL, &out, &err);
    ok(rc == 0 && same(&out, expected_set), "NULL host and explicit: only set entries");
    a3s_strv_free(&out);
}

static void test_case_insensitive_strip(void)
{
    static const char *const keep[] = {"bash_env", "Ld_PreLoad", "LUA_INIT_script", "KEEP",
                                       NULL};
    static const char *const strip[] = {"BASH_ENV", "LD_PRELOAD", NULL};
    static const char *const strip_prefix[] = {"LUA_INIT_", NULL};
    test_env t;
    build(&t, keep, NULL, strip, strip_prefix, NULL);
    static const char *const host[] = {"bash_env=/a", "Ld_PreLoad=/b.so",
                                       "LUA_INIT_script=c", "KEEP=1", NULL};
    static const char *const expected[] = {"KEEP=1", NULL};
    a3s_strv out = {NULL, 0, 0};
    a3s_error err;
    memset(&err, 0, sizeof err);
    ok(a3s_env_compose(&t.ep, host, NULL, &out, &err) == 0 && same(&out, expected),
       "host bash_env, Ld_PreLoad, LUA_INIT_script stripped case-insensitively");
    a3s_strv_free(&out);

    static const char *const explicit_env[] = {"BaSh_EnV=/x", "ld_preload=/y",
                                               "lua_init_SCRIPT=z", "LUA_INIT=w", NULL};
    static const char *const expected2[] = {"LUA_INIT=w", NULL};
    ok(a3s_env_compose(&t.ep, NULL, explicit_env, &out, &err) == 0 && same(&out, expected2),
       "explicit variants stripped; LUA_INIT itself is not under the LUA_INIT_ prefix");
    a3s_strv_free(&out);

    /* Control: without the strip lists the same names pass, so the strip did the work. */
    build(&t, keep, NULL, NULL, NULL, NULL);
    static const char *const expected3[] = {"KEEP=1", "LUA_INIT_script=c", "Ld_PreLoad=/b.so",
                                            "bash_env=/a", NULL};
    ok(a3s_env_compose(&t.ep, host, NULL, &out, &err) == 0 && same(&out, expected3),
       "control: no strip lists, nothing removed (byte-order sorted)");
    a3s_strv_free(&out);
}

static void test_bash_func(void)
{
    static const char *const keep_prefix[] = {"BASH_", NULL};
    static const char *const strip_prefix[] = {"BASH_FUNC_", NULL};
    static const char *const host[] = {"BASH_FUNC_foo%%=() { echo pwned; }",
                                       "bash_func_bar%%=() { :; }", "BASH_VERSION=5", NULL};
    test_env t;
    a3s_strv out = {NULL, 0, 0};
    a3s_error err;
    memset(&err, 0, sizeof err);

    build(&t, NULL, keep_prefix, NULL, NULL, NULL);
    static const char *const control[] = {"BASH_FUNC_foo%%=() { echo pwned; }",
                                          "BASH_VERSION=5", NULL};
    ok(a3s_env_compose(&t.ep, host, NULL, &out, &err) == 0 && same(&out, control),
       "control: keep_prefix BASH_ keeps the host function export");
    a3s_strv_free(&out);

    build(&t, NULL, keep_prefix, NULL, strip_prefix, NULL);
    static const char *const expected[] = {"BASH_VERSION=5", NULL};
    ok(a3s_env_compose(&t.ep, host, NULL, &out, &err) == 0 && same(&out, expected),
       "host BASH_FUNC_foo%%%% removed by strip_prefix BASH_FUNC_");
    a3s_strv_free(&out);

    /* An explicit function export is refused outright: not a valid name. */
    static const char *const explicit_env[] = {"OK=1", "BASH_FUNC_x%%=() { echo pwned; }",
                                               NULL};
    memset(&err, 0, sizeof err);
    int rc = a3s_env_compose(&t.ep, host, explicit_env, &out, &err);
    ok(rc == -1 && err.code == A3S_ERR_INVALID &&
           strstr(err.msg, "invalid explicit command environment entry: BASH_FUNC_x%%") &&
           !strstr(err.msg, "pwned"),
       "explicit BASH_FUNC_x%%%% refused as an invalid name: %s", err.msg);
    ok(out.n == 0 && out.v == NULL, "a refused compose leaves the output untouched");
}

static void test_set_overrides_explicit(void)
{
    static const char *const set[] = {"HOME", "/scratch", "XDG_CONFIG_HOME", "/scratch/.config",
                                      NULL};
    test_env t;
    build(&t, NULL, NULL, NULL, NULL, set);
    static const char *const explicit_env[] = {"HOME=/home/attacker",
                                               "XDG_CONFIG_HOME=/evil", NULL};
    static const char *const expected[] = {"HOME=/scratch", "XDG_CONFIG_HOME=/scratch/.config",
                                           NULL};
    a3s_strv out = {NULL, 0, 0};
    a3s_error err;
    memset(&err, 0, sizeof err);
    ok(a3s_env_compose(&t.ep, NULL, explicit_env, &out, &err) == 0 && same(&out, expected),
       "set overwrites explicit HOME and XDG_CONFIG_HOME");
    a3s_strv_free(&out);
}

static void test_sorted_and_dedup(void)
{
    static const char *const keep[] = {"PATH", "a", "Z", "_x", "AB", "A_", "A", NULL};
    test_env t;
    build(&t, keep, NULL, NULL, NULL, NULL);
    static const char *const host[] = {"a=1", "Z=2", "_x=3", "A_=4", "AB=5", "A=6",
                                       "PATH=/first", "PATH=/second", NULL};
    static const char *const expected[] = {"A=6", "AB=5", "A_=4", "PATH=/first", "Z=2",
                                           "_x=3", "a=1", NULL};
    a3s_strv out = {NULL, 0, 0};
    a3s_error err;
    memset(&err, 0, sizeof err);
    ok(a3s_env_compose(&t.ep, host, NULL, &out, &err) == 0 && same(&out, expected),
       "sorted by name in byte order; a duplicated host name keeps its first value");
    a3s_strv_free(&out);

    static const char *const explicit_env[] = {"A=x", "A=y", "A=z", NULL};
    static const char *const expected2[] = {"A=z", NULL};
    build(&t, NULL, NULL, NULL, NULL, NULL);
    ok(a3s_env_compose(&t.ep, NULL, explicit_env, &out, &err) == 0 && same(&out, expected2),
       "repeated explicit names: the last one wins, one entry");
    a3s_strv_free(&out);

    /* An empty result is still a NULL-terminated vector. */
    ok(a3s_env_compose(&t.ep, NULL, NULL, &out, &err) == 0 && out.n == 0 && out.v &&
           out.v[0] == NULL,
       "empty result is an empty NULL-terminated vector");
    a3s_strv_free(&out);
}

static void test_bad_entries(void)
{
    static const char *const keep[] = {"PATH", NULL};
    test_env t;
    build(&t, keep, NULL, NULL, NULL, NULL);
    static const char *const host[] = {"PATH=/usr/bin", NULL};
    static const char *const bad[] = {"=x", "1A=b", "A-B=c", "NOEQUALS"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *explicit_env[] = {"GOOD=1", bad[i], NULL};
        a3s_strv out = {NULL, 0, 0};
        a3s_error err;
        memset(&err, 0, sizeof err);
        int rc = a3s_env_compose(&t.ep, host, explicit_env, &out, &err);
        ok(rc == -1 && err.code == A3S_ERR_INVALID &&
               strstr(err.msg, "invalid explicit command environment entry") && out.n == 0,
           "explicit entry \"%s\" refuses the whole compose: %s", bad[i], err.msg);
        a3s_strv_free(&out);
    }

    /* An invalid name in the plan's set section is a policy error (fail closed). */
    static const char *const set[] = {"BAD-NAME", "v", NULL};
    build(&t, NULL, NULL, NULL, NULL, set);
    a3s_strv out = {NULL, 0, 0};
    a3s_error err;
    memset(&err, 0, sizeof err);
    ok(a3s_env_compose(&t.ep, NULL, NULL, &out, &err) == -1 && err.code == A3S_ERR_POLICY,
       "invalid set name refused as a policy error: %s", err.msg);
    a3s_strv_free(&out);
}

int main(void)
{
    test_name_valid();
    test_check_entry();
    test_pipeline();
    test_case_insensitive_strip();
    test_bash_func();
    test_set_overrides_explicit();
    test_sorted_and_dedup();
    test_bad_entries();
    return tap_done();
}
