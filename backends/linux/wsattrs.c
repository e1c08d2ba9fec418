#include "wsattrs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util.h"
#include "wspath.h"

#define ATTRS_MAX 65536

static void file_name(char *out, size_t n, const char *key, const char *suffix)
{
    snprintf(out, n, "%s%s", key, suffix);
}

static void hex_out(FILE *f, const char *p, size_t n)
{
    if (!p) {
        fputc('-', f);
        return;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", (unsigned char)p[i]);
}

/* Decode a hex token ("-": NULL). Returns -1 when malformed. */
static int hex_in(const char *t, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (!strcmp(t, "-"))
        return 0;
    size_t n = strlen(t);
    if (n == 0 || n % 2 || !(*out = malloc(n / 2)))
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(t + 2 * i, "%2x", &v) != 1) {
            free(*out);
            *out = NULL;
            return -1;
        }
        (*out)[i] = (char)v;
    }
    *len = n / 2;
    return 0;
}

int a3s_wsattrs_keep(int statefd, const char *key, int wsfd, const char *ws_path,
                     a3s_error *err)
{
    a3s_ws_attrs a;
    a3s_ws_attrs_save(wsfd, &a);
    if (!a.known)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot read the workspace's mode");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        fprintf(f, "a3s-wsattrs 1\n%o\n", (unsigned)a.mode);
        hex_out(f, ws_path, strlen(ws_path));
        for (int i = 0; i < 2; i++) {
            fputc('\n', f);
            hex_out(f, a.acl[i], a.acl_len[i]);
        }
        fputc('\n', f);
    }
    for (int i = 0; i < 2; i++)
        free(a.acl[i]);
    if (!f || fclose(f) != 0) {
        free(text);
        return a3s_fail(err, A3S_ERR_INTERNAL, "workspace attributes: out of memory");
    }
    char name[128], tmp[128];
    file_name(name, sizeof name, key, ".attrs");
    file_name(tmp, sizeof tmp, key, ".attrs.tmp");
    /* Only the mutex holder writes: a fixed temporary name suffices. */
    int fd = openat(statefd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -1 : a3s_write_all(fd, text, len);
    int saved = errno;
    if (fd >= 0 && close(fd) < 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rc == 0 && a3s_rename_replace(statefd, tmp, name) < 0) {
        rc = -1;
        saved = errno;
    }
    free(text);
    if (rc < 0) {
        (void)unlinkat(statefd, tmp, 0);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot record the workspace's mode");
    }
    return 0;
}

/* Put back what a command may have changed: the ACLs as recorded (a command that removed
 * one would otherwise leave its mask as the group's permission), then the mode as the
 * current one without the bits the record lacks (an owner's later chmod 700 stays). */
static void apply_narrowing(int wsfd, a3s_ws_attrs *a)
{
    static const char *const names[2] = {"system.posix_acl_access", "system.posix_acl_default"};
    for (int i = 0; i < 2; i++) {
        char buf[4096];
        ssize_t n = fgetxattr(wsfd, names[i], buf, sizeof buf);
        bool same = a->acl[i] ? n == (ssize_t)a->acl_len[i] && !memcmp(buf, a->acl[i], (size_t)n)
                              : n < 0 && errno == ENODATA;
        if (!same && a->acl[i])
            (void)fsetxattr(wsfd, names[i], a->acl[i], a->acl_len[i], 0);
        else if (!same && (n >= 0 || errno == ERANGE))
            (void)fremovexattr(wsfd, names[i]);
        free(a->acl[i]);
        a->acl[i] = NULL;
    }
    /* After the ACLs: removing an access ACL rewrites the group bits of the mode. */
    struct stat now;
    if (fstat(wsfd, &now) == 0) {
        mode_t cur = now.st_mode & 07777, want = cur & a->mode;
        if (want != cur)
            (void)fchmod(wsfd, want);
    }
}

bool a3s_wsattrs_restore(int statefd, const char *key, int wsfd, bool drop,
                         const char *ws_path)
{
    char name[128];
    file_name(name, sizeof name, key, ".attrs");
    int fd = openat(statefd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    char *buf = malloc(ATTRS_MAX + 1);
    ssize_t n = buf ? a3s_read_retry(fd, buf, ATTRS_MAX) : -1;
    close(fd);
    if (n <= 0) {
        free(buf);
        return true; /* unreadable: left alone */
    }
    buf[n] = '\0';
    char *save = NULL, *tok[5];
    int nt = 0;
    for (char *t = strtok_r(buf, "\n", &save); t && nt < 5; t = strtok_r(NULL, "\n", &save))
        tok[nt++] = t;
    a3s_ws_attrs a = {0};
    char *path = NULL;
    size_t plen = 0;
    unsigned mode;
    bool ok = nt == 5 && !strcmp(tok[0], "a3s-wsattrs 1") && sscanf(tok[1], "%o", &mode) == 1 &&
              mode <= 07777 && hex_in(tok[2], &path, &plen) == 0 && path &&
              hex_in(tok[3], &a.acl[0], &a.acl_len[0]) == 0 &&
              hex_in(tok[4], &a.acl[1], &a.acl_len[1]) == 0;
    free(buf);
    int own = -1;
    if (ok && wsfd < 0) {
        /* The sweep: the recorded path, and only if it is still the keyed directory. */
        char *p = malloc(plen + 1);
        if (p) {
            memcpy(p, path, plen);
            p[plen] = '\0';
            own = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            free(p);
        }
        struct stat st;
        char k[128] = "";
        if (own >= 0 && fstat(own, &st) == 0)
            snprintf(k, sizeof k, "ws-%llx-%llx", (unsigned long long)st.st_dev,
                     (unsigned long long)st.st_ino);
        if (own < 0 || strcmp(k, key) != 0)
            ok = false; /* moved or gone: the record stays for an acquire there */
        wsfd = own;
    }
    /* A record of another directory that had the same device and inode (the recorded
     * one was removed, its inode reused): dropped, never applied here. */
    bool other = ok && ws_path && (strlen(ws_path) != plen || memcmp(ws_path, path, plen) != 0);
    if (ok && !other) {
        a.known = true;
        a.mode = (mode_t)mode;
        apply_narrowing(wsfd, &a);
    } else {
        free(a.acl[0]);
        free(a.acl[1]);
    }
    if ((ok && drop) || other)
        (void)unlinkat(statefd, name, 0);
    free(path);
    if (own >= 0)
        close(own);
    return true;
}

static const char *const acl_names[2] = {"system.posix_acl_access", "system.posix_acl_default"};

void a3s_ws_attrs_save(int wsfd, a3s_ws_attrs *a)
{
    memset(a, 0, sizeof *a);
    struct stat st;
    if (fstat(wsfd, &st) < 0)
        return;
    a->known = true;
    a->mode = st.st_mode & 07777;
    for (int i = 0; i < 2; i++) {
        ssize_t n = fgetxattr(wsfd, acl_names[i], NULL, 0);
        if (n <= 0)
            continue; /* none (ENODATA), or not supported here */
        char *v = malloc((size_t)n);
        if (v && (n = fgetxattr(wsfd, acl_names[i], v, (size_t)n)) > 0) {
            a->acl[i] = v;
            a->acl_len[i] = (size_t)n;
        } else {
            free(v);
        }
    }
}

void a3s_ws_attrs_restore(int wsfd, a3s_ws_attrs *a)
{
    if (!a->known)
        return;
    for (int i = 0; i < 2; i++) {
        char buf[4096];
        ssize_t n = fgetxattr(wsfd, acl_names[i], buf, sizeof buf);
        bool same = a->acl[i] ? n == (ssize_t)a->acl_len[i] && !memcmp(buf, a->acl[i], (size_t)n)
                              : n < 0 && errno == ENODATA;
        if (same)
            continue;
        if (a->acl[i])
            (void)fsetxattr(wsfd, acl_names[i], a->acl[i], a->acl_len[i], 0);
        else
            (void)fremovexattr(wsfd, acl_names[i]);
    }
    /* After the ACLs: setting an access ACL rewrites the group bits of the mode. */
    struct stat now;
    if (fstat(wsfd, &now) == 0 && (now.st_mode & 07777) != a->mode)
        (void)fchmod(wsfd, a->mode);
    for (int i = 0; i < 2; i++)
        free(a->acl[i]);
    memset(a, 0, sizeof *a);
}
