/* The request parser of `a3s-sandbox serve` (bindings/cli/serve_req.c): each kind of
 * malformed line gets its error code, a good request reads as written, and a
 * deterministic mutation fuzz (valid requests with bytes flipped, cut, inserted or
 * repeated) never yields an accepted request that breaks what serve.c relies on. Under
 * the sanitizer build (scripts/test.sh) any memory error or leak fails it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "tap.h"

static const char *parse(const char *line, a3s_serve_req *r)
{
    char msg[512];
    const char *code = a3s_serve_req_parse(line, strlen(line), r, msg, sizeof msg);
    if (code && !msg[0])
        return "(no message)";
    return code;
}

/* The code for line, the request released. */
static const char *code_of(const char *line)
{
    a3s_serve_req r;
    const char *code = parse(line, &r);
    a3s_serve_req_free(&r);
    return code ? code : "ok";
}

/* What serve.c relies on for an accepted request. */
static bool sound(const a3s_serve_req *r)
{
    if (!r->id || !(json_is_integer(r->id) || json_is_string(r->id)))
        return false;
    if (json_is_string(r->id) && json_string_length(r->id) > A3S_SERVE_MAX_ID)
        return false;
    if (r->op == A3S_SERVE_CANCEL)
        return r->target && (json_is_integer(r->target) || json_is_string(r->target));
    if (r->grant_digest && !r->ngrants)
        return false;
    if (r->op != A3S_SERVE_EXEC)
        return !r->argv && !r->command && !r->env && !r->stdin_data;
    if (!r->argv == !r->command || (r->argv && !r->argv[0]))
        return false;
    for (size_t i = 0; r->env && r->env[i]; i++)
        if (!strchr(r->env[i], '=') || r->env[i][0] == '=')
            return false;
    return r->timeout_ms == -1 || (r->timeout_ms >= 1 && r->timeout_ms <= 86400000);
}

static void fuzz(void)
{
    static const char *const seeds[] = {
        "{\"id\":1,\"op\":\"probe\"}",
        "{\"id\":\"a\",\"op\":\"exec\",\"argv\":[\"make\",\"test\"],\"env\":{\"A\":\"b\"},"
        "\"timeout\":2.5,\"stdin_base64\":\"aGk=\",\"cwd\":\"src\"}",
        "{\"id\":7,\"op\":\"exec\",\"command\":\"echo hi\",\"stdin\":\"x\","
        "\"grants\":[\"example.org:443\"],\"grant_digest\":\"00\"}",
        "{\"id\":9,\"op\":\"cancel\",\"target\":\"a\"}",
        "{\"id\":2,\"op\":\"digest\",\"grants\":[]}",
    };
    const size_t nseeds = sizeof seeds / sizeof seeds[0];
    uint64_t x = 0x9e3779b97f4a7c15u;
    size_t accepted = 0, refused = 0, unsound = 0;
    char buf[1024];
    for (int it = 0; it < 200000; it++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64: the same run every time */
        const char *s = seeds[x % nseeds];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        for (int k = 0; k < 1 + (int)((x >> 8) % 4); k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = (size_t)(x >> 16) % (n + 1);
            unsigned char b = (unsigned char)(x >> 40);
            switch ((x >> 3) % 4) {
            case 0: /* flip */
                if (at < n)
                    buf[at] = (char)b;
                break;
            case 1: /* cut */
                n = at;
                break;
            case 2: /* insert */
                if (n + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = (char)b;
                    n++;
                }
                break;
            default: /* repeat a piece */
                if (n + 16 < sizeof buf && at + 8 <= n) {
                    memmove(buf + at + 8, buf + at, n - at);
                    n += 8;
                }
            }
        }
        a3s_serve_req r;
        char msg[512];
        const char *code = a3s_serve_req_parse(buf, n, &r, msg, sizeof msg);
        if (code)
            refused++;
        else if (sound(&r))
            accepted++;
        else
            unsound++;
        a3s_serve_req_free(&r);
    }
    ok(unsound == 0, "fuzz: no accepted request breaks the invariants (%zu of them)", unsound);
    ok(accepted > 1000 && refused > 1000, "fuzz: both kinds seen (%zu accepted, %zu refused)",
       accepted, refused);
}

int main(void)
{
    ok_streq(code_of("{\"id\":1,\"op\":\"probe\"}"), "ok", "probe");
    ok_streq(code_of("{\"id\":\"x\",\"op\":\"exec\",\"argv\":[\"true\"]}"), "ok", "exec argv");
    ok_streq(code_of("{\"id\":1,\"op\":\"cancel\",\"target\":\"x\"}"), "ok", "cancel");
    ok_streq(code_of("not json"), "bad_json", "not JSON");
    ok_streq(code_of("{\"id\":1,\"op\":\"pro\xff\"}"), "bad_json", "invalid UTF-8");
    ok_streq(code_of("{\"id\":1,\"op\":\"pro\\u0000be\"}"), "bad_json", "\\u0000");
    ok_streq(code_of("{\"id\":1,\"op\":\"probe\",\"id\":2}"), "bad_json", "a duplicate member");
    ok_streq(code_of("{\"id\":123456789012345678901234567890,\"op\":\"probe\"}"), "bad_json",
             "an integer id beyond 64 bits");
    ok_streq(code_of("[]"), "bad_request", "not an object");
    ok_streq(code_of("{\"op\":\"probe\"}"), "bad_request", "no id");
    ok_streq(code_of("{\"id\":1.5,\"op\":\"probe\"}"), "bad_request", "a real id");
    ok_streq(code_of("{\"id\":null,\"op\":\"probe\"}"), "bad_request", "a null id");
    ok_streq(code_of("{\"id\":1}"), "bad_request", "no op");
    ok_streq(code_of("{\"id\":1,\"op\":\"reboot\"}"), "unknown_op", "an unknown op");
    ok_streq(code_of("{\"id\":1,\"op\":\"probe\",\"argv\":[\"x\"]}"), "bad_request",
             "a member the op does not take");
    ok_streq(code_of("{\"id\":1,\"op\":\"exec\"}"), "bad_request", "exec without a command");
    ok_streq(code_of("{\"id\":1,\"op\":\"exec\",\"argv\":[]}"), "bad_request", "empty argv");
    ok_streq(code_of("{\"id\":1,\"op\":\"exec\",\"command\":\"x\",\"argv\":[\"x\"]}"),
             "bad_request", "argv and command");
    ok_streq(code_of("{\"id\":1,\"op\":\"exec\",\"command\":\"x\",\"timeout\":0}"),
             "bad_request", "timeout 0");
    ok_streq(code_of("{\"id\":1,\"op\":\"exec\",\"command\":\"x\",\"timeout\":86401}"),
             "bad_request", "timeout above a day");
    ok_streq(code_of("{\"id\":1,\"op\":\"exec\",\"command\":\"x\",\"env\":{\"A=B\":\"c\"}}"),
             "bad_request", "an env name with '='");
    ok_streq(code_of("{\"id\":1,\"op\":\"exec\",\"command\":\"x\",\"stdin_base64\":\"a\"}"),
             "bad_request", "bad base64");
    ok_streq(code_of("{\"id\":1,\"op\":\"digest\",\"grant_digest\":\"00\"}"), "bad_request",
             "grant_digest without grants");
    ok_streq(code_of("{\"id\":1,\"op\":\"cancel\",\"target\":[1]}"), "bad_request",
             "a cancel target that is no id");

    a3s_serve_req r;
    const char *code = parse("{\"id\":\"j\",\"op\":\"exec\",\"argv\":[\"a\",\"b\"],"
                             "\"env\":{\"X\":\"1\"},\"timeout\":0.0015,"
                             "\"stdin_base64\":\"AP8=\",\"cwd\":\"sub\"}",
                             &r);
    ok(!code && r.op == A3S_SERVE_EXEC, "a full exec request is accepted");
    ok(!code && r.argv && !strcmp(r.argv[0], "a") && !strcmp(r.argv[1], "b") && !r.argv[2],
       "its argv");
    ok(!code && r.env && !strcmp(r.env[0], "X=1") && !r.env[1], "its env as NAME=VALUE");
    ok(!code && r.timeout_ms == 2, "its timeout rounded up to whole milliseconds");
    ok(!code && r.stdin_len == 2 && (unsigned char)r.stdin_data[0] == 0 &&
           (unsigned char)r.stdin_data[1] == 0xff,
       "its stdin decoded from base64");
    ok(!code && r.cwd && !strcmp(r.cwd, "sub"), "its cwd");
    a3s_serve_req_free(&r);

    code = parse("{\"id\":42,\"op\":\"reboot\"}", &r);
    ok(code && r.id && json_integer_value(r.id) == 42, "a refused request keeps its id");
    a3s_serve_req_free(&r);

    fuzz();
    return tap_done();
}
