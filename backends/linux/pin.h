/* Placeholders ("pins") for protected workspace entries that do not exist, so that the
 * backend can bind them read-only and the command cannot create them. Pins are shared by
 * every execution (any process of this user) in the workspace and recorded in the
 * per-user state directory (stale.h), so that they outlive no holder: the last holder to
 * leave, or the next run after a holder was killed, removes each pin that is still the
 * very inode created and still untouched. */
#ifndef A3S_PIN_H
#define A3S_PIN_H

#include <stdbool.h>

#include <sys/types.h>

#include "a3s_sandbox.h"
#include "pinrec.h"
#include "util.h"

typedef struct a3s_pins a3s_pins;

/* Create a directory (0700) for each name in dirs and an empty file (0600, O_EXCL) for
 * each name in files, directly under workspace, recording them in the state directory
 * under root (see a3s_stale_root). The workspace is the directory open as wsfd (dup'ed),
 * or `workspace` opened without following a final link when wsfd < 0. A name that is already a live, untouched pin of this
 * workspace is shared instead; pins recorded by holders that are all dead are first
 * removed if untouched (or taken over when requested again) and forgotten otherwise.
 * Names that exist otherwise are left alone and not held. On success *out lists the
 * held paths (see a3s_pins_paths). On failure nothing created by this call remains.
 * Fails (A3S_ERR_SETUP) when the state directory is refused (see stale.h). */
int a3s_pins_acquire_in(const char *root, int wsfd, const char *workspace,
                        const a3s_strv *dirs, const a3s_strv *files, a3s_pins **out,
                        a3s_error *err);
/* a3s_pins_acquire_in with root a3s_stale_root(NULL). */
int a3s_pins_acquire(const char *workspace, const a3s_strv *dirs, const a3s_strv *files,
                     a3s_pins **out, a3s_error *err);
/* Absolute paths of the pins held (NULL-terminated, owned by pins). */
char *const *a3s_pins_paths(const a3s_pins *pins);
/* Leave; the last holder of the workspace removes the pins that are still untouched.
 * Always frees. NULL is a no-op. */
void a3s_pins_release(a3s_pins *pins);
/* true when `name`, directly under the workspace open as wsfd, is a recorded pin (state
 * under root) that is still untouched: of a live holder, to be shared, or of a dead one,
 * to be taken over or removed by the next acquire. Waits for a concurrent acquire or
 * release in the workspace to finish, so a pin is never seen unrecorded; when false, a
 * name the caller saw that is now gone was such a pin, removed meanwhile. The scan
 * reports pins (and such vanished names) as missing instead of binding an entry that its
 * holder will remove. */
bool a3s_pins_held(int wsfd, const char *root, const char *name);

/* The same question for many names of one workspace, as one scan asks it: the first
 * question takes the shared mutex and reads the record once; the mutex stays held (no
 * acquire or release in the workspace can run meanwhile, so every answer comes from one
 * record) until a3s_pins_view_close, which the scan's done hook calls. */
typedef struct a3s_pins_view {
    int statefd, lockfd; /* -1: not open; lockfd -2: no lock file (nobody writing) */
    bool open, have;
    dev_t dev;
    ino_t ino;
    struct a3s_pin_record rec;
} a3s_pins_view;
#define A3S_PINS_VIEW_INIT {-1, -1, false, false, 0, 0, {0}}
bool a3s_pins_view_held(a3s_pins_view *v, int wsfd, const char *root, const char *name);
void a3s_pins_view_close(a3s_pins_view *v);
/* Best effort: for every workspace recorded under root whose holders are all dead (and
 * that is still where it was), remove its untouched pins and forget the record. */
void a3s_pins_sweep(const char *root);

#endif
