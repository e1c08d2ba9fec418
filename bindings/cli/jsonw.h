/* JSON text written by hand, for the session client (session_client.c), which is also
 * linked into a3s-sandbox-exec without jansson: strings escaped as jansson's compact
 * output escapes them, and bytes that are not UTF-8 encoded as json_text.h says. */
#ifndef A3S_CLI_JSONW_H
#define A3S_CLI_JSONW_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* The text so far (an allocation failure: cli_jw_take gives NULL). */
typedef a3s_sbuf cli_jw;

/* Append text as it is (JSON punctuation, numbers, true/false/null). */
void cli_jw_raw(cli_jw *w, const char *text);
/* Append s as a JSON string. false (nothing appended) when s is not valid UTF-8. */
bool cli_jw_str(cli_jw *w, const char *s);
/* Append s as a JSON string, or as {"base64": ...} when it is not valid UTF-8. */
void cli_jw_bytes(cli_jw *w, const char *s);
/* The text (malloc'd, NUL-terminated; the writer is emptied), or NULL on ENOMEM. */
char *cli_jw_take(cli_jw *w);

#endif
