/* The fixtures of the pin unit tests (test_pin_*.c, backends/linux/pin.c and stale.c):
 * a test root with its own state root, fresh workspaces in it, entry checks, name lists,
 * and the files of the state directory. */
#ifndef A3S_PIN_FIXTURE_H
#define A3S_PIN_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pin.h"
#include "tap.h"

static char root[PATH_MAX];
static char state_root[PATH_MAX]; /* holds a3s-sandbox-state-<euid> for these tests */
static char state_dir[PATH_MAX];

/* ---------------------------------------------------------------- fixtures */

/* snprintf into a PATH_MAX buffer; a truncated test path is a broken test. */
static inline void fmt_path(char *out, const char *fmt, ...) A3S_PRINTF(2, 3);
static inline void fmt_path(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX) {
        fprintf(stderr, "test path too long\n");
        exit(2);
    }
}

static inline void path_of(char *out, const char *ws, const char *name)
{
    fmt_path(out, "%s/%s", ws, name);
}

/* A fresh, empty workspace directory under the test root. */
static inline void new_ws(char *ws, const char *tag)
{
    static int seq;
    fmt_path(ws, "%s/ws-%s-%d", root, tag, ++seq);
    if (mkdir(ws, 0755) < 0) {
        perror(ws);
        exit(2);
    }
}

static inline bool is_dir(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static inline bool is_reg(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static inline bool absent(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) < 0 && errno == ENOENT;
}

static inline mode_t mode_of(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) == 0 ? (st.st_mode & 07777) : (mode_t)-1;
}

static inline void write_file(const char *ws, const char *name, const char *text)
{
    char p[PATH_MAX];
    path_of(p, ws, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) < 0) {
        perror(p);
        exit(2);
    }
}

static inline void make_dir(const char *ws, const char *name)
{
    char p[PATH_MAX];
    path_of(p, ws, name);
    if (mkdir(p, 0755) < 0) {
        perror(p);
        exit(2);
    }
}

static inline size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    if (!d)
        return (size_t)-1;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static inline int count_fds(void)
{
    return (int)count_entries("/proc/self/fd");
}

/* A NULL-terminated list of names as an a3s_strv (caller frees). */
static inline a3s_strv names(const char *first, ...)
{
    a3s_strv sv = {0};
    va_list ap;
    va_start(ap, first);
    for (const char *n = first; n; n = va_arg(ap, const char *))
        if (a3s_strv_push(&sv, n) < 0)
            exit(2);
    va_end(ap);
    return sv;
}

static inline size_t npaths(const a3s_pins *pins)
{
    size_t n = 0;
    for (char *const *p = a3s_pins_paths(pins); *p; p++)
        n++;
    return n;
}

static inline bool has_path(const a3s_pins *pins, const char *ws, const char *name)
{
    char want[PATH_MAX];
    path_of(want, ws, name);
    for (char *const *p = a3s_pins_paths(pins); *p; p++)
        if (strcmp(*p, want) == 0)
            return true;
    return false;
}

static inline bool held(const char *ws, const char *name)
{
    int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool h = a3s_pins_held(fd, state_root, name);
    close(fd);
    return h;
}

static inline int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

static inline int acq(const char *ws, const a3s_strv *d, const a3s_strv *f, a3s_pins **out,
                      a3s_error *err)
{
    return a3s_pins_acquire_in(state_root, -1, ws, d, f, out, err);
}

/* Files in the state directory whose name ends with suffix ("" for all). */
/* Tombs ("tomb-*": swept runs whose tag is looked for a while, stale.c) are not records. */
static inline size_t state_files(const char *suffix)
{
    DIR *d = opendir(state_dir);
    size_t n = 0, sl = strlen(suffix);
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t l = strlen(de->d_name);
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 && l >= sl &&
            strncmp(de->d_name, "tomb-", 5) != 0 && strcmp(de->d_name + l - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

/* The test root (a fresh directory under /tmp, also the state root): 0, or 2 when it
 * cannot be made. */
static inline int pin_fixture_init(void)
{
    char tmpl[] = "/tmp/a3s-test-pin-XXXXXX";
    umask(022);
    if (!mkdtemp(tmpl) || !realpath(tmpl, root)) {
        perror("mkdtemp");
        return 2;
    }
    fmt_path(state_root, "%s", root);
    fmt_path(state_dir, "%s/a3s-sandbox-state-%lu", state_root, (unsigned long)geteuid());
    return 0;
}

/* Remove the test root and everything in it. */
static inline void pin_fixture_done(void)
{
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
