/* JSON text for host-derived bytes, checked building, and the refusal object.
 *
 * Paths, argv entries, environment entries and names are bytes; JSON strings are
 * Unicode. jansson's json_string() returns NULL for text that is not valid UTF-8 and
 * json_object_set_new() then fails silently, which drops the member. Every producer
 * writes host-derived text through a3s_json_str instead:
 *   valid UTF-8        -> a JSON string;
 *   anything else      -> {"base64": "<RFC 4648 standard base64, padded, of the bytes>"}
 * (lossless, and never equal to a string). Builders use a3s_json_set / a3s_json_push,
 * which fail (instead of dropping) on any allocation failure, so a producer either
 * returns the whole document or nothing. */
#ifndef A3S_JSON_H
#define A3S_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "a3s_sandbox.h"
#include "json_text.h"

/* s[0..n) as a JSON string, or {"base64": ...} when it is not valid UTF-8. NULL s gives
 * json null. Returns NULL only on ENOMEM. */
json_t *a3s_json_str(const char *s, size_t n);
/* The same for a NUL-terminated string (NULL: json null). */
json_t *a3s_json_cstr(const char *s);

/* Set o[key] / append to a: steal v in every case; -1 when o/a or v is NULL (an earlier
 * allocation failed) or jansson fails. */
int a3s_json_set(json_t *o, const char *key, json_t *v);
int a3s_json_push(json_t *a, json_t *v);

/* The bytes a3s_json_str encoded: a string's own, or the decoded base64 object's
 * (malloc'd, NUL-terminated, length in *n). NULL when v is neither (errno EINVAL) or
 * on ENOMEM. */
char *a3s_json_bytes(const json_t *v, size_t *n);

/* The name of an enum a3s_status value: "invalid", "policy", "setup", "internal",
 * "aborted" ("internal" for anything unknown, "ok" for A3S_OK). */
const char *a3s_json_status_name(int code);

/* {"error":{"code":code,"message":message}} as compact text, the message written with
 * a3s_json_str (malloc'd; NULL on ENOMEM). */
char *a3s_json_error(const char *code, const char *message);

#endif
