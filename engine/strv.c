/* Growable strings and NULL-terminated string vectors (util.h: a3s_sbuf, a3s_strv), in a
 * file of their own so that the session client links them without the rest of util.c. */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int strv_take(a3s_strv *sv, char *s)
{
    if (!s)
        return -1;
    if (sv->n + 2 > sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 16;
        char **v = realloc(sv->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return -1;
        }
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
    return 0;
}

int a3s_strv_push(a3s_strv *sv, const char *s)
{
    return strv_take(sv, strdup(s));
}

int a3s_strv_pushf(a3s_strv *sv, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    return strv_take(sv, s);
}

void a3s_strv_free(a3s_strv *sv)
{
    if (!sv)
        return;
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    sv->v = NULL;
    sv->n = sv->cap = 0;
}

void a3s_sbuf_add(a3s_sbuf *b, const char *s, size_t n)
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

void a3s_sbuf_adds(a3s_sbuf *b, const char *s)
{
    a3s_sbuf_add(b, s, strlen(s));
}
