/* Small shared helpers: error filling, string vectors, safe I/O. */
#ifndef A3S_UTIL_H
#define A3S_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "a3s_sandbox.h"

#if defined(__GNUC__)
#define A3S_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define A3S_PRINTF(a, b)
#endif

/* AddressSanitizer builds: a child sharing the caller's memory on a stack of its own
 * (clone with CLONE_VM) confuses ASan's stack bookkeeping, so there those children are
 * forked instead (exec.c, rootid.c); what they do is the same. */
#if defined(__SANITIZE_ADDRESS__)
#define A3S_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define A3S_UNDER_ASAN 1
#endif
#endif

/* Fill err (may be NULL) with code and a formatted message; returns -1 so callers can
 * `return a3s_fail(err, ...)`. */
int a3s_fail(a3s_error *err, int code, const char *fmt, ...) A3S_PRINTF(3, 4);
/* Same, appending ": strerror(errno)" from the errno value given. */
int a3s_fail_errno(a3s_error *err, int code, int errnum, const char *fmt, ...) A3S_PRINTF(4, 5);

/* A growable NULL-terminated vector of owned strings. */
typedef struct a3s_strv {
    char **v;
    size_t n, cap;
} a3s_strv;

int a3s_strv_push(a3s_strv *sv, const char *s);              /* copies s; -1 on ENOMEM */
int a3s_strv_pushf(a3s_strv *sv, const char *fmt, ...) A3S_PRINTF(2, 3);
void a3s_strv_free(a3s_strv *sv);

/* A growing text: always NUL-terminated once anything was added; after an allocation
 * failure, `failed` is set and further additions do nothing. Free s when done. */
typedef struct a3s_sbuf {
    char *s;
    size_t n, cap;
    bool failed;
} a3s_sbuf;

void a3s_sbuf_add(a3s_sbuf *b, const char *s, size_t n);
void a3s_sbuf_adds(a3s_sbuf *b, const char *s);

char *a3s_strdup(const char *s);                             /* NULL on ENOMEM */
char *a3s_strndup(const char *s, size_t n);

/* read/write loops that retry on EINTR; write_all returns 0 or -1 with errno. */
int a3s_write_all(int fd, const void *buf, size_t len);
/* renameat(dirfd, from, dirfd, to), replacing `to` atomically, without ext4's flush of
 * `from`'s data that a rename over an existing file starts (auto_da_alloc: milliseconds
 * per run record): the two are exchanged, then `from` (the old contents) is removed.
 * 0, or -1 with errno. */
int a3s_rename_replace(int dirfd, const char *from, const char *to);
/* write(2) that never raises SIGPIPE in the host (EPIPE instead), whatever its
 * disposition; and the write-all form (EINTR retried, -1 with errno on failure). */
ssize_t a3s_write_nosigpipe(int fd, const void *buf, size_t len);
int a3s_write_all_nosigpipe(int fd, const void *buf, size_t len);
ssize_t a3s_read_retry(int fd, void *buf, size_t len);

/* Path helpers. A "clean" path is absolute, has no empty, "." or ".." components and no
 * trailing slash (except "/" itself). */
bool a3s_path_is_clean(const char *p);
/* true when p equals root or lies strictly below it (both clean). */
bool a3s_path_within(const char *p, const char *root);
/* number of components of a clean path ("/" = 0, "/a/b" = 2) */
int a3s_path_depth(const char *p);

/* Monotonic milliseconds. */
unsigned long long a3s_now_ms(void);

/* The one errno name table: the symbolic name of an errno value ("EACCES"), or NULL when
 * it has none here; and the value of a name (exact spelling, "ENOTSUP" too), or -1. */
const char *a3s_errno_symbol(int errnum);
int a3s_errno_from_symbol(const char *name);

#endif
