/* The protocols between the supervisor (the library, on the host) and its helper
 * programs: the launcher and its setup step (a3s-sandbox-launch, inside the sandbox), the
 * network relay (a3s-sandbox-relay, inside) and the mediator (a3s-sandbox-mediator, on
 * the host). Fixed descriptor numbers, addresses, exit statuses and the setup records,
 * defined once here and shared by both sides so that they cannot drift apart. Macros
 * only, no includes: the static launcher and relay include it too. */
#ifndef A3S_PROTOCOL_H
#define A3S_PROTOCOL_H

/* The launcher's and the relay's exit status when the sandbox could not be set up: the
 * command never ran (a message is on stderr). */
#define A3S_EXIT_SETUP 125

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
/* The embedded helper programs (backends/linux/helpers.h): sealed memfds holding the
 * launcher's and the relay's images. bwrap executes the first program by the path
 * A3S_FD_PATH(N), which names the memfd itself at exec time (the sandbox's /proc is
 * mounted by then), and the relay starts the launcher the same way. Neither fd reaches the
 * command: the setup step closes both (the relay's, CLOEXEC, goes with its exec; the
 * relay makes the launcher's CLOEXEC and so drops it by starting the launcher). Absent
 * when the program was given by path (A3S_SANDBOX_LAUNCHER, A3S_SANDBOX_RELAY). */
#define A3S_FD_LAUNCHER_IMAGE 13
#define A3S_FD_RELAY_IMAGE 14
/* Sessions (backends/linux/session.c): the namespaces of a session, kept by its owner as
 * descriptors. The launcher started with --hold (by bwrap, once, when the session opens)
 * sends its own namespaces over the socket A3S_FD_HOLD (one byte, SCM_RIGHTS: user, mount,
 * UTS and, when the plan unshares the network, network) and exits. The launcher started
 * with --join (on the host, once per command) finds them at the numbers below, enters
 * them, makes the command's own mount, IPC, pid and cgroup namespaces and goes on as the
 * setup step there (join.c). A3S_FD_NS_NET is absent when the network is the host's. */
#define A3S_FD_HOLD 15
#define A3S_FD_NS_USER 15
#define A3S_FD_NS_MNT 16
#define A3S_FD_NS_UTS 17
#define A3S_FD_NS_NET 18
/* A session's warm launcher (backends/linux/warm.c): started with --join --warm ahead of
 * its command, it enters the namespaces and makes the command's own (join.c), says "R"
 * on this socket (with its mount namespace, SCM_RIGHTS, when it could open it: a
 * session's worker holds it so that the namespace's teardown, all its mounts at once,
 * comes after the command's answer), and waits there for the command: one message holding a descriptor per
 * fd number it is to have (the payload: "W", then each one's number as an int; -1 marks
 * the sealed memfd holding its argv and environment, A3S_WARM_ARGS_MAGIC then
 * NUL-terminated counts and strings). It then goes on as if started with that argv. */
#define A3S_FD_WARM 19
#define A3S_WARM_ARGS_MAGIC "A3SW1"
#define A3S_FD_PATH_(n) "/proc/self/fd/" #n
#define A3S_FD_PATH(n) A3S_FD_PATH_(n)

/* Setup records: the magic, then records of exactly A3S_SETUP_FIELDS NUL-terminated
 * fields: OP, PATH, A, B, C, D (decimal unsigned numbers), in the order they are applied.
 *
 *   mnt-tmpfs / mnt-dir / mnt-bind / mnt-null / mnt-ro  (first, before all others)
 *           the mounts outside the workspace, PATH absolute, in this order; B,C,D=0.
 *           mnt-tmpfs: a tmpfs of mode A (nosuid, nodev); mnt-dir: a directory of mode
 *           A; mnt-bind: PATH as the host shows it before the first of these mounts,
 *           bound onto itself, read-only if A has 1, else writable; A has 2: PATH is
 *           below /dev or /proc, which bwrap's own cover, and bwrap bound it there first
 *           (taken from there, that mount detached, before any other); A has 4: PATH was
 *           spelled without a symbolic link when the records were made, and must be
 *           reached with none (a writable PATH always must); mnt-null: /dev/null
 *           read-only onto PATH; mnt-ro: the mount at PATH made read-only (only it).
 *           Missing mount points and parents are made (0755; a file 0444). They are
 *           the directives of `plan`'s "setup_mounts" (bwrap.c, setup_host.c).
 *   root    PATH=workspace (absolute)  A,B=dev,ino  C=source  D=0
 *   scratch PATH=scratch dir           A,B=dev,ino  C=source  D=0
 *           source 0: bound by path (a mnt-bind); verify that the mount there is that
 *           very directory. source 1: mount the detached mount on fd 9 / 10 there.
 *   protect / ro / rw / hold / mask / tmpfs
 *           PATH relative to the workspace, resolved below it without following any
 *           symbolic link; A,B=dev,ino the scan saw (0,0: no identity check);
 *           C=flags (A3S_SETUP_OPTIONAL); D=expected type (A3S_SETUP_T_*).
 *           protect, ro: bind onto itself read-only; rw: read-write; hold: onto itself
 *           as it is, which makes the entry a mount point that cannot be renamed or
 *           removed;
 *           mask: a directory gets an empty read-only tmpfs, anything else /dev/null;
 *           tmpfs: a private writable tmpfs.
 *   clone   (a session's command, first) PATH=absolute directory as the session's base
 *           shows it, A,B=dev,ino, C=0: the workspace, 1: the scratch directory, D=1:
 *           read-only. Cloned (with what is mounted below it) and checked, then taken
 *           by the root or scratch record as with source 1.
 *   chdir   PATH=workspace (absolute) when it has no "root" record: the command starts
 *           there, entered by path once every mount is made; A..D=0
 *   cwd     PATH relative to the workspace, resolved below it (symbolic links followed
 *           while they stay there): the command starts in that directory; A..D=0
 *   limit   (after the others, before ids) PATH=nofile, core or fsize, A=that resource
 *           limit (soft and hard), B,C,D=0: set for the setup step and the command (a
 *           sandbox started before its plan was known has the caller's limits)
 *   ids     A,B=uid,gid to run as in the sandbox's user namespace, C,D=uid,gid the
 *           command sees (a nested user namespace maps C to A and D to B)
 *
 * The last record is "ids". Every mount is verified after all are made. */
#define A3S_SETUP_MAGIC "a3s-setup-2"
#define A3S_SETUP_FIELDS 6
#define A3S_SETUP_MAX_BYTES (16u << 20)
#define A3S_SETUP_OPTIONAL 1u
enum { A3S_SETUP_T_ANY = 0, A3S_SETUP_T_DIR = 1, A3S_SETUP_T_NONDIR = 2 };

/* The relay's loopback proxies in the sandbox's network namespace (its defaults, the
 * addresses bwrap.c passes it and the proxy environment points at). */
#define A3S_RELAY_ADDR "127.0.0.1"
#define A3S_RELAY_HTTP_PORT "24731"
#define A3S_RELAY_SOCKS_PORT "24732"
#define A3S_RELAY_HTTP A3S_RELAY_ADDR ":" A3S_RELAY_HTTP_PORT   /* HTTP proxy */
#define A3S_RELAY_SOCKS A3S_RELAY_ADDR ":" A3S_RELAY_SOCKS_PORT /* SOCKS5 */

/* ---- The helper program a3s-sandbox-mediator (relay/mediator_main.c) ----
 *
 * backends/linux/medproc.c starts one per mediated run with posix_spawn: the library never
 * forks and goes on running its own code in the child, which in a multithreaded host could
 * wait forever on a lock (malloc's, the resolver's, ...) that another thread held at the
 * fork.
 *
 *   a3s-sandbox-mediator --parent-pid PID [--grant HOST PORT]...
 *
 * PID is the process that spawned it (it exits at once when its parent is another one: that
 * parent died before the death signal was armed). Each grant is two arguments, HOST exactly
 * as a3s_grant_parse normalizes it (lower case; an IPv6 literal canonical and without
 * brackets) and PORT in decimal, 0..65535 without leading zeros (0: any port); at most
 * A3S_MAX_GRANTS of them. So no host text is ever split at a ':'. Its descriptors come at
 * the fixed numbers below; every other one (above A3S_MEDIATOR_FD_LAST) is closed at its
 * start, and 0..2 are /dev/null. */
#define A3S_MEDIATOR_FD_CHANNEL 3 /* AF_UNIX SOCK_SEQPACKET end: the relay's connections */
#define A3S_MEDIATOR_FD_STOP 4    /* pipe read end: readable or hung up means stop */
#define A3S_MEDIATOR_FD_DENIALS 5 /* regular file (memfd): the denial records (mediator.h) */
#define A3S_MEDIATOR_FD_READY 6   /* pipe write end: "R" once serving, else "E<why>" */
#define A3S_MEDIATOR_FD_LAST 6

/* Its exit status. */
#define A3S_MEDIATOR_EXIT_STOPPED 0 /* it served until the stop */
#define A3S_MEDIATOR_EXIT_FAILED 1  /* it could not set up or serve */
#define A3S_MEDIATOR_EXIT_USAGE 2   /* arguments or descriptors refused: nothing served */
#define A3S_MEDIATOR_EXIT_ORPHAN 3  /* its parent was already gone: nothing served */

/* The mapped identity for root callers: sandbox uid/gid 1 is this host id. */
#define A3S_MAPPED_ID_DEFAULT 2139095040u /* 0x7F800000 */

#endif
