/* Placeholders kept between runs ("the stash", pin.h): the last holder of a workspace
 * moves each untouched, empty pin into the per-user state directory instead of removing
 * it, and the next acquire in the same workspace moves it back. Creating and removing an
 * inode per pin per run is most of a fresh run's pin cost on some filesystems (ext4
 * without a journal scans past every recently deleted inode on each create); a rename
 * allocates nothing. Nothing of it stays in the workspace.
 *
 * Only where the state directory and the workspace are one filesystem (a rename cannot
 * cross), and only for the same workspace: an entry is named after the workspace's
 * device, inode and birth time (a directory made later with a reused inode number is
 * another workspace) and the pin's name and type. An entry is used only if it is still
 * an empty directory (0700) or an empty file (0600) of this user with no other link;
 * anything else found there is removed, never moved into a workspace. */
#ifndef A3S_PINSTASH_H
#define A3S_PINSTASH_H

#include <stdbool.h>
#include <sys/stat.h>

#include "pinrec.h"

/* Entries not used for this long are removed by the sweep (a3s_pinstash_sweep_one). */
#define A3S_PINSTASH_TTL_SECONDS 600
/* Longer pin names are never kept (the entry's name holds the pin's name in hex). */
#define A3S_PINSTASH_NAME_MAX 48

typedef struct a3s_pinstash {
    int statefd;     /* the state directory (not owned), -1: no stash */
    char prefix[96]; /* "<key>.keep-<birth time>-" */
} a3s_pinstash;

/* The stash of the workspace open as wsfd with state key `key`, or none (statefd -1)
 * when the state directory is on another filesystem or the workspace's birth time is
 * unknown. */
void a3s_pinstash_init(a3s_pinstash *s, int statefd, int wsfd, const struct stat *ws,
                       const char *key);
/* The kept placeholder for (name, dir), opened and checked: its fd (CLOEXEC) with *st, or
 * -1 when there is none to use (an unusable entry is removed). */
int a3s_pinstash_open(const a3s_pinstash *s, const char *name, bool dir, struct stat *st);
/* Move the kept placeholder open as fd into the workspace as `name`, never over an
 * existing entry, and check that `name` is then fd's inode, still empty. Returns 0, or -1
 * with errno: EEXIST (the name exists: nothing moved), ESTALE (moved, but `name` is not
 * that empty inode: a concurrent writer), another (nothing moved). */
int a3s_pinstash_place(const a3s_pinstash *s, int fd, int wsfd, const char *name, bool dir);
/* Keep the pin e (untouched, checked by the caller) instead of removing it. true when
 * the workspace no longer has it (kept, or removed because it was not empty when it
 * arrived); false: nothing done, the caller removes it as before. */
bool a3s_pinstash_keep(const a3s_pinstash *s, int wsfd, const struct a3s_pin_entry *e);
/* For the sweep: remove the state directory entry `name` if it is a kept placeholder
 * unused for A3S_PINSTASH_TTL_SECONDS. */
void a3s_pinstash_sweep_one(int statefd, const char *name);

#endif
