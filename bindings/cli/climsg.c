/* Refusal messages of the a3s-sandbox command (cli.h: json_error, die_usage, the
 * session usage), shared with a3s-sandbox-exec, which is linked without jansson: the
 * refusal object is written by hand (jsonw.h), the same text jansson's compact,
 * key-sorted output gave. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "jsonw.h"

bool json_errors;

/* The message (malloc'd), or NULL when out of memory. */
__attribute__((format(printf, 1, 0))) static char *format(const char *fmt, va_list ap)
{
    char *msg = NULL;
    return vasprintf(&msg, fmt, ap) < 0 ? NULL : msg;
}

void json_error(const char *code, const char *fmt, ...)
{
    if (!json_errors)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *msg = format(fmt, ap);
    va_end(ap);
    cli_jw w = {0};
    cli_jw_raw(&w, "{\"error\":{\"code\":");
    cli_jw_bytes(&w, code ? code : "internal");
    cli_jw_raw(&w, ",\"message\":");
    cli_jw_bytes(&w, msg ? msg : "");
    cli_jw_raw(&w, "}}");
    char *s = cli_jw_take(&w);
    if (!msg) {
        free(s);
        s = NULL;
    }
    free(msg);
    /* Out of memory still yields one object, never none. */
    fputs(s ? s : "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}", stdout);
    fputc('\n', stdout);
    free(s);
    fflush(stdout);
    json_errors = false; /* exactly one object */
}

void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = format(fmt, ap);
    va_end(ap);
    fprintf(stderr, "a3s-sandbox: %s\n(run 'a3s-sandbox --help' for usage)\n",
            msg ? msg : "invalid command line (out of memory)");
    json_error("usage", "%s", msg ? msg : "invalid command line (out of memory)");
    free(msg);
    exit(EXIT_REFUSED);
}

int cli_session_usage(const char *what, const char *arg)
{
    fprintf(stderr, "a3s-sandbox: session: %s%s%s%s\n", what, arg ? " '" : "", arg ? arg : "",
            arg ? "'" : "");
    fputs("usage: a3s-sandbox session start [--policy P] [-w DIR] [--audit FILE] "
          "[--owner PID] [--allow-host-root]\n"
          "       a3s-sandbox session exec ID [-t S] [-e N=V]... [--json] "
          "(-- PROGRAM [ARG...] | -c COMMAND)\n"
          "       a3s-sandbox session stop ID\n"
          "       a3s-sandbox session list\n",
          stderr);
    return EXIT_REFUSED;
}
