/* The Seatbelt profile generator (backends/macos/sbpl.c): strings quoted so that no name
 * ends one early, regex text escaped so that no name widens a pattern, the rules in the
 * order SBPL needs (last match wins: denies after the allows they narrow), and refusals
 * of what it cannot express. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "sbpl.h"
#include "tap.h"
#include "util.h"

#define WS "/w/pro.j"
#define SCRATCH "/tmp/a3s-sandbox-1"

static a3s_plan *base_plan(void)
{
    a3s_error e = {0};
    a3s_plan *p = a3s_plan_new();
    if (!p || !(p->name = a3s_strdup("spec")) || a3s_plan_set_roots(p, WS, SCRATCH, "/home/u", "/tmp", &e) < 0 ||
        a3s_plan_add_fs(p, A3S_FS_RW, WS, false, false, NULL, 0, &e) < 0 ||
        a3s_plan_add_fs(p, A3S_FS_RW, SCRATCH, false, false, NULL, 0, &e) < 0 ||
        a3s_plan_add_fs(p, A3S_FS_HIDE, "/home/u", true, false, NULL, 0, &e) < 0 ||
        a3s_plan_add_fs(p, A3S_FS_HIDE, "/tmp", true, false, NULL, 0, &e) < 0 ||
        a3s_plan_add_fs(p, A3S_FS_RO, "/home/u/.cargo/bin", true, false, NULL, 0, &e) < 0 ||
        a3s_plan_add_fs(p, A3S_FS_MASK, "/home/u/.cargo/bin/token", true, false, NULL, 0,
                        &e) < 0 ||
        a3s_plan_add_name(&p->protect_dirs, ".git", NULL, 0, &e) < 0 ||
        a3s_plan_add_name(&p->secret_prefixes, ".e[n]v*", NULL, 0, &e) < 0) {
        printf("Bail out! plan: %s\n", e.msg);
        exit(1);
    }
    return p;
}

static char *profile(a3s_plan *p, const a3s_scan_result *scan, a3s_error *e)
{
    if (a3s_plan_validate(p, e) < 0)
        return NULL;
    a3s_sbpl_input in = {.plan = p, .scan = scan, .workspace = WS, .scratch = SCRATCH};
    char *out = NULL;
    return a3s_sbpl_profile(&in, &out, e) == 0 ? out : NULL;
}

/* Where needle first occurs in hay, or -1. */
static long at(const char *hay, const char *needle)
{
    const char *p = hay ? strstr(hay, needle) : NULL;
    return p ? (long)(p - hay) : -1;
}

/* Lines that open a rule: each starts with "(" outside any string. */
static int top_level_allows_of(const char *s, const char *what)
{
    int n = 0;
    bool in_str = false;
    if (!s)
        return -1;
    for (const char *p = s; *p; p++) {
        if (in_str) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_str = false;
            continue;
        }
        if (*p == '"')
            in_str = true;
        else if (*p == ';')
            p += strcspn(p, "\n") - 1;
        else if (!strncmp(p, what, strlen(what)))
            n++;
    }
    return n;
}

static void test_hostile_names(void)
{
    a3s_error e = {0};
    a3s_plan *p = base_plan();
    a3s_fs_rule found[2] = {
        {.kind = A3S_FS_MASK, .path = WS "/.env\") (allow default) (allow file-write* (subpath \"/\")) ;\\", .optional = true, .discovered = true},
        {.kind = A3S_FS_MASK, .path = WS "/sub/.env\n(allow network*)", .optional = true, .discovered = true},
    };
    a3s_scan_result scan = {.rules = found, .nrules = 2};
    char *s = profile(p, &scan, &e);
    ok(s != NULL, "a profile for names with quotes, backslashes and newlines (%s)", e.msg);
    ok(at(s, "(subpath \"" WS "/.env\\\") (allow default) (allow file-write* (subpath "
              "\\\"/\\\")) ;\\\\\")") >= 0,
       "the quote and the backslash of the name are escaped; the name stays one string");
    ok(at(s, "(subpath \"" WS "/sub/.env\n(allow network*)\")") >= 0,
       "a newline stays inside the string, as a byte of the name");
    ok(top_level_allows_of(s, "(allow default") == 0, "no (allow default) outside a string");
    ok(top_level_allows_of(s, "(allow network") == 0, "no network allow outside a string");
    ok(top_level_allows_of(s, "(allow file-write* (subpath \"/\")") == 0,
       "no write allow of / outside a string");
    free(s);
    a3s_plan_free(p);
}

static void test_regex_escaping(void)
{
    a3s_error e = {0};
    a3s_plan *p = base_plan();
    char *s = profile(p, NULL, &e);
    ok(at(s, "(deny file-read* file-write* (regex \"^/w/pro\\\\.j/(.*/)?\\\\.[eE]\\\\[[nN]\\\\]"
             "[vV]\\\\*[^/]*(/|$)\"))") >= 0,
       "regex metacharacters of the workspace and of a secret prefix are escaped (any case)");
    ok(at(s, "(deny file-write* (regex \"^/w/pro\\\\.j/\\\\.[gG][iI][tT](/|$)\"))") >= 0,
       "a protected name is denied for writing in every case spelling");
    free(s);
    a3s_plan_free(p);
}

static void test_order(void)
{
    a3s_error e = {0};
    a3s_plan *p = base_plan();
    char *s = profile(p, NULL, &e);
    ok(s && !strncmp(s, "(version 1)\n", 12), "the profile starts with (version 1)");
    long deny_default = at(s, "\n(deny default)\n");
    long root = at(s, "(allow file-read* (subpath \"/\"))");
    long hide = at(s, "(deny file-read* file-write* (subpath \"/home/u\"))");
    long ro = at(s, "(allow file-read* (subpath \"/home/u/.cargo/bin\"))");
    long ro_w = at(s, "(deny file-write* (subpath \"/home/u/.cargo/bin\"))");
    long mask = at(s, "(deny file-read* file-write* (subpath \"/home/u/.cargo/bin/token\"))");
    long ws = at(s, "(allow file-read* file-write* (subpath \"" WS "\"))");
    long name = at(s, "(regex \"^/w/pro\\\\.j/\\\\.[gG]");
    long net = at(s, "(deny network*)");
    ok(deny_default > 0 && deny_default < root, "deny default, then the host root readable");
    ok(root < hide && hide < ro && ro < ro_w, "a hidden root, then what is re-exposed below it");
    ok(ws > 0 && ws < name, "the workspace writable, then its protected names denied");
    ok(mask > ro_w && mask > name, "masks after every allow they narrow");
    ok(net > mask, "no network, last");
    ok(at(s, "(deny file-read* file-write* (subpath \"/tmp\") (subpath \"/private/tmp\"))") > 0,
       "a deny below /tmp names its /private twin too");
    ok(at(s, "(allow file-read* file-write* (subpath \"" SCRATCH "\"))") > 0 &&
           at(s, "/private" SCRATCH) < 0,
       "an allow never gets a /private twin");
    a3s_plan *again = base_plan();
    char *s2 = profile(again, NULL, &e);
    ok(s && s2 && !strcmp(s, s2), "the same input gives the same profile");
    free(s);
    free(s2);
    a3s_plan_free(p);
    a3s_plan_free(again);
}

static void test_refusals(void)
{
    a3s_error e = {0};
    a3s_plan *p = base_plan();
    if (a3s_plan_add_fs(p, A3S_FS_RW, "/opt/cache", false, false, "p.lua", 7, &e) < 0) {
        printf("Bail out! plan: %s\n", e.msg);
        exit(1);
    }
    p->fs[p->nfs - 1].broaden = true;
    char *s = profile(p, NULL, &e);
    ok(s == NULL && e.code == A3S_ERR_POLICY && strstr(e.msg, "/opt/cache") &&
           strstr(e.msg, "p.lua:7"),
       "a writable root outside the workspace and scratch is refused, naming it (%s)", e.msg);
    free(s);
    a3s_plan_free(p);
}

int main(void)
{
    test_hostile_names();
    test_regex_escaping();
    test_order();
    test_refusals();
    return tap_done();
}
