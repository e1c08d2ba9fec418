#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int a3s_rename_replace(int dirfd, const char *from, const char *to)
{
    if (renameat2(dirfd, from, dirfd, to, RENAME_EXCHANGE) == 0) {
        (void)unlinkat(dirfd, from, 0); /* a stale temporary is truncated by the next writer */
        return 0;
    }
    if (errno != ENOENT && errno != EINVAL && errno != ENOSYS)
        return -1;
    return renameat(dirfd, from, dirfd, to); /* no `to` yet, or no exchange here */
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

unsigned long long a3s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000ULL + (unsigned long long)ts.tv_nsec / 1000000ULL;
}

/* Write without ever raising SIGPIPE in the host process when the reader has gone: the host's disposition is not ours to change (the
 * default kills). SIGPIPE is blocked in this thread around the write and one that the
 * write generated is consumed (unless one was already pending before). Returns like
 * write(2). */
ssize_t a3s_write_nosigpipe(int fd, const void *buf, size_t len)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    int e = pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    if (e != 0) {
        errno = e;
        return -1;
    }
    bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    ssize_t w;
    do
        w = write(fd, buf, len);
    while (w < 0 && errno == EINTR);
    int saved = errno;
    if (w < 0 && saved == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return w;
}

int a3s_write_all_nosigpipe(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = a3s_write_nosigpipe(fd, p, len);
        if (w < 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static const struct {
    int num;
    const char *name;
} errno_names[] = {
    {EPERM, "EPERM"},
    {ENOENT, "ENOENT"},
    {ESRCH, "ESRCH"},
    {EINTR, "EINTR"},
    {EIO, "EIO"},
    {ENXIO, "ENXIO"},
    {E2BIG, "E2BIG"},
    {ENOEXEC, "ENOEXEC"},
    {EBADF, "EBADF"},
    {ECHILD, "ECHILD"},
    {EAGAIN, "EAGAIN"},
    {ENOMEM, "ENOMEM"},
    {EACCES, "EACCES"},
    {EFAULT, "EFAULT"},
    {EBUSY, "EBUSY"},
    {EEXIST, "EEXIST"},
    {EXDEV, "EXDEV"},
    {ENODEV, "ENODEV"},
    {ENOTDIR, "ENOTDIR"},
    {EISDIR, "EISDIR"},
    {EINVAL, "EINVAL"},
    {ENFILE, "ENFILE"},
    {EMFILE, "EMFILE"},
    {ENOTTY, "ENOTTY"},
    {ETXTBSY, "ETXTBSY"},
    {EFBIG, "EFBIG"},
    {ENOSPC, "ENOSPC"},
    {ESPIPE, "ESPIPE"},
    {EROFS, "EROFS"},
    {EMLINK, "EMLINK"},
    {EPIPE, "EPIPE"},
    {ERANGE, "ERANGE"},
    {ENAMETOOLONG, "ENAMETOOLONG"},
    {ENOSYS, "ENOSYS"},
    {ELOOP, "ELOOP"},
    {ENOTSOCK, "ENOTSOCK"},
    {EPROTOTYPE, "EPROTOTYPE"},
    {ENOPROTOOPT, "ENOPROTOOPT"},
    {EPROTONOSUPPORT, "EPROTONOSUPPORT"},
    {ESOCKTNOSUPPORT, "ESOCKTNOSUPPORT"},
    {EOPNOTSUPP, "EOPNOTSUPP"},
    {ENOTSUP, "ENOTSUP"}, /* same number as EOPNOTSUPP on Linux: a name only, never given */
    {EPFNOSUPPORT, "EPFNOSUPPORT"},
    {EAFNOSUPPORT, "EAFNOSUPPORT"},
    {EADDRINUSE, "EADDRINUSE"},
    {EADDRNOTAVAIL, "EADDRNOTAVAIL"},
    {ENETDOWN, "ENETDOWN"},
    {ENETUNREACH, "ENETUNREACH"},
    {ECONNABORTED, "ECONNABORTED"},
    {ECONNRESET, "ECONNRESET"},
    {ECONNREFUSED, "ECONNREFUSED"},
    {ETIMEDOUT, "ETIMEDOUT"},
    {EHOSTUNREACH, "EHOSTUNREACH"},
};

/* The first entry with that number wins (EOPNOTSUPP before its alias ENOTSUP). */
const char *a3s_errno_symbol(int errnum)
{
    for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
        if (errno_names[i].num == errnum)
            return errno_names[i].name;
    return NULL;
}

int a3s_errno_from_symbol(const char *name)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
        if (strcmp(errno_names[i].name, name) == 0)
            return errno_names[i].num;
    return -1;
}
