/* Unit tests of engine/json.c: host-derived bytes become a JSON string when they are
 * valid UTF-8 and {"base64": ...} otherwise (never dropped), base64 round trips, the
 * checked setters never drop a member silently, and the refusal object. */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "tap.h"

/* The compact dump of v (consumed). */
static char *dump(json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS) : NULL;
    json_decref(v);
    return s;
}

static void check_str(const char *in, size_t n, const char *want, const char *what)
{
    char *s = dump(a3s_json_str(in, n));
    ok_streq(s, want, what);
    free(s);
}

static void test_utf8(void)
{
    static const struct {
        const char *s;
        size_t n;
        bool valid;
        const char *what;
    } cases[] = {
        {"", 0, true, "empty"},
        {"plain/ascii path", 16, true, "ASCII"},
        {"caf\xC3\xA9", 5, true, "2-byte sequence"},
        {"\xE2\x82\xAC", 3, true, "3-byte sequence (euro)"},
        {"\xF0\x9F\x98\x80", 4, true, "4-byte sequence"},
        {"\xF4\x8F\xBF\xBF", 4, true, "U+10FFFF"},
        {"a\0b", 3, true, "NUL is a character"},
        {"\xFF", 1, false, "FF"},
        {"\x80", 1, false, "stray continuation"},
        {"\xC0\x80", 2, false, "overlong C0 80"},
        {"\xE0\x80\x80", 3, false, "overlong E0 80 80"},
        {"\xED\xA0\x80", 3, false, "surrogate"},
        {"\xF4\x90\x80\x80", 4, false, "above U+10FFFF"},
        {"\xE2\x82", 2, false, "truncated at the end"},
        {"\xE2\x82"
         "A",
         3, false, "truncated before ASCII"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ok(a3s_json_is_utf8(cases[i].s, cases[i].n) == cases[i].valid, "utf8: %s", cases[i].what);
}

static void test_base64(void)
{
    /* RFC 4648 section 10 test vectors. */
    static const char *const vec[][2] = {{"", ""},
                                         {"f", "Zg=="},
                                         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},
                                         {"foob", "Zm9vYg=="},
                                         {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        char *e = a3s_json_base64_encode(vec[i][0], strlen(vec[i][0]));
        ok_streq(e, vec[i][1], "base64 encodes an RFC 4648 vector");
        size_t n = 99;
        char *d = a3s_json_base64_decode(vec[i][1], strlen(vec[i][1]), &n);
        ok(d && n == strlen(vec[i][0]) && memcmp(d, vec[i][0], n) == 0, "base64 decodes '%s'",
           vec[i][1]);
        free(e);
        free(d);
    }
    /* Every byte value, at each length modulo 3, round trips. */
    unsigned char all[258];
    for (size_t i = 0; i < sizeof all; i++)
        all[i] = (unsigned char)(i * 7 + 3);
    for (size_t len = 255; len <= 258; len++) {
        char *e = a3s_json_base64_encode(all, len);
        size_t n = 0;
        char *d = e ? a3s_json_base64_decode(e, strlen(e), &n) : NULL;
        ok(d && n == len && memcmp(d, all, len) == 0, "base64 round trip of %zu bytes", len);
        free(e);
        free(d);
    }
    static const char *const bad[] = {
        "Zg=", "Z===", "Zg==Zg==", "Zm9v!A==", "=Zm9", "Zm=v", "Zg=\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n;
        char *d = a3s_json_base64_decode(bad[i], strlen(bad[i]), &n);
        ok(d == NULL, "malformed base64 refused (case %zu)", i);
        free(d);
    }
}

static void test_str(void)
{
    check_str("/home/alice/proj", 16, "\"/home/alice/proj\"", "valid UTF-8 is a string");
    check_str("/tmp/caf\xC3\xA9", 10, "\"/tmp/caf\xC3\xA9\"", "non-ASCII UTF-8 stays a string");
    check_str("/tmp/ws\xFF\xFE", 9, "{\"base64\":\"L3RtcC93c//+\"}",
              "0xff 0xfe: the base64 object of the exact bytes");
    check_str("\xED\xA0\x80", 3, "{\"base64\":\"7aCA\"}", "a surrogate is base64");
    check_str("a\0b", 3, "\"a\\u0000b\"", "a NUL byte is kept (as \\u0000)");
    check_str(NULL, 0, "null", "NULL is null");
    char *s = dump(a3s_json_cstr("x\xC3"));
    ok_streq(s, "{\"base64\":\"eMM=\"}", "cstr: truncated sequence is base64");
    free(s);

    /* a3s_json_bytes gives the exact bytes back, whichever form. */
    const char raw[] = "/srv/\xFF\x01\x80name";
    json_t *v = a3s_json_str(raw, sizeof raw - 1);
    ok(json_is_object(v), "non-UTF-8 is an object");
    size_t n = 0;
    char *b = a3s_json_bytes(v, &n);
    ok(b && n == sizeof raw - 1 && memcmp(b, raw, n) == 0, "bytes of the base64 object");
    free(b);
    json_decref(v);
    v = a3s_json_cstr("plain");
    b = a3s_json_bytes(v, &n);
    ok(b && n == 5 && strcmp(b, "plain") == 0, "bytes of a string");
    free(b);
    json_decref(v);
    v = json_integer(3);
    ok(a3s_json_bytes(v, &n) == NULL, "an integer has no bytes");
    json_decref(v);
    v = json_pack("{s:s, s:s}", "base64", "Zg==", "x", "y");
    ok(a3s_json_bytes(v, &n) == NULL, "an object with more members is not an encoding");
    json_decref(v);
}

static void test_set_push(void)
{
    json_t *o = json_object(), *a = json_array();
    ok(a3s_json_set(o, "k", a3s_json_cstr("v")) == 0, "set a member");
    ok(a3s_json_set(o, "x", NULL) == -1, "a NULL value (failed allocation) is a failure");
    ok(a3s_json_set(NULL, "k", json_true()) == -1, "a NULL object is a failure (v freed)");
    ok(a3s_json_push(a, a3s_json_cstr("\xFF")) == 0, "push a non-UTF-8 entry");
    ok(a3s_json_push(a, NULL) == -1, "push NULL is a failure");
    ok(a3s_json_push(NULL, json_true()) == -1, "push into NULL is a failure (v freed)");
    ok(json_array_size(a) == 1 && json_object_size(o) == 1, "nothing else was added");
    json_decref(o);
    json_decref(a);
}

static void test_error(void)
{
    ok_streq(a3s_json_status_name(A3S_ERR_INVALID), "invalid", "status invalid");
    ok_streq(a3s_json_status_name(A3S_ERR_POLICY), "policy", "status policy");
    ok_streq(a3s_json_status_name(A3S_ERR_SETUP), "setup", "status setup");
    ok_streq(a3s_json_status_name(A3S_ERR_INTERNAL), "internal", "status internal");
    ok_streq(a3s_json_status_name(A3S_ERR_ABORTED), "aborted", "status aborted");
    ok_streq(a3s_json_status_name(42), "internal", "unknown status is internal");
    char *s = a3s_json_error("policy", "run: \"quoted\"");
    ok_streq(s, "{\"error\":{\"code\":\"policy\",\"message\":\"run: \\\"quoted\\\"\"}}",
             "error object");
    free(s);
    s = a3s_json_error("setup", "workspace /x\xFF: missing");
    json_error_t je;
    json_t *v = s ? json_loads(s, 0, &je) : NULL;
    json_t *m = json_object_get(json_object_get(v, "error"), "message");
    size_t n = 0;
    char *b = a3s_json_bytes(m, &n);
    ok(b && strcmp(b, "workspace /x\xFF: missing") == 0, "a non-UTF-8 message is kept as base64");
    free(b);
    json_decref(v);
    free(s);
}

int main(void)
{
    test_utf8();
    test_base64();
    test_str();
    test_set_push();
    test_error();
    return tap_done();
}
