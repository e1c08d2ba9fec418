/* Removing a tree the command made, safely (see rmtree.c). */
#ifndef A3S_RMTREE_H
#define A3S_RMTREE_H

/* Remove `name` under dfd (a file or a whole tree) without following symlinks;
 * directories the command made unreadable are chmod'ed and retried. No depth limit, no
 * recursion, a few fds whatever the depth. Never enters another mount (nor removes a
 * `name` that is a mount point); everything else still goes. Best effort on individual
 * entries; returns -1 if anything could not be removed. */
int a3s_rmtree_at(int dfd, const char *name);

#endif
