/* The plan in JSON: one walker over the model writes both of its forms.
 *
 * The canonical form is the input of the digest (plan_digest.c); the full form is the
 * plan as `a3s-sandbox plan` shows it (plan_json.c). Each field of the model is visited
 * once, below, and says there how each form writes it: a declaration is in both, while
 * provenance ("from"), labels ("discovered"), the policy source and the roots are in the
 * full form only. A field added to the model is added here, once, for both forms
 * (spec/unit/test_plan_drift.c checks that changing any field shows in the full plan, and in
 * the digest unless it is one of those).
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
 * Changing any of this changes digests: bump A3S_PLAN_VERSION when you do.
 *
 * Full form (a3s_plan_json adds "digest" and the caller's members): the same members,
 * host text as it is (a3s_json_cstr: {"base64": ...} for text that is not UTF-8), and
 *   "source", "network_from", "roots":{"workspace","scratch","home","tmp"};
 *   fs rules {"kind","path","optional","broaden","discovered","from"};
 *   names {"name","from"}; env set {"name","value","discovered","from"};
 *   seccomp deny rules {"syscall","errno","errnum","from"}, and seccomp "from";
 *   limits "from"; "allow_host_root" always (a boolean).
 * Not in either form: host_root_prov (where allow_host_root was set), and the `frozen`
 * flags (state of the plan object, not content). */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json.h"
#include "plan_internal.h"
#include "util.h"

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

/* Full form only: provenance is host text (a policy file path). */
static json_t *jprov(const a3s_prov *pv)
{
    char pb[1024];
    return a3s_json_cstr(prov_str(pv, pb, sizeof pb));
}

/* ---------------------------------------------------------------- symbolic text */

/* Host text with every '$' doubled, so "${...}" only ever comes from a root. */
static void sb_add_escaped(a3s_sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '$')
            a3s_sbuf_add(b, "$$", 2);
        else
            a3s_sbuf_add(b, s + i, 1);
    }
}

/* Append one element (a path or any text) written symbolically. */
static void sb_add_symbolic(a3s_sbuf *b, const a3s_plan *p, const char *s, size_t n)
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
        a3s_sbuf_add(b, tok[best], strlen(tok[best]));
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
    a3s_sbuf b = {0};
    a3s_sbuf_add(&b, "", 0);
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
    a3s_sbuf b = {0};
    a3s_sbuf_add(&b, "", 0);
    for (const char *s = v;;) {
        const char *c = strchr(s, ':');
        size_t n = c ? (size_t)(c - s) : strlen(s);
        sb_add_symbolic(&b, p, s, n);
        if (!c)
            break;
        a3s_sbuf_add(&b, ":", 1);
        s = c + 1;
    }
    json_t *j = b.failed ? NULL : jtext(b.s);
    free(b.s);
    return j;
}

/* ---------------------------------------------------------------- values, per form */

/* Declared text (names, syscalls): the digest's own encoding, or host text. */
static json_t *jstr(bool full, const char *s)
{
    return full ? a3s_json_cstr(s) : jtext(s);
}

/* A path: symbolic in the canonical form, as it is in the full one. */
static json_t *jpath(const a3s_plan *p, bool full, const char *s)
{
    return full ? a3s_json_cstr(s) : jsymbolic_path(p, s);
}

/* A ':'-separated value (env set): symbolic element by element, or as it is. */
static json_t *jvalue(const a3s_plan *p, bool full, const char *s)
{
    return full ? a3s_json_cstr(s) : jsymbolic_value(p, s);
}

/* Full form only: where a rule came from (moving a line in a policy keeps the digest). */
static int put_prov(json_t *o, const char *k, const a3s_prov *pv, bool full)
{
    return full ? oset(o, k, jprov(pv)) : 0;
}

/* Full form only: a label, which changes nothing that is enforced. */
static int put_label(json_t *o, const char *k, bool v, bool full)
{
    return full ? oset(o, k, json_boolean(v)) : 0;
}

/* Full form only: host text that is not a declaration (the policy file, the roots). */
static int put_host(json_t *o, const char *k, const char *s, bool full)
{
    return full ? oset(o, k, a3s_json_cstr(s)) : 0;
}

/* A declaration that came after version 1: in the canonical form only when set, so that
 * plans without it keep their digests; always in the full form. */
static int put_late_flag(json_t *o, const char *k, bool v, bool full)
{
    if (full)
        return oset(o, k, json_boolean(v));
    return v ? oset(o, k, json_true()) : 0;
}

static json_t *jnetwork(int mode)
{
    /* Unknown modes (refused by validation) still encode distinctly. */
    return mode == A3S_NET_NONE ? json_string("none") : json_integer(mode);
}

/* ---------------------------------------------------------------- sections */

/* Canonical: [name...]. Full: [{"name","from"}...]. */
static json_t *names_arr(const a3s_name_list *l, bool full)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->n; i++) {
        const a3s_name *e = &l->v[i];
        json_t *v;
        bool ok = true;
        if (full) {
            v = json_object();
            ok = oset(v, "name", jstr(full, e->name)) == 0 &&
                 put_prov(v, "from", &e->prov, full) == 0;
        } else {
            v = jstr(full, e->name);
        }
        if (push_built(a, v, ok) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *fs_rule_obj(const a3s_plan *p, const a3s_fs_rule *r, bool full)
{
    json_t *o = json_object();
    if (oset(o, "kind", json_string(a3s_fs_kind_name(r->kind))) < 0 ||
        oset(o, "path", jpath(p, full, r->path)) < 0 ||
        oset(o, "optional", json_boolean(r->optional)) < 0 ||
        put_late_flag(o, "broaden", r->broaden, full) < 0 ||
        put_label(o, "discovered", r->discovered, full) < 0 ||
        put_prov(o, "from", &r->prov, full) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Every rule, in declaration order (the order is part of the digest), then the `more`
 * rules that are enforced with the plan without being in it (full form only). */
static json_t *fs_arr(const a3s_plan *p, bool full, const a3s_fs_rule *more, size_t nmore)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < p->nfs + nmore; i++) {
        const a3s_fs_rule *r = i < p->nfs ? &p->fs[i] : &more[i - p->nfs];
        if (apush(a, fs_rule_obj(p, r, full)) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Canonical set entries: [name, value]. Full: {"name","value","discovered","from"}. */
static json_t *env_obj(const a3s_plan *p, bool full)
{
    const a3s_env_plan *ep = &p->env;
    json_t *o = json_object(), *set = json_array();
    if (oset(o, "keep", names_arr(&ep->keep, full)) < 0 ||
        oset(o, "keep_prefix", names_arr(&ep->keep_prefix, full)) < 0 ||
        oset(o, "strip", names_arr(&ep->strip, full)) < 0 ||
        oset(o, "strip_prefix", names_arr(&ep->strip_prefix, full)) < 0)
        goto fail;
    for (size_t i = 0; i < ep->nset; i++) {
        const a3s_kv *kv = &ep->set[i];
        json_t *v;
        bool ok;
        if (full) {
            v = json_object();
            ok = oset(v, "name", jstr(full, kv->name)) == 0 &&
                 oset(v, "value", jvalue(p, full, kv->value)) == 0 &&
                 put_label(v, "discovered", kv->discovered, full) == 0 &&
                 put_prov(v, "from", &kv->prov, full) == 0;
        } else {
            v = json_array();
            ok = apush(v, jstr(full, kv->name)) == 0 && apush(v, jvalue(p, full, kv->value)) == 0;
        }
        if (push_built(set, v, ok) < 0)
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

/* Canonical deny rules: [syscall, errno]. Full: {"syscall","errno","errnum","from"}. */
static json_t *seccomp_obj(const a3s_seccomp_plan *sp, bool full)
{
    json_t *o = json_object(), *deny = json_array(), *fam = json_array();
    for (size_t i = 0; i < sp->ndeny; i++) {
        const a3s_sc_rule *d = &sp->deny[i];
        json_t *r;
        bool ok;
        if (full) {
            r = json_object();
            ok = oset(r, "syscall", jstr(full, d->syscall)) == 0 &&
                 oset(r, "errno", jerrno(d->errnum)) == 0 &&
                 oset(r, "errnum", json_integer(d->errnum)) == 0 &&
                 put_prov(r, "from", &d->prov, full) == 0;
        } else {
            r = json_array();
            ok = apush(r, jstr(full, d->syscall)) == 0 && apush(r, jerrno(d->errnum)) == 0;
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
        put_prov(o, "from", &sp->prov, full) < 0)
        goto fail;
    return o;
fail:
    json_decref(deny);
    json_decref(fam);
    json_decref(o);
    return NULL;
}

static json_t *limits_obj(const a3s_limits *l, bool full)
{
    json_t *o = json_object();
    if (oset(o, "timeout_ms", json_integer(l->timeout_ms)) < 0 ||
        oset(o, "output_bytes", json_integer(l->output_bytes)) < 0 ||
        oset(o, "nofile", json_integer(l->nofile)) < 0 ||
        oset(o, "core_bytes", json_integer(l->core_bytes)) < 0 ||
        oset(o, "scan_depth", json_integer(l->scan_depth)) < 0 ||
        oset(o, "scan_entries", json_integer(l->scan_entries)) < 0 ||
        put_prov(o, "from", &l->prov, full) < 0) {
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

/* Full form only: the canonical form writes the roots into the paths instead. */
static int put_roots(json_t *o, const a3s_plan *p, bool full)
{
    if (!full)
        return 0;
    json_t *r = json_object();
    if (put_host(r, "workspace", p->workspace, full) < 0 ||
        put_host(r, "scratch", p->scratch, full) < 0 || put_host(r, "home", p->home, full) < 0 ||
        put_host(r, "tmp", p->tmp, full) < 0) {
        json_decref(r);
        return -1;
    }
    return oset(o, "roots", r);
}

json_t *a3s_plan_encode(const a3s_plan *p, enum a3s_plan_form form, const a3s_fs_rule *more,
                        size_t nmore)
{
    bool full = form == A3S_PLAN_FULL;
    /* The canonical form is of the plan alone: what the digest names is what it holds. */
    if (!p || (nmore && (!full || !more)))
        return NULL;
    json_t *o = json_object();
    if (oset(o, "a3s_plan_version", json_integer(A3S_PLAN_VERSION)) < 0 ||
        oset(o, "name", jstr(full, p->name)) < 0 || put_host(o, "source", p->source, full) < 0 ||
        oset(o, "network", jnetwork(p->network)) < 0 ||
        put_prov(o, "network_from", &p->network_prov, full) < 0 ||
        put_late_flag(o, "allow_host_root", p->allow_host_root, full) < 0 ||
        oset(o, "fs", fs_arr(p, full, more, nmore)) < 0 ||
        oset(o, "protect_dirs", names_arr(&p->protect_dirs, full)) < 0 ||
        oset(o, "protect_files", names_arr(&p->protect_files, full)) < 0 ||
        oset(o, "secret_prefixes", names_arr(&p->secret_prefixes, full)) < 0 ||
        oset(o, "scan_skip", names_arr(&p->scan_skip, full)) < 0 ||
        oset(o, "env", env_obj(p, full)) < 0 ||
        oset(o, "seccomp", seccomp_obj(&p->seccomp, full)) < 0 ||
        oset(o, "limits", limits_obj(&p->limits, full)) < 0 || put_roots(o, p, full) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
