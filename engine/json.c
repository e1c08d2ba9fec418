/* JSON text for host-derived bytes (see json.h), and the result object. */
#include "json.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ building */

json_t *a3s_json_str(const char *s, size_t n)
{
    if (!s)
        return json_null();
    if (a3s_json_is_utf8(s, n))
        return json_stringn_nocheck(s, n); /* checked above: NULL now means ENOMEM */
    char *enc = a3s_json_base64_encode(s, n);
    if (!enc)
        return NULL;
    json_t *o = json_object();
    if (a3s_json_set(o, "base64", json_string_nocheck(enc)) < 0) {
        json_decref(o);
        o = NULL;
    }
    free(enc);
    return o;
}

json_t *a3s_json_cstr(const char *s)
{
    return a3s_json_str(s, s ? strlen(s) : 0);
}

/* json_object_set_new / json_array_append_new steal v even on failure (and fail on a
 * NULL v); a NULL container would leak v, so it is released here. */
int a3s_json_set(json_t *o, const char *key, json_t *v)
{
    if (!o || !v) {
        json_decref(v);
        return -1;
    }
    return json_object_set_new(o, key, v) == 0 ? 0 : -1;
}

int a3s_json_push(json_t *a, json_t *v)
{
    if (!a || !v) {
        json_decref(v);
        return -1;
    }
    return json_array_append_new(a, v) == 0 ? 0 : -1;
}

char *a3s_json_bytes(const json_t *v, size_t *n)
{
    if (json_is_string(v)) {
        size_t len = json_string_length(v);
        char *out = malloc(len + 1);
        if (!out)
            return NULL;
        memcpy(out, json_string_value(v), len);
        out[len] = '\0';
        *n = len;
        return out;
    }
    const json_t *b =
        json_is_object(v) && json_object_size(v) == 1 ? json_object_get(v, "base64") : NULL;
    if (!json_is_string(b)) {
        errno = EINVAL;
        return NULL;
    }
    return a3s_json_base64_decode(json_string_value(b), json_string_length(b), n);
}

/* ------------------------------------------------------------------ errors */

const char *a3s_json_status_name(int code)
{
    switch (code) {
    case A3S_OK:
        return "ok";
    case A3S_ERR_INVALID:
        return "invalid";
    case A3S_ERR_POLICY:
        return "policy";
    case A3S_ERR_SETUP:
        return "setup";
    case A3S_ERR_ABORTED:
        return "aborted";
    default:
        return "internal";
    }
}

char *a3s_json_error(const char *code, const char *message)
{
    json_t *o = json_object(), *e = json_object();
    char *s = NULL;
    if (a3s_json_set(e, "code", a3s_json_cstr(code ? code : "internal")) == 0 &&
        a3s_json_set(e, "message", a3s_json_cstr(message ? message : "")) == 0) {
        int rc = a3s_json_set(o, "error", e);
        e = NULL;
        if (rc == 0)
            s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    }
    json_decref(e);
    json_decref(o);
    return s;
}

/* ------------------------------------------------------------------ the result */

/* Parse our own JSON text (denials, grants); NULL on failure. */
static json_t *load_own(const char *text, const char *fallback)
{
    json_error_t je;
    return json_loads(text ? text : fallback, JSON_ALLOW_NUL, &je);
}

char *a3s_result_json(const a3s_result *r)
{
    json_t *o = json_object();
    /* The captures are already lossy UTF-8 (a3s_result): always strings. */
    bool ok =
        a3s_json_set(o, "stdout",
                     a3s_json_str(r->stdout_text ? r->stdout_text : "",
                                  r->stdout_text ? r->stdout_len : 0)) == 0 &&
        a3s_json_set(o, "stderr",
                     a3s_json_str(r->stderr_text ? r->stderr_text : "",
                                  r->stderr_text ? r->stderr_len : 0)) == 0 &&
        a3s_json_set(o, "exit_code", r->has_exit_code ? json_integer(r->exit_code) : json_null()) ==
            0 &&
        a3s_json_set(o, "signal", r->has_signal ? json_integer(r->signal) : json_null()) == 0 &&
        a3s_json_set(o, "timed_out", json_boolean(r->timed_out)) == 0 &&
        a3s_json_set(o, "truncated", json_boolean(r->truncated)) == 0 &&
        a3s_json_set(o, "total_bytes", json_integer((json_int_t)r->total_bytes)) == 0 &&
        a3s_json_set(o, "captured_bytes", json_integer((json_int_t)r->captured_bytes)) == 0 &&
        a3s_json_set(o, "duration_ms", json_integer((json_int_t)r->duration_ms)) == 0 &&
        a3s_json_set(o, "policy", a3s_json_cstr(r->policy)) == 0 &&
        a3s_json_set(o, "policy_digest", a3s_json_cstr(r->policy_digest)) == 0 &&
        a3s_json_set(o, "backend", a3s_json_cstr(r->backend ? r->backend : "")) == 0 &&
        a3s_json_set(o, "identity", a3s_json_cstr(r->identity ? r->identity : "")) == 0 &&
        a3s_json_set(o, "output_closed", json_boolean(r->output_closed)) == 0 &&
        a3s_json_set(o, "network_grants", load_own(r->grants_json, "[]")) == 0 &&
        a3s_json_set(o, "denials", load_own(r->denials_json, "[]")) == 0 &&
        a3s_json_set(o, "execution_id", a3s_json_cstr(r->execution_id)) == 0;
    char *s = ok ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    return s;
}
