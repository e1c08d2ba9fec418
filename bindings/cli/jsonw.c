/* JSON text written by hand (jsonw.h). */
#include "jsonw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_text.h"

void cli_jw_raw(cli_jw *w, const char *text)
{
    a3s_sbuf_add(w, text, strlen(text));
}

bool cli_jw_str(cli_jw *w, const char *s)
{
    size_t n = strlen(s);
    if (!a3s_json_is_utf8(s, n))
        return false;
    a3s_sbuf_add(w, "\"", 1);
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        a3s_sbuf_add(w, s + from, i - from);
        from = i + 1;
        char esc[8];
        switch (c) {
        case '"': a3s_sbuf_add(w, "\\\"", 2); break;
        case '\\': a3s_sbuf_add(w, "\\\\", 2); break;
        case '\b': a3s_sbuf_add(w, "\\b", 2); break;
        case '\f': a3s_sbuf_add(w, "\\f", 2); break;
        case '\n': a3s_sbuf_add(w, "\\n", 2); break;
        case '\r': a3s_sbuf_add(w, "\\r", 2); break;
        case '\t': a3s_sbuf_add(w, "\\t", 2); break;
        default:
            snprintf(esc, sizeof esc, "\\u%04X", c);
            a3s_sbuf_add(w, esc, 6);
        }
    }
    a3s_sbuf_add(w, s + from, n - from);
    a3s_sbuf_add(w, "\"", 1);
    return true;
}

void cli_jw_bytes(cli_jw *w, const char *s)
{
    if (cli_jw_str(w, s))
        return;
    char *enc = a3s_json_base64_encode(s, strlen(s));
    if (!enc) {
        w->failed = true;
        return;
    }
    a3s_sbuf_add(w, "{\"base64\":\"", 11);
    a3s_sbuf_add(w, enc, strlen(enc));
    a3s_sbuf_add(w, "\"}", 2);
    free(enc);
}

char *cli_jw_take(cli_jw *w)
{
    char *b = w->failed ? NULL : w->s;
    if (w->failed)
        free(w->s);
    *w = (cli_jw){0};
    return b;
}
