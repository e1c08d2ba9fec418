/* Placeholders ("pins") for missing protected workspace entries, shared across processes
 * and crash-safe.
 *
 * Every workspace operation is relative to a workspace fd opened with O_NOFOLLOW, so a
 * workspace path swapped for a symlink (or renamed away) cannot redirect creation or
 * removal. A pin is identified by (device, inode, ctime) recorded right after creation;
 * it is removed only if the name still refers to that inode, with the same ctime (so not
 * chmod'ed, written or re-linked since, and not a recycled inode number), and it is
 * empty (rmdir of a directory, a regular file of size 0).
 *
 * State, per workspace (key: its device and inode), in the per-user state directory
 * (stale.h):
 *   ws-<dev>-<ino>.lock  two one-byte OFD lock ranges: byte 0 is the mutex for reading
 *                        and changing the record; byte 1 is read-locked by every holder
 *                        for its whole life. The kernel drops both when a holder dies,
 *                        whatever kills it, so "no other read lock on byte 1" means
 *                        "every other holder is gone", and a reused pid means nothing.
 *   ws-<dev>-<ino>.pins  the record: the workspace path and the pins created there.
 *                        Written to a temporary file and renamed, so readers without the
 *                        mutex (a3s_pins_held, during the scan) see a whole record.
 * Pins belong to the workspace, not to the execution that created them: they are
 * removed when the last holder leaves, or by the first run that finds the record with no
 * live holder (its creators were killed). A pin so lives as long as the longest holder,
 * never shorter, so no bind mount of a live execution loses its source.
 *
 * Lock file protocol: the last holder unlinks the record and the lock file while it
 * holds the mutex; whoever locked a lock file must then check that the name still refers
 * to the inode it locked, else retry with a fresh one. */
#include "pin.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "pinrec.h"
#include "stale.h"
#include "wsattrs.h"

#define LOCK_TRIES 64
#define MUTEX_BYTE 0
#define HOLDER_BYTE 1

struct a3s_pins {
    int wsfd;    /* the workspace, O_DIRECTORY|O_NOFOLLOW */
    int statefd; /* the state directory */
    int lockfd;  /* the workspace lock file while we are a holder, else -1 */
    char key[KEY_MAX];
    a3s_strv names; /* held names, parallel to paths */
    a3s_strv paths; /* absolute paths */
};

static void ws_key(char *key, dev_t dev, ino_t ino)
{
    snprintf(key, KEY_MAX, "ws-%llx-%llx", (unsigned long long)dev, (unsigned long long)ino);
}

/* ---------------------------------------------------------------- locks */

static int range_lock(int fd, short type, off_t start, bool wait)
{
    return a3s_stale_lock(fd, type, start, 1, wait);
}

/* Does any other open file description hold the holder byte? When the kernel cannot
 * tell, assume so: then nothing is removed, the safe direction. */
static bool others_hold(int lockfd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = HOLDER_BYTE, .l_len = 1};
    if (fcntl(lockfd, F_OFD_GETLK, &fl) < 0)
        return true;
    return fl.l_type != F_UNLCK;
}

/* Unlink `name` in dfd only if it is still the inode open as fd. */
static void unlink_if_same(int dfd, const char *name, int fd)
{
    struct stat a, b;
    if (fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        (void)unlinkat(dfd, name, 0);
}

/* Open the workspace lock file and take its mutex: exclusive (F_WRLCK, creating the
 * file) to change the state, shared (F_RDLCK) to read it consistently. Returns the fd,
 * -2 when !wait and the mutex is taken or (shared) when there is no lock file, -1 on
 * failure (err filled). */
static int lock_open(int statefd, const char *key, short type, bool wait, a3s_error *err)
{
    char name[FILE_MAX];
    a3s_pinrec_key_file(name, key, ".lock");
    bool create = type == F_WRLCK;
    for (int tries = 0; tries < LOCK_TRIES; tries++) {
        int fd = openat(statefd, name,
                        (create ? O_RDWR | O_CREAT : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (!create && errno == ENOENT)
                return -2;
            return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot open pin lock %s", name);
        }
        if (range_lock(fd, type, MUTEX_BYTE, wait) < 0) {
            int saved = errno;
            close(fd);
            if (!wait && (saved == EAGAIN || saved == EACCES))
                return -2;
            if (saved == ETIMEDOUT)
                return a3s_fail(err, A3S_ERR_SETUP,
                                "pin state %s stays locked by another process (stopped?)", name);
            return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot lock pin state %s", name);
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && fstatat(statefd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
            a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            if (S_ISREG(a.st_mode))
                return fd;
            a3s_stale_lock_close(fd);
            return a3s_fail(err, A3S_ERR_SETUP, "pin lock %s is not a regular file", name);
        }
        a3s_stale_lock_close(fd); /* unlinked by the last holder while we waited: use the new one */
        if (!create && fstatat(statefd, name, &b, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
            return -2;
    }
    return a3s_fail(err, A3S_ERR_SETUP, "pin lock %s keeps being replaced", name);
}

/* ---------------------------------------------------------------- placeholders */

/* Is the entry at `name` an empty placeholder of e's type, and (when e's identity is
 * known, or need_id) e's very inode? */
static bool empty_same(int wsfd, const char *name, const struct a3s_pin_entry *e, bool need_id)
{
    struct stat st;
    if (fstatat(wsfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    if (e->ino == 0 && need_id)
        return false;
    if (e->ino != 0 && (st.st_dev != e->dev || st.st_ino != e->ino))
        return false;
    return e->dir ? S_ISDIR(st.st_mode) : (S_ISREG(st.st_mode) && st.st_size == 0);
}

/* Is `name` under wsfd still the pin e, as created (same inode, ctime and type; a file
 * still empty)? A pending entry never is. */
static bool pin_untouched(int wsfd, const struct a3s_pin_entry *e)
{
    struct stat st;
    if (e->tmp || fstatat(wsfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    if (st.st_dev != e->dev || st.st_ino != e->ino || st.st_ctim.tv_sec != e->ctim.tv_sec ||
        st.st_ctim.tv_nsec != e->ctim.tv_nsec)
        return false;
    return e->dir ? S_ISDIR(st.st_mode) : (S_ISREG(st.st_mode) && st.st_size == 0);
}

/* Remove the placeholder if it is still ours and untouched. Errors are ignored: a pin
 * that cannot be removed is left in place, which is the safe direction; rmdir fails on
 * a directory that got content within the ctime granularity. The window between the
 * check and the unlink is inherent to names; only host processes writing the workspace
 * concurrently can use it, and no sandboxed command writes to a pin.
 * A pending entry (its creator died while making it): the temporary (a random name of
 * ours) goes if it is still an empty placeholder, and the placeholder under its final
 * name if it is the recorded inode, still empty (the rename changed its ctime). */
static void pin_remove(int wsfd, const struct a3s_pin_entry *e)
{
    if (e->tmp) {
        if (empty_same(wsfd, e->tmp, e, false))
            (void)unlinkat(wsfd, e->tmp, e->dir ? AT_REMOVEDIR : 0);
        if (empty_same(wsfd, e->name, e, true))
            (void)unlinkat(wsfd, e->name, e->dir ? AT_REMOVEDIR : 0);
        return;
    }
    if (pin_untouched(wsfd, e))
        (void)unlinkat(wsfd, e->name, e->dir ? AT_REMOVEDIR : 0);
}

/* A pending entry for `name` (the placeholder is made later, see make_pending). */
static int pending_add(struct a3s_pin_record *rec, const char *name, bool dir, a3s_error *err)
{
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "pins: getrandom");
    struct a3s_pin_entry e = {.dir = dir};
    e.tmp = malloc(TMP_LEN + 1);
    e.name = a3s_strdup(name);
    if (e.tmp) {
        memcpy(e.tmp, TMP_PREFIX, sizeof TMP_PREFIX - 1);
        for (size_t i = 0; i < sizeof rnd; i++)
            snprintf(e.tmp + sizeof TMP_PREFIX - 1 + 2 * i, 3, "%02x", rnd[i]);
    }
    if (!e.tmp || !e.name || a3s_pinrec_add(rec, &e) < 0) {
        a3s_pinrec_entry_free(&e);
        return a3s_fail(err, A3S_ERR_INTERNAL, "pins: out of memory");
    }
    return 0;
}

/* Make the pending placeholders rec->v[from..]: each under its temporary name, its
 * identity recorded, then renamed (never over an existing entry) to its name and
 * recorded as a pin. At every point the record lists all that exists. An entry whose
 * name appeared meanwhile is dropped (the name is left alone). Returns 0, or -1 with err
 * (the entries stay pending, for the caller to remove). */
static int make_pending(int wsfd, const char *workspace, int statefd, const char *key,
                        struct a3s_pin_record *rec, size_t from, a3s_error *err)
{
    size_t n = rec->n - from;
    int *fds = malloc(n * sizeof *fds);
    if (!fds)
        return a3s_fail(err, A3S_ERR_INTERNAL, "pins: out of memory");
    for (size_t i = 0; i < n; i++)
        fds[i] = -1;
    int rc = 0;
    struct stat st;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct a3s_pin_entry *e = &rec->v[from + i];
        if (e->dir)
            fds[i] = mkdirat(wsfd, e->tmp, 0700) < 0
                         ? -1
                         : openat(wsfd, e->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        else
            fds[i] = openat(wsfd, e->tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                            0600);
        if (fds[i] < 0 || fstat(fds[i], &st) < 0) {
            rc = a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot create placeholder %s/%s",
                                workspace, e->name);
            break;
        }
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        rec->dirty = true;
    }
    if (rc == 0)
        rc = a3s_pinrec_write(statefd, key, rec, err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct a3s_pin_entry *e = &rec->v[from + i];
        if (renameat2(wsfd, e->tmp, wsfd, e->name, RENAME_NOREPLACE) < 0) {
            if (errno != EEXIST) {
                rc = a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot create placeholder %s/%s",
                                    workspace, e->name);
                break;
            }
            pin_remove(wsfd, e); /* the name exists: not ours to pin */
            a3s_pinrec_entry_free(e);
            continue;
        }
        /* The inode under the name must be the one made here: a concurrent writer that
         * swapped the temporary is refused (and what it put there is not removed). */
        struct stat at;
        if (fstat(fds[i], &st) < 0 || fstatat(wsfd, e->name, &at, AT_SYMLINK_NOFOLLOW) < 0 ||
            st.st_dev != at.st_dev || st.st_ino != at.st_ino) {
            rc = a3s_fail(err, A3S_ERR_SETUP,
                          "placeholder %s/%s changed while being created (concurrent writer?)",
                          workspace, e->name);
            break;
        }
        free(e->tmp);
        e->tmp = NULL;
        e->ctim = st.st_ctim;
    }
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    /* Entries dropped above (name NULL) leave the record. */
    size_t w = from;
    for (size_t i = from; i < rec->n; i++)
        if (rec->v[i].name)
            rec->v[w++] = rec->v[i];
    rec->n = w;
    rec->dirty = true;
    if (rc == 0)
        rc = a3s_pinrec_write(statefd, key, rec, err);
    return rc;
}

/* ---------------------------------------------------------------- pins object */

static bool strv_has(const a3s_strv *sv, const char *s)
{
    for (size_t i = 0; sv && i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

static int pins_hold(a3s_pins *pins, const char *workspace, const char *name, a3s_error *err)
{
    /* "/" as workspace would give "//name": keep paths clean. */
    const char *sep = strcmp(workspace, "/") == 0 ? "" : "/";
    if (a3s_strv_push(&pins->names, name) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "pins: out of memory");
    if (a3s_strv_pushf(&pins->paths, "%s%s%s", workspace, sep, name) < 0) {
        free(pins->names.v[--pins->names.n]);
        pins->names.v[pins->names.n] = NULL;
        return a3s_fail(err, A3S_ERR_INTERNAL, "pins: out of memory");
    }
    return 0;
}

/* Pin one name (mutex held): share a recorded pin, or add a pending entry for one to be
 * made (an existing name is left alone). */
static int pin_one(a3s_pins *pins, struct a3s_pin_record *rec, const char *name, bool dir,
                   const char *workspace, a3s_error *err)
{
    if (strv_has(&pins->names, name))
        return 0; /* listed twice */
    for (size_t i = 0; i < rec->n; i++)
        if (rec->v[i].tmp && strcmp(rec->v[i].name, name) == 0)
            return 0; /* listed twice, as the other type */
    struct a3s_pin_entry *e = a3s_pinrec_find(rec, name);
    if (e) /* a live (or taken over) untouched pin; as the other type it simply exists */
        return e->dir == dir ? pins_hold(pins, workspace, name, err) : 0;
    struct stat st;
    if (fstatat(pins->wsfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    if (errno != ENOENT)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot check placeholder %s/%s", workspace, name);
    return pending_add(rec, name, dir, err);
}

static void pins_free(a3s_pins *pins)
{
    if (pins->lockfd >= 0)
        a3s_stale_lock_close(pins->lockfd);
    if (pins->statefd >= 0)
        close(pins->statefd);
    if (pins->wsfd >= 0)
        close(pins->wsfd);
    a3s_strv_free(&pins->names);
    a3s_strv_free(&pins->paths);
    free(pins);
}

/* With no other holder left: forget the workspace (mutex held, record already removed
 * or empty). A waiter that locked the old file sees it unlinked and retries. */
static void forget_workspace(int statefd, const char *key, int lockfd)
{
    char name[FILE_MAX];
    a3s_pinrec_key_file(name, key, ".pins");
    (void)unlinkat(statefd, name, 0);
    a3s_pinrec_key_file(name, key, ".lock");
    unlink_if_same(statefd, name, lockfd);
}

static bool requested(const struct a3s_pin_entry *e, const a3s_strv *dirs, const a3s_strv *files)
{
    return strv_has(e->dir ? dirs : files, e->name);
}

/* Under the mutex: drop record entries that are no longer our untouched pins; when no
 * holder is alive, remove the untouched ones nobody asks for now (their creators died)
 * and keep the requested ones to be taken over. */
static void reconcile(int wsfd, struct a3s_pin_record *rec, bool alive, const a3s_strv *dirs,
                      const a3s_strv *files)
{
    size_t w = 0;
    for (size_t i = 0; i < rec->n; i++) {
        struct a3s_pin_entry *e = &rec->v[i];
        if (e->tmp) /* its creator died while making it (creators hold the mutex) */
            pin_remove(wsfd, e);
        bool keep = pin_untouched(wsfd, e);
        if (keep && !alive && !requested(e, dirs, files)) {
            pin_remove(wsfd, e);
            keep = false;
        }
        if (keep) {
            rec->v[w++] = *e;
        } else {
            a3s_pinrec_entry_free(e);
            rec->dirty = true;
        }
    }
    rec->n = w;
}

int a3s_pins_acquire_in(const char *root, int wsfd, const char *workspace,
                        const a3s_strv *dirs, const a3s_strv *files, a3s_pins **out,
                        a3s_error *err)
{
    if (!out)
        return a3s_fail(err, A3S_ERR_INVALID, "pins: no output");
    *out = NULL;
    if (!workspace || workspace[0] != '/')
        return a3s_fail(err, A3S_ERR_INVALID, "pins: workspace '%s' is not absolute",
                        workspace ? workspace : "(null)");
    /* Refuse bad names before anything is created. */
    for (int l = 0; l < 2; l++) {
        const a3s_strv *sv = l ? files : dirs;
        for (size_t i = 0; sv && i < sv->n; i++)
            if (!a3s_pinrec_name_ok(sv->v[i]))
                return a3s_fail(err, A3S_ERR_SETUP,
                                "cannot pin '%s' in %s: not a single path component",
                                sv->v[i] ? sv->v[i] : "(null)", workspace);
    }
    a3s_pins *pins = calloc(1, sizeof *pins);
    if (!pins)
        return a3s_fail(err, A3S_ERR_INTERNAL, "pins: out of memory");
    pins->statefd = pins->lockfd = -1;
    pins->wsfd = wsfd >= 0 ? fcntl(wsfd, F_DUPFD_CLOEXEC, 0)
                           : open(workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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
    ws_key(pins->key, ws.st_dev, ws.st_ino);
    if ((pins->statefd = a3s_stale_state_open(root, true, err)) < 0) {
        pins_free(pins);
        return -1;
    }
    int lockfd = lock_open(pins->statefd, pins->key, F_WRLCK, true, err);
    if (lockfd < 0) {
        pins_free(pins);
        return -1;
    }
    bool alive = others_hold(lockfd);
    struct a3s_pin_record rec;
    if (a3s_pinrec_read(pins->statefd, pins->key, &rec, err) < 0) {
        a3s_stale_lock_close(lockfd);
        pins_free(pins);
        return -1;
    }
    /* The first holder keeps the workspace root's mode and ACLs for the holders to
     * restore; a record left by dead holders is their original: restored first. */
    if (!alive) {
        (void)a3s_wsattrs_restore(pins->statefd, pins->key, pins->wsfd, true, workspace);
        if (a3s_wsattrs_keep(pins->statefd, pins->key, pins->wsfd, workspace, err) < 0) {
            a3s_pinrec_free(&rec);
            a3s_stale_lock_close(lockfd);
            pins_free(pins);
            return -1;
        }
    }
    reconcile(pins->wsfd, &rec, alive, dirs, files);
    if (!rec.ws_path || strcmp(rec.ws_path, workspace) != 0) {
        /* The path the sweep will look for the workspace at: the latest one. */
        char *p = a3s_strdup(workspace);
        if (p) {
            free(rec.ws_path);
            rec.ws_path = p;
            rec.dirty = rec.dirty || rec.n > 0;
        }
    }

    size_t before = rec.n; /* entries from here on are made by this call */
    int rc = 0;
    for (size_t i = 0; rc == 0 && dirs && i < dirs->n; i++)
        rc = pin_one(pins, &rec, dirs->v[i], true, workspace, err);
    for (size_t i = 0; rc == 0 && files && i < files->n; i++)
        rc = pin_one(pins, &rec, files->v[i], false, workspace, err);
    bool holding = false;
    if (rc == 0) {
        /* Always a holder (the workspace attributes); and before the record names our
         * pins, so nobody can see them without a holder. */
        if (range_lock(lockfd, F_RDLCK, HOLDER_BYTE, false) < 0)
            rc = a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot lock pin state %s", pins->key);
        else
            holding = true;
    }
    /* Recorded (pending) before anything is made: a kill at any later point leaves a
     * record that the next acquire or sweep acts on. */
    if (rc == 0 && rec.dirty)
        rc = a3s_pinrec_write(pins->statefd, pins->key, &rec, err);
    if (rc == 0 && rec.n > before)
        rc = make_pending(pins->wsfd, workspace, pins->statefd, pins->key, &rec, before, err);
    for (size_t i = before; rc == 0 && i < rec.n; i++)
        rc = pins_hold(pins, workspace, rec.v[i].name, err);
    if (rc < 0) {
        /* Remove what this call made; keep the clean-up of dead holders' pins. */
        for (size_t i = before; i < rec.n; i++) {
            pin_remove(pins->wsfd, &rec.v[i]);
            a3s_pinrec_entry_free(&rec.v[i]);
        }
        rec.n = before;
        rec.dirty = true;
        if (holding)
            (void)range_lock(lockfd, F_UNLCK, HOLDER_BYTE, false);
        holding = false;
        (void)a3s_pinrec_write(pins->statefd, pins->key, &rec, NULL);
    }
    if (holding) {
        (void)range_lock(lockfd, F_UNLCK, MUTEX_BYTE, false);
        pins->lockfd = lockfd;
    } else {
        if (!alive) {
            (void)a3s_wsattrs_restore(pins->statefd, pins->key, pins->wsfd, true, workspace);
            if (rec.n == 0)
                forget_workspace(pins->statefd, pins->key, lockfd);
        }
        a3s_stale_lock_close(lockfd);
    }
    a3s_pinrec_free(&rec);
    if (rc < 0) {
        pins_free(pins);
        return -1;
    }
    *out = pins;
    return 0;
}

int a3s_pins_acquire(const char *workspace, const a3s_strv *dirs, const a3s_strv *files,
                     a3s_pins **out, a3s_error *err)
{
    return a3s_pins_acquire_in(a3s_stale_root(NULL), -1, workspace, dirs, files, out, err);
}

char *const *a3s_pins_paths(const a3s_pins *pins)
{
    static char *const none[] = {NULL};
    if (!pins || !pins->paths.v)
        return none;
    return pins->paths.v;
}

void a3s_pins_release(a3s_pins *pins)
{
    if (!pins)
        return;
    if (pins->lockfd >= 0 && range_lock(pins->lockfd, F_WRLCK, MUTEX_BYTE, true) == 0) {
        (void)range_lock(pins->lockfd, F_UNLCK, HOLDER_BYTE, false);
        /* What this run's command did to the root goes now, other holders or not. */
        (void)a3s_wsattrs_restore(pins->statefd, pins->key, pins->wsfd, false, NULL);
        struct a3s_pin_record rec;
        /* Last one out removes the pins; an unreadable record keeps them (fail safe). */
        if (!others_hold(pins->lockfd) && a3s_pinrec_read(pins->statefd, pins->key, &rec, NULL) == 0) {
            for (size_t i = 0; i < rec.n; i++)
                pin_remove(pins->wsfd, &rec.v[i]);
            a3s_pinrec_free(&rec);
            (void)a3s_wsattrs_restore(pins->statefd, pins->key, pins->wsfd, true, NULL);
            forget_workspace(pins->statefd, pins->key, pins->lockfd);
        }
    } else if (pins->lockfd >= 0) {
        /* The mutex stays taken (a holder stopped with SIGSTOP): the pins stay for a
         * later sweep, but what this run's command did to the root goes now all the
         * same. Restoring only narrows (wsattrs.c) and the record was written before this
         * run began: safe without the mutex. */
        (void)a3s_wsattrs_restore(pins->statefd, pins->key, pins->wsfd, false, NULL);
    }
    pins_free(pins); /* unlocks the holder byte and the mutex */
}

bool a3s_pins_held(int wsfd, const char *root, const char *name)
{
    struct stat ws;
    if (!a3s_pinrec_name_ok(name) || fstat(wsfd, &ws) < 0)
        return false;
    int statefd = a3s_stale_state_open(root, false, NULL);
    if (statefd < 0)
        return false; /* no state, or refused: then an acquire fails anyway */
    char key[KEY_MAX];
    ws_key(key, ws.st_dev, ws.st_ino);
    /* Shared mutex: never a half-done acquire (pins created, not yet recorded) or
     * release (record gone, pins not yet removed). Without a lock file (-2) nobody is
     * writing: writers create it first and remove it last. */
    int lockfd = lock_open(statefd, key, F_RDLCK, true, NULL);
    struct a3s_pin_record rec;
    bool held = false;
    if (lockfd != -1 && a3s_pinrec_read(statefd, key, &rec, NULL) == 0) {
        struct a3s_pin_entry *e = a3s_pinrec_find(&rec, name);
        held = e && pin_untouched(wsfd, e);
        a3s_pinrec_free(&rec);
    }
    if (lockfd >= 0)
        a3s_stale_lock_close(lockfd);
    close(statefd);
    return held;
}

bool a3s_pins_view_held(a3s_pins_view *v, int wsfd, const char *root, const char *name)
{
    struct stat ws;
    if (!a3s_pinrec_name_ok(name) || fstat(wsfd, &ws) < 0)
        return false;
    if (v->open && (v->dev != ws.st_dev || v->ino != ws.st_ino))
        return a3s_pins_held(wsfd, root, name); /* another workspace: ask on its own */
    if (!v->open) {
        v->open = true;
        v->dev = ws.st_dev;
        v->ino = ws.st_ino;
        if ((v->statefd = a3s_stale_state_open(root, false, NULL)) < 0) {
            v->statefd = -1;
            return false; /* no state, or refused: then an acquire fails anyway */
        }
        char key[KEY_MAX];
        ws_key(key, ws.st_dev, ws.st_ino);
        v->lockfd = lock_open(v->statefd, key, F_RDLCK, true, NULL);
        v->have = v->lockfd != -1 && a3s_pinrec_read(v->statefd, key, &v->rec, NULL) == 0;
    }
    if (!v->have)
        return false;
    struct a3s_pin_entry *e = a3s_pinrec_find(&v->rec, name);
    return e && pin_untouched(wsfd, e);
}

void a3s_pins_view_close(a3s_pins_view *v)
{
    if (v->have)
        a3s_pinrec_free(&v->rec);
    if (v->lockfd >= 0)
        a3s_stale_lock_close(v->lockfd);
    if (v->statefd >= 0)
        close(v->statefd);
    *v = (a3s_pins_view)A3S_PINS_VIEW_INIT;
}

/* ---------------------------------------------------------------- sweep */

/* One recorded workspace: if all its holders are dead and it is still where it was,
 * remove its untouched pins and forget it. */
static void sweep_key(int statefd, const char *key)
{
    unsigned long long dev, ino;
    int used = 0;
    if (sscanf(key, "ws-%llx-%llx%n", &dev, &ino, &used) != 2 || key[used] != '\0')
        return;
    int lockfd = lock_open(statefd, key, F_WRLCK, false, NULL);
    if (lockfd < 0)
        return; /* busy: someone is acquiring or releasing there right now */
    struct a3s_pin_record rec;
    if (others_hold(lockfd) || a3s_pinrec_read(statefd, key, &rec, NULL) < 0) {
        a3s_stale_lock_close(lockfd);
        return;
    }
    bool forget = rec.n == 0;
    if (!forget && rec.ws_path) {
        int wsfd = open(rec.ws_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (wsfd >= 0 && fstat(wsfd, &st) == 0 && (unsigned long long)st.st_dev == dev &&
            (unsigned long long)st.st_ino == ino) {
            for (size_t i = 0; i < rec.n; i++)
                pin_remove(wsfd, &rec.v[i]);
            forget = true;
        }
        if (wsfd >= 0)
            close(wsfd);
        /* Moved or gone: the record stays for an acquire in that workspace. */
    }
    a3s_pinrec_free(&rec);
    /* The workspace attributes the dead holders kept: restored where the workspace is
     * still found; else kept, and so is the lock file that leads a sweep here. */
    char attrs[FILE_MAX];
    struct stat ast;
    a3s_pinrec_key_file(attrs, key, ".attrs");
    (void)a3s_wsattrs_restore(statefd, key, -1, true, NULL);
    if (fstatat(statefd, attrs, &ast, AT_SYMLINK_NOFOLLOW) == 0)
        forget = false;
    if (forget)
        forget_workspace(statefd, key, lockfd);
    a3s_stale_lock_close(lockfd);
}

/* Every recorded workspace has a lock file "ws-<key>.lock" (created first, removed last). */
static void sweep_lock_cb(int statefd, const char *name, void *ud)
{
    (void)ud;
    size_t n = strlen(name);
    if (n < 5 || n >= KEY_MAX + 5 || strcmp(name + n - 5, ".lock") != 0)
        return;
    char key[KEY_MAX];
    memcpy(key, name, n - 5);
    key[n - 5] = '\0';
    sweep_key(statefd, key);
}

void a3s_pins_sweep(const char *root)
{
    a3s_stale_foreach(root, "ws-", sweep_lock_cb, NULL);
}
