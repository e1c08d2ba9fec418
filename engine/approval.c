/* What an approval covers: the policy digest (an evaluation against a neutral host), the
 * grant set bound into it, and the check that a run's broadening roots are the ones the
 * digest covers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest_cache.h"
#include "json.h"
#include "sandbox_int.h"
#include "util.h"

/* The policy digest: the canonical plan of an evaluation against a neutral host (fixed
 * symbolic roots, no environment, no PATH, every host query "absent"), so the same
 * policy gives the same digest on every host, for every user and workspace, and nothing
 * the scan or the host contributes can change it. Cached until the policy changes, and
 * between processes (digest_cache.h). */
int a3s_sandbox_base_digest(a3s_sandbox *sb, char out[65], a3s_error *err)
{
    if (!sb->digest[0]) {
        a3s_policy_ctx ctx = {
            .workspace = A3S_NEUTRAL "/workspace",
            .scratch = A3S_NEUTRAL "/scratch",
            .home = A3S_NEUTRAL "/home",
            .tmp = A3S_NEUTRAL "/tmp",
            .search_path = (const char *const *)sb->search_path.v,
            .platform = "linux",
            .guard = sb->workspace,
            .neutral = true,
        };
        a3s_strv_free(&sb->approved_broaden);
        if (a3s_digest_cache_get(sb, &ctx, sb->digest, &sb->approved_broaden) == 1) {
            memcpy(out, sb->digest, 65);
            return 0;
        }
        a3s_policy_facts *facts = NULL;
        a3s_plan *p = sb->policy->eval_facts
                          ? sb->policy->eval_facts(&sb->src, &ctx, &facts, err)
                          : sb->policy->eval(&sb->src, &ctx, err);
        if (!p)
            return -1;
        /* A plan no run could enforce has no digest to approve. */
        int rc = a3s_sandbox_plan_check(sb, p, false, err);
        if (rc == 0)
            rc = a3s_plan_digest(p, sb->digest, err);
        /* The broadening roots the digest covers, for the check at each run. */
        a3s_strv_free(&sb->approved_broaden);
        for (size_t i = 0; rc == 0 && i < p->nfs; i++)
            if (p->fs[i].kind == A3S_FS_RW && p->fs[i].broaden &&
                a3s_strv_push(&sb->approved_broaden, p->fs[i].path) < 0)
                rc = a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        a3s_plan_free(p);
        if (rc == 0)
            a3s_digest_cache_put(sb, &ctx, facts, sb->digest, &sb->approved_broaden);
        if (facts)
            sb->policy->facts_free(facts);
        if (rc < 0) {
            sb->digest[0] = '\0';
            return -1;
        }
    }
    memcpy(out, sb->digest, 65);
    return 0;
}

/* The approval digest: the policy's, and with grants, a hash over it and the normalized
 * grant set, one "host:port" line per grant in canonical order ("a3s-grants-v1", the same
 * text as before sets were bound). The port is the last ':' field, so lines are
 * unambiguous even for IPv6 hosts. sb->grants is always kept sorted by cmp_grant and free
 * of duplicates (only the grant functions below change it), so an approval covers a set:
 * order-free, duplicates collapsed. */
static int cmp_grant(const void *a, const void *b)
{
    const a3s_grant *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->port > y->port) - (x->port < y->port);
}

static int approval_digest(a3s_sandbox *sb, const a3s_grant *g, size_t n, char out[65],
                           a3s_error *err)
{
    if (a3s_sandbox_base_digest(sb, out, err) < 0)
        return -1;
    if (!n)
        return 0; /* no grants: the policy digest itself */
    /* Bounded text: hosts hold at most A3S_GRANT_HOST_MAX bytes, ports 5 digits. */
    size_t cap = sizeof "a3s-grants-v1\n" + 65 + n * (A3S_GRANT_HOST_MAX + 8);
    char *text = malloc(cap);
    if (!text)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    size_t len = (size_t)snprintf(text, cap, "a3s-grants-v1\n%s\n", out);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s:%d\n", g[i].host, g[i].port);
    a3s_sha256_hex(text, len, out);
    free(text);
    return 0;
}

int a3s_sandbox_policy_digest(a3s_sandbox *sb, char out[65], a3s_error *err)
{
    return approval_digest(sb, sb->grants, sb->ngrants, out, err);
}

/* Make `set` (sorted, distinct, owned: freed on failure) the sandbox's grants, but only
 * when the approval, if given, is for exactly this set; otherwise nothing changes. */
static int install_grants(a3s_sandbox *sb, a3s_grant *set, size_t n, const char *expected,
                          char new_digest[65], a3s_error *err)
{
    char d[65];
    if ((expected || new_digest) && approval_digest(sb, set, n, d, err) < 0) {
        free(set);
        return err ? err->code : A3S_ERR_POLICY;
    }
    if (expected && strcmp(expected, d) != 0) {
        char base[65];
        a3s_error berr;
        bool bare = n && a3s_sandbox_base_digest(sb, base, &berr) == 0 && !strcmp(expected, base);
        free(set);
        return a3s_fail(err, A3S_ERR_POLICY,
                        "network grants not approved: the approved digest is %.64s, but the "
                        "policy with this grant set (%zu grant%s) has digest %s; an approval "
                        "covers the policy and the exact grant set%s; nothing changed",
                        expected, n, n == 1 ? "" : "s", d,
                        bare ? " (the approved digest is the policy's without grants)" : ""),
               A3S_ERR_POLICY;
    }
    free(sb->grants);
    sb->grants = set;
    sb->ngrants = n;
    if (new_digest)
        memcpy(new_digest, d, 65);
    return A3S_OK;
}

static int too_many_grants(size_t n, a3s_error *err)
{
    return a3s_fail(err, A3S_ERR_INVALID, "too many network grants: %zu, at most %d", n,
                    A3S_MAX_GRANTS),
           A3S_ERR_INVALID;
}

int a3s_sandbox_grant_set(a3s_sandbox *sb, const char *const *specs, size_t n,
                          const char *expected_digest, char new_digest[65], a3s_error *err)
{
    /* Counted before anything is read, so an oversized request costs nothing. */
    if (n > A3S_MAX_GRANTS)
        return too_many_grants(n, err);
    if (n && !specs)
        return a3s_fail(err, A3S_ERR_INVALID, "invalid network grants: none given"),
               A3S_ERR_INVALID;
    a3s_grant *set = NULL;
    if (n && !(set = malloc(n * sizeof *set)))
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory"), A3S_ERR_INTERNAL;
    for (size_t i = 0; i < n; i++)
        if (a3s_grant_parse(specs[i], &set[i], err) < 0) {
            free(set);
            return err ? err->code : A3S_ERR_INVALID;
        }
    /* Normalize once: sort, then drop duplicates (n log n, no per-grant re-hash). */
    size_t m = 0;
    if (n) {
        qsort(set, n, sizeof *set, cmp_grant);
        m = 1;
        for (size_t i = 1; i < n; i++)
            if (cmp_grant(&set[m - 1], &set[i]) != 0)
                set[m++] = set[i];
    }
    return install_grants(sb, set, m, expected_digest, new_digest, err);
}

int a3s_sandbox_grant(a3s_sandbox *sb, const char *spec, const char *expected_digest,
                      char new_digest[65], a3s_error *err)
{
    a3s_grant g;
    if (a3s_grant_parse(spec, &g, err) < 0)
        return err ? err->code : A3S_ERR_INVALID;
    /* Where g goes in the sorted set, and whether it is there already. */
    size_t lo = 0, hi = sb->ngrants;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_grant(&sb->grants[mid], &g) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool held = lo < sb->ngrants && cmp_grant(&sb->grants[lo], &g) == 0;
    size_t n = sb->ngrants + !held;
    if (n > A3S_MAX_GRANTS)
        return too_many_grants(n, err);
    /* The candidate set; an identical re-grant changes nothing, but is checked the same. */
    a3s_grant *set = malloc(n * sizeof *set);
    if (!set)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory"), A3S_ERR_INTERNAL;
    if (sb->ngrants)
        memcpy(set, sb->grants, sb->ngrants * sizeof *set);
    if (!held) {
        memmove(set + lo + 1, set + lo, (sb->ngrants - lo) * sizeof *set);
        set[lo] = g;
    }
    return install_grants(sb, set, n, expected_digest, new_digest, err);
}

/* A broadening root of this run's plan must be one the digest covers: a policy could
 * otherwise declare one only on hosts where a query says so, and the approval of its
 * digest (computed where every query answers "absent") would not show it. Host roots are
 * compared in their neutral spelling. */
int a3s_sandbox_check_broadening(a3s_sandbox *sb, const a3s_plan *p, a3s_error *err)
{
    char d[65];
    if (a3s_sandbox_base_digest(sb, d, err) < 0)
        return -1;
    const char *roots[4][2] = {{sb->workspace, A3S_NEUTRAL "/workspace"},
                               {p->scratch, A3S_NEUTRAL "/scratch"},
                               {sb->home, A3S_NEUTRAL "/home"},
                               {sb->tmp, A3S_NEUTRAL "/tmp"}};
    for (size_t i = 0; i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        if (r->kind != A3S_FS_RW || !r->broaden)
            continue;
        char *sym = NULL;
        for (int k = 0; k < 4 && !sym; k++) {
            const char *root = roots[k][0];
            if (root && a3s_path_within(r->path, root) &&
                asprintf(&sym, "%s%s", roots[k][1], r->path + strlen(root)) < 0)
                return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        }
        /* Written literally, or through a host root (ctx.home .. "/x"). */
        bool ok = false;
        for (size_t j = 0; j < sb->approved_broaden.n && !ok; j++)
            ok = !strcmp(sb->approved_broaden.v[j], r->path) ||
                 (sym && !strcmp(sb->approved_broaden.v[j], sym));
        free(sym);
        if (!ok)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "policy %s declares the writable root %s only on this host (a "
                            "host query decided it): its digest does not cover it, refused",
                            sb->src.name, r->path);
    }
    return 0;
}

/* Hosts are normalized ASCII, written through a3s_json_str all the same. */
json_t *a3s_sandbox_grants_json(const a3s_sandbox *sb, const char *digest)
{
    json_t *g = json_array();
    bool ok = g != NULL;
    for (size_t i = 0; ok && i < sb->ngrants; i++) {
        json_t *e = json_object();
        ok = a3s_json_set(e, "host", a3s_json_cstr(sb->grants[i].host)) == 0 &&
             a3s_json_set(e, "port", json_integer(sb->grants[i].port)) == 0 &&
             (!digest || a3s_json_set(e, "policy_digest", a3s_json_cstr(digest)) == 0);
        if (!ok)
            json_decref(e);
        else
            ok = a3s_json_push(g, e) == 0;
    }
    if (!ok) {
        json_decref(g);
        return NULL;
    }
    return g;
}

int a3s_sandbox_digest(a3s_sandbox *sb, char out[65], a3s_error *err)
{
    return a3s_sandbox_policy_digest(sb, out, err) < 0 ? (err ? err->code : A3S_ERR_POLICY) : A3S_OK;
}
