/* The protocol between the supervisor (the library, on the host) and the trusted setup
 * step inside the sandbox (a3s-sandbox-launch --setup): fixed descriptor numbers and the
 * setup records. Shared by both sides so that they cannot drift apart. */
#ifndef A3S_PROTOCOL_H
#define A3S_PROTOCOL_H

/* Fixed fd numbers inside the launched bwrap process. */
#define A3S_FD_STARTED 3       /* launcher pipe: "S" when set up, "X<status>" at the end */
#define A3S_FD_STATUS 4        /* bwrap --json-status-fd */
#define A3S_FD_ARGS 5          /* bwrap --args */
#define A3S_FD_SECCOMP 6       /* the command's filter, installed by the setup step */
#define A3S_FD_CMD_FILTER 7    /* the relay's command filter (mediated runs) */
#define A3S_FD_SETUP 8         /* sealed memfd: the setup records below */
#define A3S_FD_WS_MOUNT 9      /* mapped identity: idmapped detached mount of the workspace */
#define A3S_FD_SCRATCH_MOUNT 10 /* mapped identity: idmapped detached mount of the scratch */
#define A3S_FD_USERNS 11       /* mapped identity: bwrap --userns */
#define A3S_FD_MEDIATOR 12     /* mediated runs: the relay's end of its channel to the mediator */

/* Setup records: the magic, then records of exactly A3S_SETUP_FIELDS NUL-terminated
 * fields: OP, PATH, A, B, C, D (decimal unsigned numbers), in the order they are applied.
 *
 *   root    PATH=workspace (absolute)  A,B=dev,ino  C=source  D=0
 *   scratch PATH=scratch dir           A,B=dev,ino  C=source  D=0
 *           source 0: bwrap bound it by path; verify that the mount there is that very
 *           directory. source 1: mount the detached mount on fd 9 / 10 there.
 *   protect / ro / rw / hold / mask / tmpfs
 *           PATH relative to the workspace, resolved below it without following any
 *           symbolic link; A,B=dev,ino the scan saw (0,0: no identity check);
 *           C=flags (A3S_SETUP_OPTIONAL); D=expected type (A3S_SETUP_T_*).
 *           protect, ro: bind onto itself read-only; rw: read-write; hold: onto itself
 *           as it is, which makes the entry a mount point that cannot be renamed or
 *           removed;
 *           mask: a directory gets an empty read-only tmpfs, anything else /dev/null;
 *           tmpfs: a private writable tmpfs.
 *   ids     A,B=uid,gid to run as in the sandbox's user namespace, C,D=uid,gid the
 *           command sees (a nested user namespace maps C to A and D to B)
 *
 * The last record is "ids". Every mount is verified after all are made. */
#define A3S_SETUP_MAGIC "a3s-setup-1"
#define A3S_SETUP_FIELDS 6
#define A3S_SETUP_MAX_BYTES (16u << 20)
#define A3S_SETUP_OPTIONAL 1u
enum { A3S_SETUP_T_ANY = 0, A3S_SETUP_T_DIR = 1, A3S_SETUP_T_NONDIR = 2 };

/* The mapped identity for root callers: sandbox uid/gid 1 is this host id. */
#define A3S_MAPPED_ID_DEFAULT 2139095040u /* 0x7F800000 */

#endif
