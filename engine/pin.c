/* Placeholders ("pins") for missing protected workspace entries.
 *
 * Every operation is relative to a workspace directory fd opened with O_NOFOLLOW, so a
 * workspace path swapped for a symlink (or renamed away) cannot redirect creation or
 * removal. A pin is identified by (device, inode) recorded right after creation; release
 * removes it only if the name still refers to that inode and it is untouched (an empty
 * directory, or a regular file of size 0).
 *
 * Concurrent executions in one process share pins through a process-wide registry keyed
 * by (workspace device, workspace inode, name): the second acquirer of a pin that this
 * process created takes a reference instead of skipping it as "not ours", and only the
 * last release removes it. Otherwise the first execution to finish would remove a
 * placeholder that another one still has bound read-only (and the kernel would detach
 * that bind mount with it).
 *
 * Cross-process crash recovery plugs in at pin_create (record the pin durably once it
 * exists) and pin_remove (drop the record); the registry itself stays per process. */
#include "pin.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* One placeholder this process created. Entries in `registry` are live; an entry whose
 * name was replaced on disk behind our back is detached ("stale") and only waits for its
 * holders to let go, never removing anything. */
struct pin_entry {
    dev_t ws_dev;
    ino_t ws_ino;
    char *name;
    dev_t dev;
    ino_t ino;
    bool dir;
    bool stale;
    unsigned long refs;
    struct pin_entry *next;
};

struct a3s_pins {
    int wsfd;                /* the workspace, O_DIRECTORY|O_NOFOLLOW */
    struct pin_entry **held; /* one reference each */
    size_t n, cap;
    a3s_strv paths; /* absolute paths, parallel to held */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pin_entry *registry; /* guarded by registry_lock */

static bool name_ok(const char *name)
{
    return name && name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0;
}

/* ---------------------------------------------------------------- registry
 * All functions in this section require registry_lock. */

static struct pin_entry *registry_find(dev_t ws_dev, ino_t ws_ino, const char *name)
{
    for (struct pin_entry *e = registry; e; e = e->next)
        if (e->ws_dev == ws_dev && e->ws_ino == ws_ino && strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

static void registry_detach(struct pin_entry *e)
{
    for (struct pin_entry **pp = &registry; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            e->next = NULL;
            return;
        }
    }
}

/* Does `name` under wsfd still refer to the inode of e (same type, not a symlink)? */
static bool entry_matches(int wsfd, const struct pin_entry *e)
{
    struct stat st;
    if (fstatat(wsfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    return st.st_dev == e->dev && st.st_ino == e->ino &&
           (e->dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

/* Remove the placeholder if it is still ours and untouched. Errors are ignored: a pin
 * that cannot be removed is left in place, which is the safe direction. The window
 * between the check and the unlink is inherent to names; only host processes writing
 * the workspace concurrently can use it, and the sandboxed command is gone by now. */
static void pin_remove(int wsfd, const struct pin_entry *e)
{
    struct stat st;
    if (fstatat(wsfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    if (st.st_dev != e->dev || st.st_ino != e->ino)
        return;
    if (e->dir) {
        /* rmdir fails with ENOTEMPTY when something was put inside: keep it then. */
        if (S_ISDIR(st.st_mode))
            (void)unlinkat(wsfd, e->name, AT_REMOVEDIR);
    } else if (S_ISREG(st.st_mode) && st.st_size == 0) {
        (void)unlinkat(wsfd, e->name, 0);
    }
}

static void entry_unref(int wsfd, struct pin_entry *e)
{
    if (--e->refs > 0)
        return;
    if (!e->stale) {
        registry_detach(e);
        pin_remove(wsfd, e);
    }
    free(e->name);
    free(e);
}

/* Create the placeholder. Returns 1 when created (*out filled), 0 when the name exists
 * (left alone), -1 on failure with err filled. Nothing remains on failure. */
static int pin_create(int wsfd, const char *workspace, const char *name, bool dir, dev_t ws_dev,
                      ino_t ws_ino, struct pin_entry **out, a3s_error *err)
{
    struct stat st;
    struct pin_entry *e = calloc(1, sizeof *e);
    if (!e || !(e->name = strdup(name))) {
        free(e);
        return a3s_fail(err, A3S_ERR_INTERNAL, "pin %s/%s: out of memory", workspace, name);
    }
    if (dir) {
        if (mkdirat(wsfd, name, 0700) < 0) {
            int saved = errno;
            free(e->name);
            free(e);
            if (saved == EEXIST)
                return 0;
            return a3s_fail_errno(err, A3S_ERR_SETUP, saved,
                                  "cannot create placeholder directory %s/%s", workspace, name);
        }
        int saved = 0;
        if (fstatat(wsfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            saved = errno;
        else if (!S_ISDIR(st.st_mode))
            saved = EEXIST;
        if (saved) {
            /* Replaced between mkdir and stat: it is no longer ours to record or remove. */
            free(e->name);
            free(e);
            return a3s_fail_errno(err, A3S_ERR_SETUP, saved,
                                  "placeholder directory %s/%s changed while being created",
                                  workspace, name);
        }
    } else {
        int fd = openat(wsfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            int saved = errno;
            free(e->name);
            free(e);
            if (saved == EEXIST)
                return 0;
            return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot create placeholder file %s/%s",
                                  workspace, name);
        }
        /* fstat on the fd we created: no window for a swap. */
        int rc = fstat(fd, &st);
        int saved = errno;
        close(fd);
        if (rc < 0) {
            (void)unlinkat(wsfd, name, 0);
            free(e->name);
            free(e);
            return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot stat placeholder %s/%s",
                                  workspace, name);
        }
    }
    e->ws_dev = ws_dev;
    e->ws_ino = ws_ino;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->dir = dir;
    *out = e;
    return 1;
}

/* ---------------------------------------------------------------- pins object */

/* Record one reference in pins (the caller already counted it in e->refs). */
static int pins_hold(a3s_pins *pins, const char *workspace, struct pin_entry *e, a3s_error *err)
{
    if (pins->n == pins->cap) {
        size_t cap = pins->cap ? pins->cap * 2 : 8;
        struct pin_entry **v = realloc(pins->held, cap * sizeof *v);
        if (!v)
            return a3s_fail(err, A3S_ERR_INTERNAL, "pins: out of memory");
        pins->held = v;
        pins->cap = cap;
    }
    /* "/" as workspace would give "//name": keep paths clean. */
    const char *sep = strcmp(workspace, "/") == 0 ? "" : "/";
    if (a3s_strv_pushf(&pins->paths, "%s%s%s", workspace, sep, e->name) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "pins: out of memory");
    pins->held[pins->n++] = e;
    return 0;
}

/* Pin one name (registry_lock held): share our live pin, or create a new one. */
static int pin_one(a3s_pins *pins, const char *workspace, const char *name, bool dir, dev_t ws_dev,
                   ino_t ws_ino, a3s_error *err)
{
    if (!name_ok(name))
        return a3s_fail(err, A3S_ERR_SETUP, "cannot pin '%s' in %s: not a single path component",
                        name ? name : "(null)", workspace);
    struct pin_entry *e = registry_find(ws_dev, ws_ino, name);
    if (e) {
        if (entry_matches(pins->wsfd, e)) {
            /* Our live pin. As the other type (a name in both lists) it simply exists;
             * listed twice in one call it is held once. */
            if (e->dir != dir)
                return 0;
            for (size_t i = 0; i < pins->n; i++)
                if (pins->held[i] == e)
                    return 0;
            e->refs++;
            if (pins_hold(pins, workspace, e, err) < 0) {
                e->refs--;
                return -1;
            }
            return 0;
        }
        /* Ours once, but replaced or gone: its holders must not remove whatever is
         * there now, and a new pin gets a new entry. */
        e->stale = true;
        registry_detach(e);
    }
    int rc = pin_create(pins->wsfd, workspace, name, dir, ws_dev, ws_ino, &e, err);
    if (rc <= 0)
        return rc;
    e->refs = 1;
    e->next = registry;
    registry = e;
    if (pins_hold(pins, workspace, e, err) < 0) {
        entry_unref(pins->wsfd, e);
        return -1;
    }
    return 0;
}

static void pins_drop(a3s_pins *pins)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = pins->n; i-- > 0;)
        entry_unref(pins->wsfd, pins->held[i]);
    pthread_mutex_unlock(&registry_lock);
    pins->n = 0;
}

static void pins_free(a3s_pins *pins)
{
    if (pins->wsfd >= 0)
        close(pins->wsfd);
    free(pins->held);
    a3s_strv_free(&pins->paths);
    free(pins);
}

int a3s_pins_acquire(const char *workspace, const a3s_strv *dirs, const a3s_strv *files,
                     a3s_pins **out, a3s_error *err)
{
    if (!out)
        return a3s_fail(err, A3S_ERR_INVALID, "pins: no output");
    *out = NULL;
    if (!workspace || workspace[0] != '/')
        return a3s_fail(err, A3S_ERR_INVALID, "pins: workspace '%s' is not absolute",
                        workspace ? workspace : "(null)");
    a3s_pins *pins = calloc(1, sizeof *pins);
    if (!pins)
        return a3s_fail(err, A3S_ERR_INTERNAL, "pins: out of memory");
    pins->wsfd = open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pins->wsfd < 0) {
        int saved = errno;
        pins_free(pins);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot open workspace %s", workspace);
    }
    struct stat ws;
    if (fstat(pins->wsfd, &ws) < 0) {
        int saved = errno;
        pins_free(pins);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot stat workspace %s", workspace);
    }

    int rc = 0;
    /* One lock for the whole batch: a concurrent release cannot remove a pin between
     * our lookup and our reference. */
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; rc == 0 && dirs && i < dirs->n; i++)
        rc = pin_one(pins, workspace, dirs->v[i], true, ws.st_dev, ws.st_ino, err);
    for (size_t i = 0; rc == 0 && files && i < files->n; i++)
        rc = pin_one(pins, workspace, files->v[i], false, ws.st_dev, ws.st_ino, err);
    pthread_mutex_unlock(&registry_lock);

    if (rc < 0) {
        /* Give back every reference this call took: pins created here go away. */
        pins_drop(pins);
        pins_free(pins);
        return -1;
    }
    *out = pins;
    return 0;
}

char *const *a3s_pins_paths(const a3s_pins *pins)
{
    static char *const none[] = {NULL};
    if (!pins || !pins->paths.v)
        return none;
    return pins->paths.v;
}

bool a3s_pins_held(int wsfd, const char *name)
{
    struct stat ws;
    if (!name_ok(name) || fstat(wsfd, &ws) < 0)
        return false;
    pthread_mutex_lock(&registry_lock);
    struct pin_entry *e = registry_find(ws.st_dev, ws.st_ino, name);
    bool held = e && entry_matches(wsfd, e);
    pthread_mutex_unlock(&registry_lock);
    return held;
}

void a3s_pins_release(a3s_pins *pins)
{
    if (!pins)
        return;
    pins_drop(pins);
    pins_free(pins);
}
