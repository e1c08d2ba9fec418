/* The mediator's refusal records (mediator_deny.h). */
#include "mediator_deny.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grant.h"
#include "json.h"
#include "util.h"

/* One record line (newline included) into out; its length, or 0 when it does not fit. */
size_t a3s_deny_format(char *out, size_t cap, const char *proto, const char *host, int port,
                       const char *reason)
{
    char target[A3S_GRANT_HOST_MAX + 16] = "";
    if (host && *host)
        snprintf(target, sizeof target, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    /* The host passed a3s_grant_host_check (ASCII), but a target is still written the one way
     * every host-derived text is (engine/json.h), and a failed member fails the record
     * (it is still counted) instead of writing it without its target. */
    json_t *o = json_object();
    bool ok = a3s_json_set(o, "kind", json_string("network")) == 0 &&
              a3s_json_set(o, "protocol", a3s_json_cstr(proto)) == 0 &&
              a3s_json_set(o, "target", a3s_json_cstr(target)) == 0 &&
              a3s_json_set(o, "reason", a3s_json_cstr(reason)) == 0 &&
              a3s_json_set(o, "decision", json_string("deny")) == 0;
    size_t n = ok ? json_dumpb(o, out, cap, JSON_COMPACT) : 0;
    json_decref(o);
    if (n == 0 || n >= cap)
        return 0;
    out[n] = '\n';
    return n + 1;
}

/* The first `keep` refusals are written as they happen; every one is counted. Called
 * with the server's lock held. */
void a3s_deny_log_add(a3s_deny_log *d, int fd, const char *line, size_t len, const char *reason)
{
    if (d->closed)
        return;
    unsigned long long seq = d->total++;
    size_t i = 0;
    while (i < A3S_DENY_REASONS && d->reason[i] && strcmp(d->reason[i], reason) != 0)
        i++;
    if (i == A3S_DENY_REASONS) {
        d->other++;
    } else {
        d->reason[i] = reason;
        d->count[i]++;
    }
    if (seq < d->keep) {
        if (len && a3s_write_all(fd, line, len) == 0)
            d->kept_first++;
        return;
    }
    a3s_deny_line *slot = &d->ring[seq % d->keep];
    slot->seq = seq;
    slot->len = len;
    if (len)
        memcpy(slot->text, line, len);
}

/* At stop: the last records not written yet, then the summary line (see mediator.h).
 * Called with the server's lock held; later refusals are not recorded. */
void a3s_deny_log_close(a3s_deny_log *d, int fd)
{
    if (d->closed || fd < 0)
        return;
    d->closed = true;
    if (d->total == 0)
        return;
    unsigned long long from = d->total > 2 * d->keep ? d->total - d->keep : d->keep;
    unsigned long long kept_last = 0;
    for (unsigned long long seq = from; seq < d->total; seq++) {
        const a3s_deny_line *slot = &d->ring[seq % d->keep];
        if (slot->seq == seq && slot->len &&
            a3s_write_all(fd, slot->text, slot->len) == 0)
            kept_last++;
    }
    json_t *counts = json_object();
    bool ok = counts != NULL;
    for (size_t i = 0; ok && i < A3S_DENY_REASONS && d->reason[i]; i++)
        ok = a3s_json_set(counts, d->reason[i], json_integer((json_int_t)d->count[i])) == 0;
    if (ok && d->other)
        ok = a3s_json_set(counts, "other", json_integer((json_int_t)d->other)) == 0;
    if (!ok) { /* a summary without all its counts would lie: none at all */
        json_decref(counts);
        counts = NULL;
    }
    json_t *o =
        counts ? json_pack("{s:s, s:b, s:s, s:I, s:I, s:I, s:I, s:o}", "kind", "network", "summary",
                           1, "decision", "deny", "total", (json_int_t)d->total, "kept_first",
                           (json_int_t)d->kept_first, "kept_last", (json_int_t)kept_last, "dropped",
                           (json_int_t)(d->total - d->kept_first - kept_last), "counts", counts)
               : NULL;
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) {
        size_t n = strlen(text);
        text[n] = '\n'; /* replaces the NUL: written by length */
        (void)a3s_write_all(fd, text, n + 1);
        free(text);
    }
}
