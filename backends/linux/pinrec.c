/* The record of a workspace's pins (pinrec.h): parsing and atomic writing. */
#include "pinrec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define REC_MAGIC "a3s-pins 1"
#define REC_MAX (64 * 1024)

bool a3s_pinrec_name_ok(const char *name)
{
    return name && name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0;
}

bool a3s_pinrec_tmp_name_ok(const char *name)
{
    return strlen(name) == TMP_LEN && strncmp(name, TMP_PREFIX, sizeof TMP_PREFIX - 1) == 0 &&
           a3s_pinrec_name_ok(name);
}

void a3s_pinrec_key_file(char *out, const char *key, const char *suffix)
{
    snprintf(out, FILE_MAX, "%s%s", key, suffix);
}

/* ---------------------------------------------------------------- record */

void a3s_pinrec_entry_free(struct a3s_pin_entry *e)
{
    free(e->name);
    free(e->tmp);
    e->name = e->tmp = NULL;
}

void a3s_pinrec_free(struct a3s_pin_record *rec)
{
    for (size_t i = 0; i < rec->n; i++)
        a3s_pinrec_entry_free(&rec->v[i]);
    free(rec->v);
    free(rec->ws_path);
    memset(rec, 0, sizeof *rec);
}

struct a3s_pin_entry *a3s_pinrec_find(struct a3s_pin_record *rec, const char *name)
{
    for (size_t i = 0; i < rec->n; i++)
        if (!rec->v[i].tmp && strcmp(rec->v[i].name, name) == 0)
            return &rec->v[i];
    return NULL;
}

/* Append e (taking its name). */
int a3s_pinrec_add(struct a3s_pin_record *rec, const struct a3s_pin_entry *e)
{
    if (rec->n == rec->cap) {
        size_t cap = rec->cap ? rec->cap * 2 : 8;
        struct a3s_pin_entry *v = realloc(rec->v, cap * sizeof *v);
        if (!v)
            return -1;
        rec->v = v;
        rec->cap = cap;
    }
    rec->v[rec->n++] = *e;
    rec->dirty = true;
    return 0;
}

/* Names and paths are bytes: hex keeps the line format trivial for any of them. */
static int hex_put(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (fprintf(f, "%02x", *p) < 0)
            return -1;
    return 0;
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decode a hex token into a new string; NULL when malformed or empty. */
static char *hex_get(const char *h)
{
    size_t n = strlen(h);
    if (n == 0 || n % 2)
        return NULL;
    char *s = malloc(n / 2 + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < n / 2; i++) {
        int a = hex_val(h[2 * i]), b = hex_val(h[2 * i + 1]);
        if (a < 0 || b < 0 || (a == 0 && b == 0)) {
            free(s);
            return NULL;
        }
        s[i] = (char)(a * 16 + b);
    }
    s[n / 2] = '\0';
    return s;
}

static bool parse_u64(const char *s, unsigned long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

/* Split a line at spaces into exactly six fields; -1 when there are more. */
static int split6(char *line, char *f[6])
{
    char *save = NULL;
    int n = 0;
    for (char *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (n == 6)
            return -1;
        f[n++] = t;
    }
    return n;
}

/* A pending entry: "P d|f DEV INO HEXTMP HEXNAME". */
static bool parse_pending(char *line, struct a3s_pin_entry *e)
{
    char *f[6];
    int n = split6(line, f);
    unsigned long long dev, ino;
    if (n != 6 || strcmp(f[0], "P") != 0 || (strcmp(f[1], "d") != 0 && strcmp(f[1], "f") != 0) ||
        !parse_u64(f[2], &dev) || !parse_u64(f[3], &ino))
        return false;
    char *tmp = hex_get(f[4]), *name = hex_get(f[5]);
    if (!tmp || !name || !a3s_pinrec_tmp_name_ok(tmp) || !a3s_pinrec_name_ok(name)) {
        free(tmp);
        free(name);
        return false;
    }
    memset(e, 0, sizeof *e);
    e->name = name;
    e->tmp = tmp;
    e->dir = f[1][0] == 'd';
    e->dev = (dev_t)dev;
    e->ino = (ino_t)ino;
    return true;
}

/* One "d|f DEV INO CSEC CNSEC HEXNAME" line. */
static bool parse_pin(char *line, struct a3s_pin_entry *e)
{
    if (line[0] == 'P')
        return parse_pending(line, e);
    char *f[6];
    int n = split6(line, f);
    unsigned long long dev, ino, sec, nsec;
    if (n != 6 || (strcmp(f[0], "d") != 0 && strcmp(f[0], "f") != 0) || !parse_u64(f[1], &dev) ||
        !parse_u64(f[2], &ino) || !parse_u64(f[3], &sec) || !parse_u64(f[4], &nsec) ||
        nsec >= 1000000000ULL)
        return false;
    char *name = hex_get(f[5]);
    if (!name || !a3s_pinrec_name_ok(name)) {
        free(name);
        return false;
    }
    memset(e, 0, sizeof *e);
    e->name = name;
    e->dir = f[0][0] == 'd';
    e->dev = (dev_t)dev;
    e->ino = (ino_t)ino;
    e->ctim.tv_sec = (time_t)sec;
    e->ctim.tv_nsec = (long)nsec;
    return true;
}

static int parse_record(char *buf, struct a3s_pin_record *rec)
{
    char *save = NULL;
    char *line = strtok_r(buf, "\n", &save);
    if (!line || strcmp(line, REC_MAGIC) != 0)
        return -1;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        if (strncmp(line, "ws ", 3) == 0) {
            free(rec->ws_path);
            if (!(rec->ws_path = hex_get(line + 3)) || rec->ws_path[0] != '/')
                return -1;
            continue;
        }
        struct a3s_pin_entry e;
        if (!parse_pin(line, &e))
            return -1;
        if ((!e.tmp && a3s_pinrec_find(rec, e.name)) || a3s_pinrec_add(rec, &e) < 0) {
            a3s_pinrec_entry_free(&e);
            return -1;
        }
    }
    rec->dirty = false;
    return 0;
}

/* Read the record of key (an absent record is empty). A record that cannot be read or
 * parsed fails: forgetting it would leave its pins behind or, worse, treat a live
 * holder's pins as ordinary entries. */
int a3s_pinrec_read(int statefd, const char *key, struct a3s_pin_record *rec, a3s_error *err)
{
    char name[FILE_MAX];
    a3s_pinrec_key_file(name, key, ".pins");
    memset(rec, 0, sizeof *rec);
    int fd = openat(statefd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot open pin record %s", name);
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > REC_MAX) {
        close(fd);
        return a3s_fail(err, A3S_ERR_SETUP, "pin record %s is not a small regular file", name);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return a3s_fail(err, A3S_ERR_INTERNAL, "pin record: out of memory");
    }
    size_t n = 0;
    ssize_t r = 0;
    while (n < (size_t)st.st_size && (r = a3s_read_retry(fd, buf + n, (size_t)st.st_size - n)) > 0)
        n += (size_t)r;
    int saved = errno;
    close(fd);
    if (r < 0) {
        free(buf);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot read pin record %s", name);
    }
    buf[n] = '\0';
    int rc = memchr(buf, '\0', n) ? -1 : parse_record(buf, rec);
    free(buf);
    if (rc < 0) {
        a3s_pinrec_free(rec);
        return a3s_fail(err, A3S_ERR_SETUP,
                        "pin record %s is corrupt: remove it and the placeholders it lists", name);
    }
    return 0;
}

/* Replace the record atomically; an empty record is removed. */
int a3s_pinrec_write(int statefd, const char *key, const struct a3s_pin_record *rec, a3s_error *err)
{
    char name[FILE_MAX], tmp[FILE_MAX];
    a3s_pinrec_key_file(name, key, ".pins");
    if (rec->n == 0) {
        if (unlinkat(statefd, name, 0) < 0 && errno != ENOENT)
            return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot remove pin record %s", name);
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return a3s_fail(err, A3S_ERR_INTERNAL, "pin record: out of memory");
    int bad = fprintf(f, REC_MAGIC "\nws ") < 0 ||
              hex_put(f, rec->ws_path ? rec->ws_path : "/") < 0 || fputc('\n', f) == EOF;
    for (size_t i = 0; i < rec->n && !bad; i++) {
        const struct a3s_pin_entry *e = &rec->v[i];
        if (e->tmp) {
            bad = fprintf(f, "P %c %llu %llu ", e->dir ? 'd' : 'f', (unsigned long long)e->dev,
                          (unsigned long long)e->ino) < 0 ||
                  hex_put(f, e->tmp) < 0 || fputc(' ', f) == EOF || hex_put(f, e->name) < 0 ||
                  fputc('\n', f) == EOF;
            continue;
        }
        bad = fprintf(f, "%c %llu %llu %lld %ld ", e->dir ? 'd' : 'f', (unsigned long long)e->dev,
                      (unsigned long long)e->ino, (long long)e->ctim.tv_sec, e->ctim.tv_nsec) < 0 ||
              hex_put(f, e->name) < 0 || fputc('\n', f) == EOF;
    }
    if (fclose(f) != 0 || bad) {
        free(text);
        return a3s_fail(err, A3S_ERR_INTERNAL, "pin record: out of memory");
    }
    a3s_pinrec_key_file(tmp, key, ".pins.tmp");
    /* Only the mutex holder writes: one fixed temporary name per workspace suffices. */
    int fd = openat(statefd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int saved = errno;
        free(text);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot write pin record %s", name);
    }
    int rc = a3s_write_all(fd, text, len);
    int saved = errno;
    free(text);
    if (close(fd) < 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rc == 0 && a3s_rename_replace(statefd, tmp, name) < 0) {
        rc = -1;
        saved = errno;
    }
    if (rc < 0) {
        (void)unlinkat(statefd, tmp, 0);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot write pin record %s", name);
    }
    return 0;
}

