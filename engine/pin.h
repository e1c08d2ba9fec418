/* Placeholders ("pins") for protected workspace entries that do not exist, so that the
 * backend can bind them read-only and the command cannot create them. A pin is removed
 * on release only if it is still the very inode we created and still untouched. */
#ifndef A3S_PIN_H
#define A3S_PIN_H

#include <stdbool.h>

#include "a3s_sandbox.h"
#include "util.h"

typedef struct a3s_pins a3s_pins;

/* Create a directory (0700) for each name in dirs and an empty file (0600, O_EXCL) for
 * each name in files, directly under workspace. Names that appeared meanwhile are left
 * alone and not recorded, except a pin this process already holds there, which is
 * shared (reference-counted). On success *out lists the held paths (see
 * a3s_pins_paths). On failure nothing created by this call remains. */
int a3s_pins_acquire(const char *workspace, const a3s_strv *dirs, const a3s_strv *files,
                     a3s_pins **out, a3s_error *err);
/* Absolute paths of the pins held (NULL-terminated, owned by pins). */
char *const *a3s_pins_paths(const a3s_pins *pins);
/* Remove what we created if unchanged; always frees. NULL is a no-op. */
void a3s_pins_release(a3s_pins *pins);
/* true when `name`, directly under the workspace open as wsfd, is a pin that an
 * a3s_pins of this process currently holds (same inode). The scan reports such names as
 * missing, so a concurrent execution shares the pin (reference count) instead of binding
 * an entry whose first holder would remove it. */
bool a3s_pins_held(int wsfd, const char *name);

#endif
