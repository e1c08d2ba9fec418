/* JSON text written by hand (jsonw.h). */
#include "jsonw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_text.h"

static void put(cli_jw *w, const char *p, size_t n)
{
    if (w->oom)
        return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *b = realloc(w->buf, cap);
        if (!b) {
            w->oom = true;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

void cli_jw_raw(cli_jw *w, const char *text)
{
    put(w, text, strlen(text));
}

bool cli_jw_str(cli_jw *w, const char *s)
{
    size_t n = strlen(s);
    if (!a3s_json_is_utf8(s, n))
        return false;
    put(w, "\"", 1);
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put(w, s + from, i - from);
        from = i + 1;
        char esc[8];
        switch (c) {
        case '"': put(w, "\\\"", 2); break;
        case '\\': put(w, "\\\\", 2); break;
        case '\b': put(w, "\\b", 2); break;
        case '\f': put(w, "\\f", 2); break;
        case '\n': put(w, "\\n", 2); break;
        case '\r': put(w, "\\r", 2); break;
        case '\t': put(w, "\\t", 2); break;
        default:
            snprintf(esc, sizeof esc, "\\u%04X", c);
            put(w, esc, 6);
        }
    }
    put(w, s + from, n - from);
    put(w, "\"", 1);
    return true;
}

void cli_jw_bytes(cli_jw *w, const char *s)
{
    if (cli_jw_str(w, s))
        return;
    char *enc = a3s_json_base64_encode(s, strlen(s));
    if (!enc) {
        w->oom = true;
        return;
    }
    put(w, "{\"base64\":\"", 11);
    put(w, enc, strlen(enc));
    put(w, "\"}", 2);
    free(enc);
}

char *cli_jw_take(cli_jw *w)
{
    char *b = w->oom ? NULL : w->buf;
    if (w->oom)
        free(w->buf);
    *w = (cli_jw){0};
    return b;
}
