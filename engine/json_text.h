/* JSON text without a JSON library: the UTF-8 check and base64 of json.h's encoding of
 * host-derived bytes, for code that builds its JSON by hand (the session client, which
 * is linked without jansson). */
#ifndef A3S_JSON_TEXT_H
#define A3S_JSON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* true when s[0..n) is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF; NUL bytes are valid). */
bool a3s_json_is_utf8(const char *s, size_t n);

/* Standard padded base64 of p[0..n), NUL-terminated (malloc'd; NULL on ENOMEM). */
char *a3s_json_base64_encode(const void *p, size_t n);
/* Decode standard padded base64 (no whitespace) into a malloc'd buffer, NUL-terminated
 * for convenience, length in *n. NULL with errno EINVAL on malformed input, ENOMEM. */
char *a3s_json_base64_decode(const char *s, size_t len, size_t *n);

#endif
