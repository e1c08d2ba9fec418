/* The child environment (policies/README.md, "Environment"), driven by the plan's env section.
 *
 * Composition is done on borrowed slices of the input strings: every candidate entry
 * gets a precedence rank, one sort groups the names, and the highest rank of each name
 * wins. Strings are copied only for the final output. */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool a3s_env_name_valid(const char *name, size_t len)
{
    if (!name || len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        bool alpha = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
        if (!alpha && !(i > 0 && ch >= '0' && ch <= '9'))
            return false;
    }
    return true;
}

/* Printable, bounded form of an entry's name for error messages: the name comes from the
 * caller and may hold control bytes or be huge. Values never reach this function. */
static void describe_name(char *dst, size_t cap, const char *name, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const size_t max_shown = 128;
    size_t o = 0;
    for (size_t i = 0; i < len && i < max_shown && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch >= 0x20 && ch < 0x7F && ch != '\\') {
            dst[o++] = (char)ch;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[ch >> 4];
            dst[o++] = hex[ch & 0xF];
        }
    }
    if (len > max_shown && o + 4 < cap) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

/* A C string cannot carry an embedded NUL, so the original's "key or value contains NUL"
 * refusal cannot arise here; a NUL simply ends the entry. Values are otherwise free-form
 * (newlines included) and are never echoed back. */
int a3s_env_check_entry(const char *entry, a3s_error *err)
{
    static const char prefix[] = "invalid explicit command environment entry";
    if (!entry)
        return a3s_fail(err, A3S_ERR_INVALID, "%s: (null entry)", prefix);
    const char *eq = strchr(entry, '=');
    char shown[4 * 128 + 8];
    if (!eq) {
        /* Without '=' there is no name/value split: the text may be a value passed by
         * mistake, so show it only when it is a well-formed name. */
        size_t n = strlen(entry);
        if (a3s_env_name_valid(entry, n))
            describe_name(shown, sizeof shown, entry, n);
        else
            snprintf(shown, sizeof shown, "(unnamed)");
        return a3s_fail(err, A3S_ERR_INVALID, "%s: %s (expected NAME=VALUE, no '=' found)",
                        prefix, shown);
    }
    size_t n = (size_t)(eq - entry);
    if (n == 0)
        return a3s_fail(err, A3S_ERR_INVALID, "%s: \"\" (empty name)", prefix);
    if (!a3s_env_name_valid(entry, n)) {
        describe_name(shown, sizeof shown, entry, n);
        return a3s_fail(err, A3S_ERR_INVALID,
                        "%s: %s (name must match [A-Za-z_][A-Za-z0-9_]*)", prefix, shown);
    }
    return 0;
}

/* One candidate entry, borrowed from the inputs. */
typedef struct env_ent {
    const char *name;
    size_t nlen;
    const char *value; /* NUL-terminated */
    size_t rank;       /* higher wins among equal names */
} env_ent;

typedef struct env_vec {
    env_ent *v;
    size_t n, cap;
} env_vec;

static int vec_push(env_vec *ev, const char *name, size_t nlen, const char *value,
                    size_t rank)
{
    if (ev->n == ev->cap) {
        size_t cap = ev->cap ? ev->cap * 2 : 64;
        env_ent *v = realloc(ev->v, cap * sizeof *v);
        if (!v)
            return -1;
        ev->v = v;
        ev->cap = cap;
    }
    ev->v[ev->n++] = (env_ent){name, nlen, value, rank};
    return 0;
}

static unsigned char ascii_lower(unsigned char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (unsigned char)(ch - 'A' + 'a') : ch;
}

/* Case-insensitive (ASCII, locale-free) comparison of the first n bytes. */
static bool ci_equal(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ascii_lower((unsigned char)a[i]) != ascii_lower((unsigned char)b[i]))
            return false;
    return true;
}

static bool in_list(const a3s_name_list *l, const char *name, size_t nlen, bool prefix,
                    bool nocase)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *w = l->v[i].name;
        if (!w)
            continue;
        size_t wl = strlen(w);
        if (prefix ? nlen < wl : nlen != wl)
            continue;
        if (nocase ? ci_equal(name, w, wl) : memcmp(name, w, wl) == 0)
            return true;
    }
    return false;
}

static bool stripped(const a3s_env_plan *ep, const char *name, size_t nlen)
{
    return in_list(&ep->strip, name, nlen, false, true) ||
           in_list(&ep->strip_prefix, name, nlen, true, true);
}

static int ent_cmp(const void *pa, const void *pb)
{
    const env_ent *a = pa, *b = pb;
    size_t m = a->nlen < b->nlen ? a->nlen : b->nlen;
    int c = memcmp(a->name, b->name, m);
    if (c)
        return c;
    if (a->nlen != b->nlen)
        return a->nlen < b->nlen ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static size_t strv_len(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

int a3s_env_compose(const a3s_env_plan *ep, const char *const *host,
                    const char *const *explicit_env, a3s_strv *out, a3s_error *err)
{
    if (!ep || !out)
        return a3s_fail(err, A3S_ERR_INTERNAL, "environment: missing plan or output");

    /* Refuse bad explicit entries before doing any work: the whole request fails. */
    size_t nexp = strv_len(explicit_env);
    for (size_t j = 0; j < nexp; j++)
        if (a3s_env_check_entry(explicit_env[j], err) < 0)
            return -1;
    for (size_t k = 0; k < ep->nset; k++) {
        const char *nm = ep->set[k].name;
        if (!nm || !a3s_env_name_valid(nm, strlen(nm)) || !ep->set[k].value) {
            char shown[4 * 128 + 8];
            const char *what = nm ? nm : "(null)";
            describe_name(shown, sizeof shown, what, strlen(what));
            return a3s_fail(err, A3S_ERR_POLICY, "environment: invalid set entry %s", shown);
        }
    }

    /* Ranks: host entries below explicit ones below `set`. Among duplicated host names
     * the first occurrence wins (what getenv(3) returns), so host ranks count down. */
    size_t nhost = strv_len(host);
    env_vec ev = {NULL, 0, 0};
    a3s_strv tmp = {NULL, 0, 0};

    for (size_t i = 0; i < nhost; i++) {
        const char *e = host[i];
        const char *eq = strchr(e, '=');
        if (!eq || eq == e)
            continue; /* malformed host entry: no name/value */
        size_t nlen = (size_t)(eq - e);
        if (!in_list(&ep->keep, e, nlen, false, false) &&
            !in_list(&ep->keep_prefix, e, nlen, true, false))
            continue;
        if (stripped(ep, e, nlen))
            continue;
        if (vec_push(&ev, e, nlen, eq + 1, nhost - i) < 0)
            goto oom;
    }
    for (size_t j = 0; j < nexp; j++) {
        const char *e = explicit_env[j];
        const char *eq = strchr(e, '='); /* present: checked above */
        size_t nlen = (size_t)(eq - e);
        if (stripped(ep, e, nlen))
            continue;
        if (vec_push(&ev, e, nlen, eq + 1, nhost + 1 + j) < 0)
            goto oom;
    }
    /* `set` comes after stripping: it may deliberately set a stripped name (proxies). */
    for (size_t k = 0; k < ep->nset; k++) {
        const char *nm = ep->set[k].name;
        if (vec_push(&ev, nm, strlen(nm), ep->set[k].value, nhost + nexp + 1 + k) < 0)
            goto oom;
    }

    if (ev.n > 1)
        qsort(ev.v, ev.n, sizeof *ev.v, ent_cmp);
    for (size_t i = 0; i < ev.n; i++) {
        /* Sorted by (name, rank): the last of each name group has the highest rank. */
        if (i + 1 < ev.n && ev.v[i + 1].nlen == ev.v[i].nlen &&
            memcmp(ev.v[i + 1].name, ev.v[i].name, ev.v[i].nlen) == 0)
            continue;
        if (a3s_strv_pushf(&tmp, "%.*s=%s", (int)ev.v[i].nlen, ev.v[i].name,
                           ev.v[i].value) < 0)
            goto oom;
    }
    free(ev.v);

    /* Hand over only on success, so a failure leaves `out` untouched. */
    if (out->n == 0) {
        if (!tmp.v) {
            /* An empty result is still a NULL-terminated vector (usable as envp). */
            tmp.v = calloc(16, sizeof *tmp.v);
            if (!tmp.v)
                return a3s_fail(err, A3S_ERR_INTERNAL, "environment: out of memory");
            tmp.cap = 16;
        }
        free(out->v);
        *out = tmp;
        return 0;
    }
    for (size_t i = 0; i < tmp.n; i++) {
        if (a3s_strv_push(out, tmp.v[i]) < 0) {
            a3s_strv_free(&tmp);
            return a3s_fail(err, A3S_ERR_INTERNAL, "environment: out of memory");
        }
    }
    a3s_strv_free(&tmp);
    return 0;

oom:
    free(ev.v);
    a3s_strv_free(&tmp);
    return a3s_fail(err, A3S_ERR_INTERNAL, "environment: out of memory");
}
