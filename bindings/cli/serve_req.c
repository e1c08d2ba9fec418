/* a3s-sandbox serve: one request line read into a checked request (docs/PROTOCOL.md
 * "Requests"). Everything a request says is checked here, before any sandbox exists, so
 * that a malformed line is answered with an error and never reaches the library. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "serve.h"

static const char *bad(char *msg, size_t size, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static const char *bad(char *msg, size_t size, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return code;
}

/* A string member without NUL (jansson refuses \u0000 unless asked; checked anyway). */
static bool plain_string(const json_t *v)
{
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

/* The request's id: an integer, or a string of at most A3S_SERVE_MAX_ID bytes. */
static bool usable_id(const json_t *v)
{
    return json_is_integer(v) ||
           (plain_string(v) && json_string_length(v) <= A3S_SERVE_MAX_ID);
}

/* A list of strings as a NULL-terminated vector pointing into the list. */
static const char *strv(json_t *a, const char *name, bool nonempty, const char ***out,
                        size_t *n, char *msg, size_t size)
{
    if (!json_is_array(a))
        return bad(msg, size, "bad_request", "\"%s\" must be a list of strings", name);
    size_t k = json_array_size(a);
    if (nonempty && k == 0)
        return bad(msg, size, "bad_request", "\"%s\" must not be empty", name);
    const char **v = calloc(k + 1, sizeof *v);
    if (!v)
        return bad(msg, size, "internal", "out of memory");
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_array_get(a, i);
        if (!plain_string(e)) {
            free(v);
            return bad(msg, size, "bad_request", "\"%s\"[%zu] must be a string", name, i);
        }
        v[i] = json_string_value(e);
    }
    *out = v;
    if (n)
        *n = k;
    return NULL;
}

static const char *env_entries(json_t *o, char ***out, char *msg, size_t size)
{
    if (!json_is_object(o))
        return bad(msg, size, "bad_request", "\"env\" must be an object of strings");
    char **v = calloc(json_object_size(o) + 1, sizeof *v);
    if (!v)
        return bad(msg, size, "internal", "out of memory");
    *out = v; /* freed with the request, whatever happens below */
    const char *k;
    json_t *val;
    size_t i = 0;
    json_object_foreach(o, k, val)
    {
        if (!plain_string(val))
            return bad(msg, size, "bad_request", "\"env\" values must be strings");
        if (!*k || strchr(k, '='))
            return bad(msg, size, "bad_request",
                       "\"env\" names must be non-empty and without '='");
        if (asprintf(&v[i], "%s=%s", k, json_string_value(val)) < 0) {
            v[i] = NULL;
            return bad(msg, size, "internal", "out of memory");
        }
        i++;
    }
    return NULL;
}

/* The members each op takes (besides id and op); anything else is refused, so a
 * misspelled member is never silently ignored. */
static bool member_ok(a3s_serve_op op, const char *k)
{
    static const char *const common[] = {"grants", "grant_digest", NULL};
    static const char *const exec[] = {"argv", "command", "env",  "stdin", "stdin_base64",
                                       "timeout", "cwd",  NULL};
    if (!strcmp(k, "id") || !strcmp(k, "op"))
        return true;
    if (op == A3S_SERVE_CANCEL)
        return !strcmp(k, "target");
    for (size_t i = 0; common[i]; i++)
        if (!strcmp(k, common[i]))
            return true;
    if (op == A3S_SERVE_EXEC)
        for (size_t i = 0; exec[i]; i++)
            if (!strcmp(k, exec[i]))
                return true;
    return false;
}

static const char *parse_exec(a3s_serve_req *r, char *msg, size_t size)
{
    json_t *o = r->root, *v;
    const char *code;
    json_t *argv = json_object_get(o, "argv"), *cmd = json_object_get(o, "command");
    if (!argv == !cmd)
        return bad(msg, size, "bad_request", "exec needs exactly one of \"argv\" and \"command\"");
    if (argv && (code = strv(argv, "argv", true, &r->argv, NULL, msg, size)))
        return code;
    if (cmd && !plain_string(cmd))
        return bad(msg, size, "bad_request", "\"command\" must be a string");
    r->command = cmd ? json_string_value(cmd) : NULL;
    if ((v = json_object_get(o, "env")) && (code = env_entries(v, &r->env, msg, size)))
        return code;
    json_t *in = json_object_get(o, "stdin"), *in64 = json_object_get(o, "stdin_base64");
    if (in && in64)
        return bad(msg, size, "bad_request", "give \"stdin\" or \"stdin_base64\", not both");
    if (in) {
        if (!json_is_string(in))
            return bad(msg, size, "bad_request", "\"stdin\" must be a string");
        r->stdin_len = json_string_length(in);
        r->stdin_data = malloc(r->stdin_len + 1);
        if (!r->stdin_data)
            return bad(msg, size, "internal", "out of memory");
        memcpy(r->stdin_data, json_string_value(in), r->stdin_len + 1);
    } else if (in64) {
        if (!json_is_string(in64))
            return bad(msg, size, "bad_request", "\"stdin_base64\" must be a string");
        r->stdin_data = a3s_json_base64_decode(json_string_value(in64),
                                               json_string_length(in64), &r->stdin_len);
        if (!r->stdin_data)
            return errno == ENOMEM ? bad(msg, size, "internal", "out of memory")
                                   : bad(msg, size, "bad_request",
                                         "\"stdin_base64\" is not standard padded base64");
    }
    if ((v = json_object_get(o, "timeout"))) {
        double t = json_number_value(v);
        if (!json_is_number(v) || !isfinite(t) || t * 1000.0 < 1.0 || t > 86400.0)
            return bad(msg, size, "bad_request",
                       "\"timeout\" must be a number of seconds, at least 0.001 and at "
                       "most 86400");
        r->timeout_ms = (int64_t)ceil(t * 1000.0);
    }
    if ((v = json_object_get(o, "cwd"))) {
        if (!plain_string(v))
            return bad(msg, size, "bad_request", "\"cwd\" must be a string");
        r->cwd = json_string_value(v);
    }
    return NULL;
}

const char *a3s_serve_req_parse(const char *line, size_t len, a3s_serve_req *r, char *msg,
                                size_t size)
{
    memset(r, 0, sizeof *r);
    r->timeout_ms = -1;
    json_error_t je;
    /* Invalid UTF-8, a NUL byte and \u0000 are refused by jansson itself. */
    r->root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!r->root)
        return bad(msg, size, "bad_json", "not valid JSON: %s (at byte %d)", je.text,
                   je.position);
    if (!json_is_object(r->root))
        return bad(msg, size, "bad_request", "a request must be a JSON object");
    json_t *id = json_object_get(r->root, "id");
    if (!id)
        return bad(msg, size, "bad_request", "the request has no \"id\"");
    if (!usable_id(id))
        return bad(msg, size, "bad_request",
                   "\"id\" must be an integer or a string of at most %d bytes",
                   A3S_SERVE_MAX_ID);
    r->id = id;
    json_t *op = json_object_get(r->root, "op");
    if (!plain_string(op))
        return bad(msg, size, "bad_request", "the request has no \"op\" string");
    static const char *const names[] = {"probe", "exec", "digest", "capabilities", "plan",
                                        "cancel"};
    size_t i = 0;
    while (i < sizeof names / sizeof names[0] && strcmp(names[i], json_string_value(op)))
        i++;
    if (i == sizeof names / sizeof names[0])
        return bad(msg, size, "unknown_op",
                   "unknown op (one of probe, exec, digest, capabilities, plan, cancel)");
    r->op = (a3s_serve_op)i;
    const char *k;
    json_t *v;
    json_object_foreach(r->root, k, v)
    {
        if (!member_ok(r->op, k))
            return bad(msg, size, "bad_request", "op %s takes no member \"%.64s\"", names[i],
                       k);
    }
    const char *code;
    if (r->op == A3S_SERVE_CANCEL) {
        r->target = json_object_get(r->root, "target");
        if (!usable_id(r->target))
            return bad(msg, size, "bad_request",
                       "cancel needs a \"target\": the id of a running exec");
        return NULL;
    }
    if ((v = json_object_get(r->root, "grants")) &&
        (code = strv(v, "grants", false, &r->grants, &r->ngrants, msg, size)))
        return code;
    if ((v = json_object_get(r->root, "grant_digest"))) {
        if (!plain_string(v))
            return bad(msg, size, "bad_request", "\"grant_digest\" must be a string");
        if (!r->ngrants)
            return bad(msg, size, "bad_request", "\"grant_digest\" needs at least one grant");
        r->grant_digest = json_string_value(v);
    }
    return r->op == A3S_SERVE_EXEC ? parse_exec(r, msg, size) : NULL;
}

void a3s_serve_req_free(a3s_serve_req *r)
{
    free(r->argv);
    free(r->grants);
    for (size_t i = 0; r->env && r->env[i]; i++)
        free(r->env[i]);
    free(r->env);
    free(r->stdin_data);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
    r->timeout_ms = -1;
}
