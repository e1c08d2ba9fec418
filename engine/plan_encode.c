/* The plan in JSON: the canonical form and its digest, and the full plan.
 *
 * Canonical encoding (a3s_plan_version 1), the input of the digest:
 *   json_dumps(JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII) of
 *   {"a3s_plan_version":1, "name", "network":"none",
 *    "fs":[{"kind","path","optional"}...]          every rule, declaration order,
 *    "protect_dirs","protect_files","secret_prefixes","scan_skip":[names...],
 *    "env":{"keep","keep_prefix","strip","strip_prefix":[names...],
 *           "set":[[name, value]...]},
 *    "seccomp":{"deny":[[syscall, "EPERM"]...], "socket_allow":[families...],
 *               "socketpair_unix", "deny_clone_ns", "deny_tty_inject", "socket_errno"},
 *    "limits":{"timeout_ms","output_bytes","nofile","core_bytes","scan_depth",
 *              "scan_entries"}}
 * Host-specific text is written symbolically so the digest is the same on every host:
 *   - every '$' of host text is doubled ("$$"), so a literal "${home}" in a value can
 *     never collide with a rewritten root;
 *   - a clean absolute path equal to or below a root is written "${root}" + the rest,
 *     choosing the deepest matching root (workspace and scratch usually live under home
 *     or tmp); on a tie the first of workspace, scratch, home, tmp wins; a root "/" is
 *     never used (it would rewrite every path);
 *   - env `set` values are split at ':' and each element is rewritten like a path
 *     (HOME=<scratch>/home, PATH=<scratch>/bin:/usr/bin).
 * Provenance, the policy source file, the `discovered` label and the roots themselves are
 * not part of it: moving a line in a policy or running in another workspace keeps the
 * digest. Discovered rules are encoded like any other: the digest is only taken of the
 * evaluation against the neutral host, where nothing is host-derived, so whatever is in
 * that plan is a declaration, and a label a policy author sets must not hide one.
 * Text that is not valid UTF-8 is encoded as {"base16":"<hex bytes>"} instead of a string
 * (lossless, and never equal to a string). That is the digest's own encoding: the full
 * plan (a3s_plan_json), like every JSON output, writes such text as {"base64": ...}
 * (engine/json.h).
 * Errno values are written by name ("EPERM"), or as a number when the table has no name.
 * Changing any of this changes digests: bump A3S_PLAN_VERSION when you do. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <nettle/sha2.h>

#include "json.h"
#include "plan_internal.h"
#include "util.h"

#define CANON_FLAGS (JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII)

/* ---------------------------------------------------------------- JSON helpers */

/* Canonical form only (the digest input, so it keeps its encoding): a JSON string for
 * arbitrary bytes, the string itself when it is valid UTF-8, else {"base16": hex}
 * (lossless; jansson only holds UTF-8). NULL text -> null. */
static json_t *jtext(const char *s)
{
    if (!s)
        return json_null();
    size_t n = strlen(s);
    if (a3s_json_is_utf8(s, n))
        return json_stringn_nocheck(s, n); /* NULL now only means ENOMEM */
    char *hex = malloc(n * 2 + 1);
    if (!hex)
        return NULL;
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)s[i]);
    json_t *j = json_pack("{s:s}", "base16", hex);
    free(hex);
    return j;
}

/* Checked building (engine/json.h): a failed allocation fails the whole document. */
static int oset(json_t *o, const char *k, json_t *v)
{
    return a3s_json_set(o, k, v);
}

static int apush(json_t *a, json_t *v)
{
    return a3s_json_push(a, v);
}

/* Push `v` into `a` when `ok` (v was fully built), else drop it; -1 on any failure. */
static int push_built(json_t *a, json_t *v, bool ok)
{
    if (!ok) {
        json_decref(v);
        return -1;
    }
    return apush(a, v);
}

/* Errno by name when the table has one, else the number (still unambiguous). */
static json_t *jerrno(int e)
{
    const char *n = a3s_errno_name(e);
    return n ? json_string(n) : json_integer(e);
}

/* Full plan only: provenance is host text (a policy file path). */
static json_t *jprov(const a3s_prov *pv)
{
    char pb[1024];
    return a3s_json_cstr(prov_str(pv, pb, sizeof pb));
}


/* ---------------------------------------------------------------- symbolic text */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->failed = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* Host text with every '$' doubled, so "${...}" only ever comes from a root. */
static void sb_add_escaped(sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '$')
            sb_add(b, "$$", 2);
        else
            sb_add(b, s + i, 1);
    }
}

/* Append one element (a path or any text) written symbolically. */
static void sb_add_symbolic(sbuf *b, const a3s_plan *p, const char *s, size_t n)
{
    const char *roots[4] = {p->workspace, p->scratch, p->home, p->tmp};
    static const char *const tok[4] = {"${workspace}", "${scratch}", "${home}", "${tmp}"};
    char *elem = strndup(s, n);
    if (!elem) {
        b->failed = true;
        return;
    }
    int best = -1;
    size_t bestlen = 0;
    if (a3s_path_is_clean(elem)) {
        for (int i = 0; i < 4; i++) {
            if (!roots[i] || !a3s_path_is_clean(roots[i]) || strcmp(roots[i], "/") == 0)
                continue;
            size_t rl = strlen(roots[i]);
            /* Deepest root wins; strict '>' keeps the listed order on ties. */
            if (a3s_path_within(elem, roots[i]) && (best < 0 || rl > bestlen)) {
                best = i;
                bestlen = rl;
            }
        }
    }
    if (best >= 0) {
        sb_add(b, tok[best], strlen(tok[best]));
        sb_add_escaped(b, elem + bestlen, n - bestlen);
    } else {
        sb_add_escaped(b, elem, n);
    }
    free(elem);
}

static json_t *jsymbolic_path(const a3s_plan *p, const char *path)
{
    if (!path)
        return json_null();
    sbuf b = {0};
    sb_add(&b, "", 0);
    sb_add_symbolic(&b, p, path, strlen(path));
    json_t *j = b.failed ? NULL : jtext(b.s);
    free(b.s);
    return j;
}

/* Values are ':'-separated lists (PATH-like); each element is rewritten on its own. */
static json_t *jsymbolic_value(const a3s_plan *p, const char *v)
{
    if (!v)
        return json_null();
    sbuf b = {0};
    sb_add(&b, "", 0);
    for (const char *s = v;;) {
        const char *c = strchr(s, ':');
        size_t n = c ? (size_t)(c - s) : strlen(s);
        sb_add_symbolic(&b, p, s, n);
        if (!c)
            break;
        sb_add(&b, ":", 1);
        s = c + 1;
    }
    json_t *j = b.failed ? NULL : jtext(b.s);
    free(b.s);
    return j;
}

/* ---------------------------------------------------------------- canonical form */

static json_t *canon_names(const a3s_name_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->n; i++)
        if (apush(a, jtext(l->v[i].name)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *canon_fs(const a3s_plan *p)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        json_t *o = json_object();
        bool ok = oset(o, "kind", json_string(a3s_fs_kind_name(r->kind))) == 0 &&
                  oset(o, "path", jsymbolic_path(p, r->path)) == 0 &&
                  oset(o, "optional", json_boolean(r->optional)) == 0 &&
                  /* only when declared, so plans without it keep their digests */
                  (!r->broaden || oset(o, "broaden", json_true()) == 0);
        if (push_built(a, o, ok) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *canon_env(const a3s_plan *p)
{
    const a3s_env_plan *ep = &p->env;
    json_t *o = json_object();
    json_t *set = json_array();
    if (oset(o, "keep", canon_names(&ep->keep)) < 0 ||
        oset(o, "keep_prefix", canon_names(&ep->keep_prefix)) < 0 ||
        oset(o, "strip", canon_names(&ep->strip)) < 0 ||
        oset(o, "strip_prefix", canon_names(&ep->strip_prefix)) < 0)
        goto fail;
    for (size_t i = 0; i < ep->nset; i++) {
        json_t *pair = json_array();
        bool ok = apush(pair, jtext(ep->set[i].name)) == 0 &&
                  apush(pair, jsymbolic_value(p, ep->set[i].value)) == 0;
        if (push_built(set, pair, ok) < 0)
            goto fail;
    }
    if (oset(o, "set", set) < 0) {
        set = NULL;
        goto fail;
    }
    return o;
fail:
    json_decref(set);
    json_decref(o);
    return NULL;
}

/* The seccomp section: canonical (deny rules as [syscall, errno] pairs) or full (objects
 * with the errno number and the provenance of each rule). */
static json_t *seccomp_obj(const a3s_seccomp_plan *sp, bool full)
{
    json_t *o = json_object(), *deny = json_array(), *fam = json_array();
    for (size_t i = 0; i < sp->ndeny; i++) {
        json_t *r;
        bool ok;
        if (full) {
            r = json_object();
            ok = oset(r, "syscall", a3s_json_cstr(sp->deny[i].syscall)) == 0 &&
                 oset(r, "errno", jerrno(sp->deny[i].errnum)) == 0 &&
                 oset(r, "errnum", json_integer(sp->deny[i].errnum)) == 0 &&
                 oset(r, "from", jprov(&sp->deny[i].prov)) == 0;
        } else {
            r = json_array();
            ok = apush(r, jtext(sp->deny[i].syscall)) == 0 &&
                 apush(r, jerrno(sp->deny[i].errnum)) == 0;
        }
        if (push_built(deny, r, ok) < 0)
            goto fail;
    }
    for (size_t i = 0; i < sp->nsocket_allow; i++)
        if (apush(fam, json_integer(sp->socket_allow[i])) < 0)
            goto fail;
    {
        int rc = oset(o, "deny", deny);
        deny = NULL;
        if (rc < 0)
            goto fail;
        rc = oset(o, "socket_allow", fam);
        fam = NULL;
        if (rc < 0)
            goto fail;
    }
    if (oset(o, "socketpair_unix", json_boolean(sp->socketpair_unix)) < 0 ||
        oset(o, "deny_clone_ns", json_boolean(sp->deny_clone_ns)) < 0 ||
        oset(o, "deny_tty_inject", json_boolean(sp->deny_tty_inject)) < 0 ||
        oset(o, "socket_errno", jerrno(sp->socket_errnum)) < 0 ||
        (full && oset(o, "from", jprov(&sp->prov)) < 0))
        goto fail;
    return o;
fail:
    json_decref(deny);
    json_decref(fam);
    json_decref(o);
    return NULL;
}

static json_t *limits_obj(const a3s_limits *l)
{
    json_t *o = json_object();
    if (oset(o, "timeout_ms", json_integer(l->timeout_ms)) < 0 ||
        oset(o, "output_bytes", json_integer(l->output_bytes)) < 0 ||
        oset(o, "nofile", json_integer(l->nofile)) < 0 ||
        oset(o, "core_bytes", json_integer(l->core_bytes)) < 0 ||
        oset(o, "scan_depth", json_integer(l->scan_depth)) < 0 ||
        oset(o, "scan_entries", json_integer(l->scan_entries)) < 0) {
        json_decref(o);
        return NULL;
    }
    /* Quotas only when set, so plans without them keep their digests. */
    const struct {
        const char *k;
        int64_t v;
    } q[] = {{"processes", l->processes},
             {"memory_bytes", l->memory_bytes},
             {"cpu_millicores", l->cpu_millicores},
             {"file_size_bytes", l->file_size_bytes}};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        if (q[i].v && oset(o, q[i].k, json_integer(q[i].v)) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static json_t *jnetwork(int mode)
{
    /* Unknown modes (refused by validation) still encode distinctly. */
    return mode == A3S_NET_NONE ? json_string("none") : json_integer(mode);
}

char *a3s_plan_canonical(const a3s_plan *p)
{
    if (!p)
        return NULL;
    json_t *o = json_object();
    char *out = NULL;
    if (oset(o, "a3s_plan_version", json_integer(A3S_PLAN_VERSION)) < 0 ||
        oset(o, "name", jtext(p->name)) < 0 || oset(o, "network", jnetwork(p->network)) < 0 ||
        oset(o, "fs", canon_fs(p)) < 0 ||
        oset(o, "protect_dirs", canon_names(&p->protect_dirs)) < 0 ||
        oset(o, "protect_files", canon_names(&p->protect_files)) < 0 ||
        oset(o, "secret_prefixes", canon_names(&p->secret_prefixes)) < 0 ||
        oset(o, "scan_skip", canon_names(&p->scan_skip)) < 0 ||
        oset(o, "env", canon_env(p)) < 0 || oset(o, "seccomp", seccomp_obj(&p->seccomp, false)) < 0 ||
        oset(o, "limits", limits_obj(&p->limits)) < 0 ||
        /* Only when set, so that plans without it keep their digests. */
        (p->allow_host_root && oset(o, "allow_host_root", json_true()) < 0))
        goto out;
    out = json_dumps(o, CANON_FLAGS);
out:
    json_decref(o);
    return out;
}

void a3s_sha256_hex(const void *data, size_t len, char out[65])
{
    struct sha256_ctx ctx;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, data);
    sha256_digest(&ctx, sizeof d, d);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof d; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}

int a3s_plan_digest(const a3s_plan *p, char out[65], a3s_error *err)
{
    char *canon = a3s_plan_canonical(p);
    if (!canon)
        return a3s_fail(err, A3S_ERR_INTERNAL, "plan: cannot encode the canonical plan");
    a3s_sha256_hex(canon, strlen(canon), out);
    free(canon);
    return 0;
}

/* ---------------------------------------------------------------- full plan dump */

static json_t *full_names(const a3s_name_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->n; i++) {
        json_t *o = json_object();
        bool ok = oset(o, "name", a3s_json_cstr(l->v[i].name)) == 0 &&
                  oset(o, "from", jprov(&l->v[i].prov)) == 0;
        if (push_built(a, o, ok) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *full_fs(const a3s_plan *p)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        json_t *o = json_object();
        bool ok = oset(o, "kind", json_string(a3s_fs_kind_name(r->kind))) == 0 &&
                  oset(o, "path", a3s_json_cstr(r->path)) == 0 &&
                  oset(o, "optional", json_boolean(r->optional)) == 0 &&
                  oset(o, "broaden", json_boolean(r->broaden)) == 0 &&
                  oset(o, "discovered", json_boolean(r->discovered)) == 0 &&
                  oset(o, "from", jprov(&r->prov)) == 0;
        if (push_built(a, o, ok) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *full_env(const a3s_env_plan *ep)
{
    json_t *o = json_object(), *set = json_array();
    if (oset(o, "keep", full_names(&ep->keep)) < 0 ||
        oset(o, "keep_prefix", full_names(&ep->keep_prefix)) < 0 ||
        oset(o, "strip", full_names(&ep->strip)) < 0 ||
        oset(o, "strip_prefix", full_names(&ep->strip_prefix)) < 0)
        goto fail;
    for (size_t i = 0; i < ep->nset; i++) {
        json_t *kv = json_object();
        bool ok = oset(kv, "name", a3s_json_cstr(ep->set[i].name)) == 0 &&
                  oset(kv, "value", a3s_json_cstr(ep->set[i].value)) == 0 &&
                  oset(kv, "discovered", json_boolean(ep->set[i].discovered)) == 0 &&
                  oset(kv, "from", jprov(&ep->set[i].prov)) == 0;
        if (push_built(set, kv, ok) < 0)
            goto fail;
    }
    {
        int rc = oset(o, "set", set);
        set = NULL;
        if (rc < 0)
            goto fail;
    }
    return o;
fail:
    json_decref(set);
    json_decref(o);
    return NULL;
}

char *a3s_plan_json(const a3s_plan *p, const char *extra_json)
{
    if (!p)
        return NULL;
    json_t *extra = NULL;
    if (extra_json) {
        /* The caller hands us its own JSON object; anything else is a bug on its side
         * and yields NULL rather than a dump silently missing those members. */
        extra = json_loads(extra_json, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(extra)) {
            json_decref(extra);
            return NULL;
        }
    }
    char digest[65];
    json_t *o = json_object(), *roots = json_object(), *limits = limits_obj(&p->limits);
    char *out = NULL;
    if (oset(roots, "workspace", a3s_json_cstr(p->workspace)) < 0 ||
        oset(roots, "scratch", a3s_json_cstr(p->scratch)) < 0 ||
        oset(roots, "home", a3s_json_cstr(p->home)) < 0 ||
        oset(roots, "tmp", a3s_json_cstr(p->tmp)) < 0 ||
        oset(limits, "from", jprov(&p->limits.prov)) < 0)
        goto out;
    if (a3s_plan_digest(p, digest, NULL) < 0)
        goto out;
    {
        int rc = oset(o, "roots", roots);
        roots = NULL;
        if (rc < 0)
            goto out;
        rc = oset(o, "limits", limits);
        limits = NULL;
        if (rc < 0)
            goto out;
    }
    if (oset(o, "a3s_plan_version", json_integer(A3S_PLAN_VERSION)) < 0 ||
        oset(o, "name", a3s_json_cstr(p->name)) < 0 ||
        oset(o, "source", a3s_json_cstr(p->source)) < 0 ||
        oset(o, "digest", json_string(digest)) < 0 ||
        oset(o, "network", jnetwork(p->network)) < 0 ||
        oset(o, "network_from", jprov(&p->network_prov)) < 0 ||
        oset(o, "allow_host_root", json_boolean(p->allow_host_root)) < 0 ||
        oset(o, "fs", full_fs(p)) < 0 ||
        oset(o, "protect_dirs", full_names(&p->protect_dirs)) < 0 ||
        oset(o, "protect_files", full_names(&p->protect_files)) < 0 ||
        oset(o, "secret_prefixes", full_names(&p->secret_prefixes)) < 0 ||
        oset(o, "scan_skip", full_names(&p->scan_skip)) < 0 ||
        oset(o, "env", full_env(&p->env)) < 0 || oset(o, "seccomp", seccomp_obj(&p->seccomp, true)) < 0)
        goto out;
    if (extra && json_object_update(o, extra) < 0)
        goto out;
    out = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
out:
    json_decref(roots);
    json_decref(limits);
    json_decref(extra);
    json_decref(o);
    return out;
}
