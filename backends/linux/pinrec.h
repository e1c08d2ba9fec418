/* The record of one workspace's placeholders ("pins", pin.h) in the per-user state
 * directory: "ws-<dev>-<ino>.pins", a magic line, the workspace path, then one line per
 * pin (final: type, device, inode, ctime, name; pending: "P", type, device, inode, the
 * temporary name, the name). Names and paths are hex, so any bytes fit the line format.
 * Written to a temporary file and renamed: readers always see a whole record. */
#ifndef A3S_PINREC_H
#define A3S_PINREC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "a3s_sandbox.h"

#define KEY_MAX 64
#define FILE_MAX (KEY_MAX + 16)
/* Pending placeholders are made under ".a3s-pin-<32 hex>" and renamed. */
#define TMP_PREFIX ".a3s-pin-"
#define TMP_LEN (sizeof TMP_PREFIX - 1 + 32)

struct a3s_pin_entry {
    char *name;
    /* Pending (created by an acquire that has not finished): the placeholder is made
     * under this unique temporary name, then renamed to name. Recorded before anything
     * is created, so that a creator killed at any point leaves a record that the next
     * acquire or sweep acts on. dev/ino are 0 until the temporary is made. */
    char *tmp;
    bool dir;
    dev_t dev;
    ino_t ino;
    struct timespec ctim;
};

struct a3s_pin_record {
    char *ws_path; /* the workspace path when last written (for the sweep) */
    struct a3s_pin_entry *v;
    size_t n, cap;
    bool dirty; /* differs from the file */
};

/* A single path component other than "." and "..". */
bool a3s_pinrec_name_ok(const char *name);
bool a3s_pinrec_tmp_name_ok(const char *name);
/* "<key><suffix>" into out (FILE_MAX bytes). */
void a3s_pinrec_key_file(char *out, const char *key, const char *suffix);

void a3s_pinrec_entry_free(struct a3s_pin_entry *e);
void a3s_pinrec_free(struct a3s_pin_record *rec);
/* The final (not pending) entry for name, or NULL. */
struct a3s_pin_entry *a3s_pinrec_find(struct a3s_pin_record *rec, const char *name);
/* Append e, taking its strings; -1 on ENOMEM. */
int a3s_pinrec_add(struct a3s_pin_record *rec, const struct a3s_pin_entry *e);
/* Read the record of key (absent: empty). A record that cannot be read or parsed fails
 * (A3S_ERR_SETUP): forgetting it would leave its pins behind. */
int a3s_pinrec_read(int statefd, const char *key, struct a3s_pin_record *rec, a3s_error *err);
/* Replace the record atomically; an empty one is removed. Only the mutex holder writes. */
int a3s_pinrec_write(int statefd, const char *key, const struct a3s_pin_record *rec,
                     a3s_error *err);

#endif
