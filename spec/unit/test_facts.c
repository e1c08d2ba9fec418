/* The policy engine's record of what an evaluation read, as bytes and back (kept between
 * processes with the policy digest, engine/digest_cache.c): a round trip keeps every
 * fact, and no damaged or hostile byte string decodes into anything but NULL or a
 * well-formed record (the ASan run checks the reads). TAP output. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "facts.h"
#include "tap.h"

static a3s_policy_facts *sample(void)
{
    a3s_policy_facts *f = a3s_facts_new();
    a3s_facts_add(f, A3S_FACT_FILE, "/p/mod.lua", 10, "return {}\n", 10, true);
    a3s_facts_add(f, A3S_FACT_FILE, "/p/absent.lua", 13, NULL, 0, false);
    a3s_facts_add(f, A3S_FACT_GLOB, "/p\0pre", 6, "a\0b\0", 4, true);
    a3s_facts_add(f, A3S_FACT_EXISTS, "/nowhere", 8, NULL, 0, false);
    a3s_facts_add(f, A3S_FACT_REALPATH, "/tmp", 4, "/tmp", 4, true);
    a3s_facts_add(f, A3S_FACT_FILE, "/p/empty.lua", 12, "", 0, true);
    a3s_facts_add(f, A3S_FACT_ALIASES, "/srv/ws", 7, "/mnt/a\0/mnt/b\0", 14, true);
    return f;
}

/* A fixed sequence (the same mutations each run): an LCG's high bits. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    return (rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33;
}

int main(void)
{
    a3s_policy_facts *f = sample();
    char *buf = NULL, *again = NULL;
    size_t len = 0, len2 = 0;
    ok(a3s_facts_encode(f, &buf, &len) == 0 && len > 6, "a record encodes");
    a3s_policy_facts *d = a3s_facts_decode(buf, len);
    ok(d != NULL, "and decodes");
    ok(d && a3s_facts_encode(d, &again, &len2) == 0 && len2 == len && !memcmp(buf, again, len),
       "the round trip keeps every fact, byte for byte");
    free(again);
    a3s_facts_free(d);

    /* A query asked again with the same answer is recorded once; with another answer
     * (the host changed during the evaluation) it stays, and the check sees both. */
    a3s_policy_facts *g = sample();
    a3s_facts_add(g, A3S_FACT_REALPATH, "/tmp", 4, "/tmp", 4, true);
    a3s_facts_add(g, A3S_FACT_EXISTS, "/nowhere", 8, NULL, 0, false);
    a3s_facts_add(g, A3S_FACT_FILE, "/p/mod.lua", 10, "return {}\n", 10, true);
    char *gbuf = NULL;
    size_t glen = 0;
    ok(a3s_facts_encode(g, &gbuf, &glen) == 0 && glen == len && !memcmp(gbuf, buf, len),
       "a fact asked again with the same answer adds nothing");
    free(gbuf);
    gbuf = NULL;
    a3s_facts_add(g, A3S_FACT_REALPATH, "/tmp", 4, "/private/tmp", 12, true);
    a3s_facts_add(g, A3S_FACT_EXISTS, "/nowhere", 8, NULL, 0, true);
    a3s_facts_add(g, A3S_FACT_FILE, "/p/mod.lua", 10, "return 1\n", 9, true);
    ok(a3s_facts_encode(g, &gbuf, &glen) == 0 &&
           glen == len + 3 * 10 + (4 + 12) + 8 + (10 + 9),
       "the same query with another answer is a fact of its own (%zu bytes)", glen);
    free(gbuf);
    a3s_facts_free(g);

    a3s_facts_break(f);
    char *none = NULL;
    size_t nlen = 0;
    ok(a3s_facts_encode(f, &none, &nlen) == -1 && !none, "a broken record is never encoded");
    ok(a3s_facts_decode("", 0) == NULL && a3s_facts_decode(NULL, 0) == NULL,
       "empty input: NULL");
    ok(a3s_facts_decode("A3SF2\n", 6) == NULL, "another version: NULL");
    a3s_policy_facts *e = a3s_facts_decode("A3SF1\n", 6);
    ok(e != NULL, "a record of no facts decodes");
    a3s_facts_free(e);

    /* Hand-made hostile records: each must be refused. */
    struct {
        const char *what;
        const char *b;
        size_t n;
    } bad[] = {
        {"unknown kind", "A3SF1\nz\1\1\0\0\0\0\0\0\0x", 17},
        {"has neither 0 nor 1", "A3SF1\nf\2\1\0\0\0\0\0\0\0x", 17},
        {"an answer without has", "A3SF1\nf\0\1\0\0\0\1\0\0\0xy", 18},
        {"arg longer than the input", "A3SF1\nf\1\xff\xff\xff\x0f\0\0\0\0x", 17},
        {"answer longer than the input", "A3SF1\nf\1\1\0\0\0\xff\xff\xff\xff" "x", 17},
        {"a NUL inside a path", "A3SF1\nf\0\3\0\0\0\0\0\0\0a\0b", 19},
        {"a glob without its NUL", "A3SF1\ng\1\2\0\0\0\0\0\0\0ab", 18},
        {"a glob with two NULs", "A3SF1\ng\1\4\0\0\0\0\0\0\0a\0b\0", 20},
        {"a truncated header", "A3SF1\nf\1\1\0", 10},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a3s_policy_facts *x = a3s_facts_decode(bad[i].b, bad[i].n);
        ok(x == NULL, "refused: %s", bad[i].what);
        a3s_facts_free(x);
    }

    /* Mutations of the real record: truncations at every length, then random byte
     * changes. Decoding must never read outside the input (ASan) and what decodes must
     * encode again to no more bytes than it came from. */
    size_t accepted = 0, refused = 0;
    bool sane = true;
    for (size_t cut = 0; cut < len; cut++) {
        char *c = malloc(cut ? cut : 1);
        memcpy(c, buf, cut);
        a3s_policy_facts *x = a3s_facts_decode(c, cut);
        x ? accepted++ : refused++;
        a3s_facts_free(x);
        free(c);
    }
    for (int round = 0; round < 20000; round++) {
        char *c = malloc(len);
        memcpy(c, buf, len);
        int flips = 1 + (int)(next() % 4);
        for (int k = 0; k < flips; k++)
            c[next() % len] = (char)next();
        a3s_policy_facts *x = a3s_facts_decode(c, len);
        if (x) {
            char *r = NULL;
            size_t rl = 0;
            if (a3s_facts_encode(x, &r, &rl) < 0 || rl > len)
                sane = false;
            free(r);
            accepted++;
        } else {
            refused++;
        }
        a3s_facts_free(x);
        free(c);
    }
    ok(sane, "every mutated record that decodes encodes again within its size");
    ok(refused > 0 && accepted > 0, "mutations: %zu refused, %zu decoded (both happen)",
       refused, accepted);
    free(buf);
    a3s_facts_free(f);
    return tap_done();
}
