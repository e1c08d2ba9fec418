/* Other names of a host directory: where the mount table shows the same files under
 * another path (a bind mount of the workspace, of a home, of a directory holding either,
 * or of a directory inside one of them). The host root is visible read-only in the
 * sandbox, so whatever a plan hides or masks by path is still readable under such a name
 * unless the plan hides that too. Internal to bindings/lua (the a3s.host.aliases query
 * and its fact). */
#ifndef A3S_ALIASES_H
#define A3S_ALIASES_H

#include <stddef.h>

/* The aliases of the existing absolute `path` (canonical: no link, no "."/".."), read
 * from mountinfo (a NULL mountinfo reads /proc/self/mountinfo): each path other than
 * `path` and outside it where the same directory or file, or a part of it, is mounted
 * and reachable now (no other mount on top at its mount point). Sorted, without
 * duplicates, as "a NUL b NUL ... NUL" in *out (NULL, length 0 when none; free it). 0, or
 * -1 with errno: the mount table could not be read or understood (the caller cannot know
 * what is exposed: it must refuse), ENOMEM. A path that does not exist has no aliases. */
int a3s_aliases_of(const char *path, const char *mountinfo, char **out, size_t *len);

/* The same from a mount table read once (one policy evaluation, one check of what it
 * read, asks for many paths): a3s_aliases_table (NULL with errno), a3s_aliases_in (as
 * a3s_aliases_of), a3s_aliases_table_free (NULL is fine). */
typedef struct a3s_mount_table a3s_mount_table;
a3s_mount_table *a3s_aliases_table(const char *mountinfo);
int a3s_aliases_in(const a3s_mount_table *t, const char *path, char **out, size_t *len);
/* The mount points strictly below path in the table, whatever they show and whether or
 * not another mount covers them (nothing is examined: no answer depends on what a command
 * can rename), in the same form. */
int a3s_aliases_below(const a3s_mount_table *t, const char *path, char **out, size_t *len);
void a3s_aliases_table_free(a3s_mount_table *t);
/* A digest of the table's mounts (each one's id, device, root and mount point, and for
 * this process's own table every mount's unique id where the kernel gives them, Linux
 * 6.8), as 16 hex digits and a NUL into hex: equal digests, the same mounts. */
void a3s_aliases_table_digest(const a3s_mount_table *t, char hex[17]);

#endif
