#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void fill(a3s_error *err, int code, int errnum, const char *fmt, va_list ap)
    A3S_PRINTF(4, 0);
static void fill(a3s_error *err, int code, int errnum, const char *fmt, va_list ap)
{
    if (!err)
        return;
    err->code = code;
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    if (n < 0)
        n = 0;
    if (errnum && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
}

int a3s_fail(a3s_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(err, code, 0, fmt, ap);
    va_end(ap);
    return -1;
}

int a3s_fail_errno(a3s_error *err, int code, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(err, code, errnum, fmt, ap);
    va_end(ap);
    return -1;
}

char *a3s_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

char *a3s_strndup(const char *s, size_t n)
{
    return s ? strndup(s, n) : NULL;
}

static int strv_take(a3s_strv *sv, char *s)
{
    if (!s)
        return -1;
    if (sv->n + 2 > sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 16;
        char **v = realloc(sv->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return -1;
        }
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
    return 0;
}

int a3s_strv_push(a3s_strv *sv, const char *s)
{
    return strv_take(sv, strdup(s));
}

int a3s_strv_pushf(a3s_strv *sv, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    return strv_take(sv, s);
}

void a3s_strv_free(a3s_strv *sv)
{
    if (!sv)
        return;
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    sv->v = NULL;
    sv->n = sv->cap = 0;
}

int a3s_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

ssize_t a3s_read_retry(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = read(fd, buf, len);
        if (r < 0 && errno == EINTR)
            continue;
        return r;
    }
}

bool a3s_path_is_clean(const char *p)
{
    if (!p || p[0] != '/')
        return false;
    if (p[1] == '\0')
        return true;
    const char *c = p + 1;
    for (;;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!e)
            return true;
        c = e + 1;
    }
}

bool a3s_path_within(const char *p, const char *root)
{
    if (strcmp(root, "/") == 0)
        return p[0] == '/';
    size_t n = strlen(root);
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int a3s_path_depth(const char *p)
{
    int d = 0;
    if (strcmp(p, "/") == 0)
        return 0;
    for (; *p; p++)
        if (*p == '/')
            d++;
    return d;
}

static int rmtree_depth(int dfd, const char *name, int depth)
{
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    if (depth > 256)
        return -1;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) {
        (void)fchmodat(dfd, name, 0700, 0);
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0)
        return -1;
    (void)fchmod(fd, 0700);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (rmtree_depth(dirfd(d), e->d_name, depth + 1) < 0)
            rc = -1;
    }
    closedir(d);
    if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        rc = -1;
    return rc;
}

int a3s_rmtree_at(int dfd, const char *name)
{
    return rmtree_depth(dfd, name, 0);
}

unsigned long long a3s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000ULL + (unsigned long long)ts.tv_nsec / 1000000ULL;
}
