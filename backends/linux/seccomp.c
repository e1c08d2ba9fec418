/* The seccomp filter: the plan's seccomp section compiled with libseccomp in the parent,
 * exported as classic BPF into a sealed memfd for bwrap (--seccomp FD), or loaded into
 * the calling process.
 *
 * One walk over the plan (sc_walk) produces the rule list; the same walk feeds both the
 * libseccomp compiler and the JSON description, so the description cannot drift from the
 * filter.
 *
 * Invariants whatever the plan says:
 *  - default action ALLOW (this is a deny list on top of the namespaces);
 *  - a foreign architecture kills the process (SCMP_FLTATR_ACT_BADARCH);
 *  - x86_64: x32 syscall numbers (nr | 0x40000000, which arrive with the x86_64 audit
 *    arch) kill the process. libseccomp does this itself for a filter whose only arch is
 *    x86_64: the generated program tests `nr >= 0x40000000` right after the arch check
 *    and jumps to the bad-arch action (verified against libseccomp 2.5.4 and proven at
 *    run time by spec/unit/test_seccomp_filter.c). We therefore must never add SCMP_ARCH_X32.
 *  - only x86_64 and aarch64 are supported: elsewhere socket(2) may be reachable through
 *    the socketcall(2) multiplexer, which rules on socket() would not cover;
 *  - no set-uid/set-gid file can be created (systemd's RestrictSUIDSGID=): S_ISUID or
 *    S_ISGID in the mode of chmod, fchmod, fchmodat(2), mkdir(at), mknod(at), creat, and
 *    of open/openat with O_CREAT or O_TMPFILE -> EPERM; openat2 -> ENOSYS. Fixed backend
 *    behaviour, not a plan setting, so the plan and its digest do not change; a plan
 *    rule denying one of these syscalls outright takes its place. io_uring could bypass
 *    it: the baseline denies io_uring. */
#include "a3s_seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/filter.h>

#include <jansson.h>

#include <seccomp.h> /* libseccomp (ours is a3s_seccomp.h) */

#include "json.h"
#include "util.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* Allowed address families must be below this (the kernel's AF_MAX is 46 today); it also
 * bounds the number of rules the family allow list expands to. */
#define SC_FAMILY_LIMIT 256
/* SECCOMP_RET_ERRNO data is capped by the kernel at MAX_ERRNO. 0 would make a "denied"
 * call report success, so it is refused. */
#define SC_ERRNO_MAX 4095

/* Namespace-creating clone flags. clone(2) only looks at the low 32 bits of its flags.
 * CLONE_NEWTIME (0x80) overlaps CSIGNAL in clone(2), where it can only mean an exit signal
 * >= 128, which is invalid anyway; it is listed so the set is every CLONE_NEW* flag. */
static const unsigned long sc_clone_ns_flags[] = {
    CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET, CLONE_NEWTIME,
};

/* ioctl(2) requests that push input into a terminal (or drive the console). */
static const unsigned long sc_tty_ioctls[] = {TIOCSTI, TIOCLINUX};

/* socketpair(2) allow list when socketpair_unix is set */
static const int sc_unix_only[] = {AF_UNIX};

/* The mode bits no command may set, one rule each (libseccomp ORs rules). */
static const unsigned long sc_setid_bits[] = {S_ISUID, S_ISGID};
/* open flags under which the mode is used. O_TMPFILE is __O_TMPFILE|O_DIRECTORY and has
 * no O_CREAT: its own bit is tested alone (the kernel needs both bits, so this is wider). */
static const unsigned long sc_create_flags[] = {O_CREAT, O_TMPFILE & ~O_DIRECTORY};

/* Numbers of syscalls newer than some libseccomp releases (the same on x86_64 and
 * aarch64), denied with ENOSYS by number when libseccomp does not know the name: libc
 * then falls back to an older call, which is filtered. */
#define SC_NR_OPENAT2 437
#define SC_NR_FCHMODAT2 452

/* Syscalls that take a file mode. flags >= 0: the mode counts only with a create flag
 * in that argument. raw: see above. */
static const struct {
    const char *syscall;
    int mode;
    int flags;
    int raw;
} sc_setid_calls[] = {
    {"chmod", 1, -1, 0},    {"fchmod", 1, -1, 0},
    {"fchmodat", 2, -1, 0}, {"fchmodat2", 2, -1, SC_NR_FCHMODAT2},
    {"mkdir", 1, -1, 0},    {"mkdirat", 2, -1, 0},
    {"mknod", 1, -1, 0},    {"mknodat", 2, -1, 0},
    {"creat", 1, -1, 0},    {"open", 2, 1, 0},
    {"openat", 3, 2, 0},
};

enum sc_cond {
    SC_ALWAYS = 0,    /* every call */
    SC_FAMILY_NOT_IN, /* arg0 (address family) is not one of fam[] */
    SC_CLONE_NS,      /* arg0 has any CLONE_NEW* flag */
    SC_TTY_INJECT,    /* arg1 is TIOCSTI or TIOCLINUX (low 32 bits) */
    SC_SETID_MODE,    /* arg mode_arg has S_ISUID or S_ISGID (and, when flags_arg >= 0,
                       * that arg has O_CREAT or O_TMPFILE) */
};

typedef struct sc_desc {
    const char *syscall;
    int nr; /* native number; < 0 when absent on this architecture */
    int errnum;
    enum sc_cond cond;
    const int *fam; /* SC_FAMILY_NOT_IN: sorted, unique */
    size_t nfam;
    const a3s_prov *prov; /* NULL for rules implied by the plan's booleans */
    const char *problem;  /* non-NULL: this rule cannot be compiled, and why */
    bool absent;          /* known to libseccomp but not on this arch: skipped */
    bool fixed;           /* backend behaviour, not from the plan */
    bool stream_only;     /* SC_FAMILY_NOT_IN on socketpair: also deny every type but
                             SOCK_STREAM and SOCK_SEQPACKET */
    int mode_arg;         /* SC_SETID_MODE */
    int flags_arg;        /* SC_SETID_MODE: -1 when the mode always applies */
} sc_desc;

typedef int (*sc_emit_fn)(void *ud, const sc_desc *d, a3s_error *err);

/* Address family names for the description (errno names: a3s_errno_symbol, util.c). */
static const char *sc_family_name(int f)
{
    switch (f) {
    case AF_UNSPEC: return "AF_UNSPEC";
    case AF_UNIX: return "AF_UNIX";
    case AF_INET: return "AF_INET";
    case AF_INET6: return "AF_INET6";
    case AF_NETLINK: return "AF_NETLINK";
    case AF_PACKET: return "AF_PACKET";
    case AF_CAN: return "AF_CAN";
    case AF_TIPC: return "AF_TIPC";
    case AF_BLUETOOTH: return "AF_BLUETOOTH";
    case AF_ALG: return "AF_ALG";
    case AF_VSOCK: return "AF_VSOCK";
#ifdef AF_XDP
    case AF_XDP: return "AF_XDP";
#endif
    default: return NULL;
    }
}

static int sc_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Resolve d->syscall on the native architecture, marking unknown or absent names. */
static void sc_resolve(sc_desc *d)
{
    if (!d->syscall || !*d->syscall) {
        d->problem = "empty syscall name";
        return;
    }
    d->nr = seccomp_syscall_resolve_name(d->syscall);
    if (d->nr == __NR_SCMP_ERROR)
        d->problem = "unknown syscall";
    else if (d->nr < 0)
        d->absent = true; /* a libseccomp pseudo number: not a syscall here */
}

static bool sc_errno_ok(int e)
{
    return e > 0 && e <= SC_ERRNO_MAX;
}

/* true when the plan's deny list has an unconditional rule for `name`: it then covers
 * every call, so the conditional rules the booleans imply are not added (libseccomp
 * cannot hold both for one syscall, and the unconditional one is the stricter). */
static bool sc_denied(const a3s_seccomp_plan *sp, const char *name)
{
    for (size_t i = 0; i < sp->ndeny; i++)
        if (sp->deny[i].syscall && strcmp(sp->deny[i].syscall, name) == 0)
            return true;
    return false;
}

static int sc_emit_implied(const a3s_seccomp_plan *sp, sc_emit_fn emit, void *ud, const char *name,
                           int errnum, enum sc_cond cond, const int *fam, size_t nfam,
                           const char *fam_problem, a3s_error *err)
{
    if (sc_denied(sp, name))
        return 0;
    sc_desc d = {.syscall = name, .errnum = errnum, .cond = cond, .fam = fam, .nfam = nfam};
    /* A datagram pair can sendto() any pathname socket it sees: only connected types. */
    d.stream_only = cond == SC_FAMILY_NOT_IN && strcmp(name, "socketpair") == 0;
    sc_resolve(&d);
    if (!d.problem && !sc_errno_ok(errnum))
        d.problem = "errno out of range 1..4095";
    if (!d.problem && fam_problem)
        d.problem = fam_problem;
    return emit(ud, &d, err);
}

/* A fixed rule (not from the plan). A name unknown to libseccomp is a problem (fail
 * closed) unless raw > 0: then that number is denied with ENOSYS. */
static int sc_emit_fixed(const a3s_seccomp_plan *sp, sc_emit_fn emit, void *ud, sc_desc d, int raw,
                         a3s_error *err)
{
    if (sc_denied(sp, d.syscall))
        return 0;
    d.fixed = true;
    sc_resolve(&d);
    if (d.problem && d.nr == __NR_SCMP_ERROR && raw > 0) {
        d.problem = NULL;
        d.nr = raw;
        d.errnum = ENOSYS;
        d.cond = SC_ALWAYS;
    }
    return emit(ud, &d, err);
}

/* Walk the plan's rules in a fixed order: deny list (plan order, exact duplicates
 * dropped), socket, socketpair, clone, clone3, ioctl, then the fixed set-id rules and
 * openat2. Fails only when emit fails or on ENOMEM; rule problems are reported to emit
 * in sc_desc.problem. */
static int sc_walk(const a3s_seccomp_plan *sp, sc_emit_fn emit, void *ud, a3s_error *err)
{
    int rc = -1;
    int *fam = NULL;
    size_t nfam = 0;
    const char *fam_problem = NULL;

    if (sp->nsocket_allow > 0) {
        fam = malloc(sp->nsocket_allow * sizeof *fam);
        if (!fam)
            return a3s_fail(err, A3S_ERR_INTERNAL, "seccomp: out of memory");
        memcpy(fam, sp->socket_allow, sp->nsocket_allow * sizeof *fam);
        qsort(fam, sp->nsocket_allow, sizeof *fam, sc_cmp_int);
        for (size_t i = 0; i < sp->nsocket_allow; i++) {
            if (fam[i] < 0 || fam[i] >= SC_FAMILY_LIMIT)
                fam_problem = "allowed address family out of range 0..255";
            if (nfam == 0 || fam[nfam - 1] != fam[i])
                fam[nfam++] = fam[i];
        }
    }

    for (size_t i = 0; i < sp->ndeny; i++) {
        const a3s_sc_rule *r = &sp->deny[i];
        sc_desc d = {.syscall = r->syscall, .errnum = r->errnum, .prov = &r->prov};
        bool dup = false;
        sc_resolve(&d);
        if (!d.problem && !sc_errno_ok(r->errnum))
            d.problem = "errno out of range 1..4095";
        for (size_t j = 0; !d.problem && j < i; j++) {
            const a3s_sc_rule *o = &sp->deny[j];
            if (!o->syscall || strcmp(o->syscall, r->syscall) != 0)
                continue;
            if (o->errnum != r->errnum)
                d.problem = "denied twice with different errnos";
            else
                dup = true;
            break;
        }
        if (dup && !d.problem)
            continue;
        if (emit(ud, &d, err) < 0)
            goto out;
    }

    /* socket(2): every family denied, or only the families not in the allow list. */
    if (sc_emit_implied(sp, emit, ud, "socket", sp->socket_errnum,
                        nfam ? SC_FAMILY_NOT_IN : SC_ALWAYS, fam, nfam, fam_problem, err) < 0)
        goto out;

    /* socketpair(2): an AF_UNIX pair cannot reach outside the sandbox. */
    if (sc_emit_implied(sp, emit, ud, "socketpair", sp->socket_errnum,
                        sp->socketpair_unix ? SC_FAMILY_NOT_IN : SC_ALWAYS, sc_unix_only,
                        sp->socketpair_unix ? 1 : 0, NULL, err) < 0)
        goto out;

    if (sp->deny_clone_ns) {
        if (sc_emit_implied(sp, emit, ud, "clone", EPERM, SC_CLONE_NS, NULL, 0, NULL, err) < 0)
            goto out;
        /* clone3 passes its flags in memory, which seccomp cannot inspect: ENOSYS makes
         * libc fall back to clone(2), where the flags are checked. */
        if (sc_emit_implied(sp, emit, ud, "clone3", ENOSYS, SC_ALWAYS, NULL, 0, NULL, err) < 0)
            goto out;
    }

    if (sp->deny_tty_inject &&
        sc_emit_implied(sp, emit, ud, "ioctl", EPERM, SC_TTY_INJECT, NULL, 0, NULL, err) < 0)
        goto out;

    for (size_t i = 0; i < sizeof sc_setid_calls / sizeof sc_setid_calls[0]; i++) {
        sc_desc d = {.syscall = sc_setid_calls[i].syscall,
                     .errnum = EPERM,
                     .cond = SC_SETID_MODE,
                     .mode_arg = sc_setid_calls[i].mode,
                     .flags_arg = sc_setid_calls[i].flags};
        if (sc_emit_fixed(sp, emit, ud, d, sc_setid_calls[i].raw, err) < 0)
            goto out;
    }
    /* openat2's flags and mode are in memory, which seccomp cannot inspect: ENOSYS makes
     * libc fall back to openat(2), where they are checked. */
    sc_desc o2 = {.syscall = "openat2", .errnum = ENOSYS, .cond = SC_ALWAYS};
    if (sc_emit_fixed(sp, emit, ud, o2, SC_NR_OPENAT2, err) < 0)
        goto out;

    rc = 0;
out:
    free(fam);
    return rc;
}

/* ---- compiling into libseccomp ---- */

static int sc_add(scmp_filter_ctx ctx, const sc_desc *d, unsigned int n,
                  const struct scmp_arg_cmp *cmp, a3s_error *err)
{
    /* _exact: the rule must go in as written (no silent rewriting, e.g. socketcall). */
    int rc = seccomp_rule_add_exact_array(ctx, SCMP_ACT_ERRNO((uint32_t)d->errnum), d->nr, n, cmp);
    if (rc < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, -rc, "seccomp: adding the rule for %s",
                              d->syscall);
    return 0;
}

static int sc_emit_filter(void *ud, const sc_desc *d, a3s_error *err)
{
    scmp_filter_ctx ctx = ud;

    if (d->problem) {
        if (d->prov && d->prov->file)
            return a3s_fail(err, A3S_ERR_SETUP, "seccomp: %s \"%s\" (%s:%d)", d->problem,
                            d->syscall ? d->syscall : "", d->prov->file, d->prov->line);
        return a3s_fail(err, A3S_ERR_SETUP, "seccomp: %s \"%s\"", d->problem,
                        d->syscall ? d->syscall : "");
    }
    if (d->absent)
        return 0;

    switch (d->cond) {
    case SC_ALWAYS: return sc_add(ctx, d, 0, NULL, err);

    case SC_FAMILY_NOT_IN: {
        /* Deny exactly the 64-bit values that are not an allowed family: each value below
         * the largest allowed family that is not allowed (masked 32-bit compare, as the
         * kernel reads an int), then everything above it as a full 64-bit compare, which
         * also catches any value with high bits set (fail closed: the kernel would read
         * (1<<32)|AF_INET as AF_INET, but we refuse it). */
        int max = d->fam[d->nfam - 1];
        size_t k = 0;
        for (int v = 0; v < max; v++) {
            if (k < d->nfam && d->fam[k] == v) {
                k++;
                continue;
            }
            struct scmp_arg_cmp c = {0, SCMP_CMP_MASKED_EQ, 0xffffffffULL, (scmp_datum_t)v};
            if (sc_add(ctx, d, 1, &c, err) < 0)
                return -1;
        }
        struct scmp_arg_cmp ge = {0, SCMP_CMP_GE, (scmp_datum_t)max + 1, 0};
        if (sc_add(ctx, d, 1, &ge, err) < 0)
            return -1;
        /* The type's low 4 bits (SOCK_NONBLOCK/SOCK_CLOEXEC live above): every value but
         * SOCK_STREAM and SOCK_SEQPACKET (AF_UNIX turns SOCK_RAW into SOCK_DGRAM). */
        for (int t = 0; d->stream_only && t < 16; t++) {
            if (t == SOCK_STREAM || t == SOCK_SEQPACKET)
                continue;
            struct scmp_arg_cmp c = {1, SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)t};
            if (sc_add(ctx, d, 1, &c, err) < 0)
                return -1;
        }
        return 0;
    }

    case SC_CLONE_NS:
        /* one rule per flag: libseccomp ORs rules of one syscall */
        for (size_t i = 0; i < sizeof sc_clone_ns_flags / sizeof sc_clone_ns_flags[0]; i++) {
            scmp_datum_t f = sc_clone_ns_flags[i];
            struct scmp_arg_cmp c = {0, SCMP_CMP_MASKED_EQ, f, f};
            if (sc_add(ctx, d, 1, &c, err) < 0)
                return -1;
        }
        return 0;

    case SC_TTY_INJECT:
        /* The kernel reads the request as unsigned int: compare the low 32 bits only, so
         * TIOCSTI | (1 << 32) cannot slip past a 64-bit equality. */
        for (size_t i = 0; i < sizeof sc_tty_ioctls / sizeof sc_tty_ioctls[0]; i++) {
            struct scmp_arg_cmp c = {1, SCMP_CMP_MASKED_EQ, 0xffffffffULL,
                                     (scmp_datum_t)sc_tty_ioctls[i]};
            if (sc_add(ctx, d, 1, &c, err) < 0)
                return -1;
        }
        return 0;

    case SC_SETID_MODE:
        /* single-bit masks: high bits in the 64-bit register cannot hide the bit */
        for (size_t i = 0; i < sizeof sc_setid_bits / sizeof sc_setid_bits[0]; i++) {
            scmp_datum_t m = sc_setid_bits[i];
            struct scmp_arg_cmp c[2] = {{(unsigned int)d->mode_arg, SCMP_CMP_MASKED_EQ, m, m}};
            if (d->flags_arg < 0) {
                if (sc_add(ctx, d, 1, c, err) < 0)
                    return -1;
                continue;
            }
            for (size_t j = 0; j < sizeof sc_create_flags / sizeof sc_create_flags[0]; j++) {
                scmp_datum_t f = sc_create_flags[j];
                c[1] = (struct scmp_arg_cmp){(unsigned int)d->flags_arg, SCMP_CMP_MASKED_EQ, f, f};
                if (sc_add(ctx, d, 2, c, err) < 0)
                    return -1;
            }
        }
        return 0;
    }
    return a3s_fail(err, A3S_ERR_INTERNAL, "seccomp: bad rule condition");
}

static scmp_filter_ctx sc_build(const a3s_seccomp_plan *sp, a3s_error *err)
{
    uint32_t arch = seccomp_arch_native();
    if (arch != SCMP_ARCH_X86_64 && arch != SCMP_ARCH_AARCH64) {
        a3s_fail(err, A3S_ERR_SETUP,
                 "seccomp: unsupported architecture (audit arch 0x%x); only x86_64 and "
                 "aarch64 are supported",
                 (unsigned int)arch);
        return NULL;
    }
    if (!sp) {
        a3s_fail(err, A3S_ERR_SETUP, "seccomp: no plan");
        return NULL;
    }

    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        a3s_fail(err, A3S_ERR_SETUP, "seccomp: seccomp_init failed");
        return NULL;
    }
    int rc;
    /* SYSRAWRC first, so that later failures report the kernel's own errno */
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1)) < 0 ||
        (rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
        (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1)) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, -rc, "seccomp: setting filter attributes");
        seccomp_release(ctx);
        return NULL;
    }
    if (sc_walk(sp, sc_emit_filter, ctx, err) < 0) {
        seccomp_release(ctx);
        return NULL;
    }
    return ctx;
}

int a3s_seccomp_export(const a3s_seccomp_plan *sp, a3s_error *err)
{
    scmp_filter_ctx ctx = sc_build(sp, err);
    if (!ctx)
        return -1;

    int fd = memfd_create("a3s-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        int e = errno;
        seccomp_release(ctx);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "seccomp: memfd_create");
    }
    int rc = seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    if (rc < 0) {
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, -rc, "seccomp: exporting the BPF program");
    }

    /* A truncated program would be loaded as is by bwrap: check it is whole. */
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "seccomp: fstat of the BPF memfd");
    }
    if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0) {
        close(fd);
        return a3s_fail(err, A3S_ERR_SETUP, "seccomp: exported BPF has a bad size (%lld)",
                        (long long)st.st_size);
    }

    /* Sealed: nobody holding the fd can change the program between here and bwrap. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "seccomp: sealing the BPF memfd");
    }
    /* bwrap reads from the current offset */
    if (lseek(fd, 0, SEEK_SET) != 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "seccomp: rewinding the BPF memfd");
    }
    return fd;
}

int a3s_seccomp_load(const a3s_seccomp_plan *sp, a3s_error *err)
{
    scmp_filter_ctx ctx = sc_build(sp, err);
    if (!ctx)
        return -1;
    int rc = seccomp_load(ctx); /* sets no_new_privs first (SCMP_FLTATR_CTL_NNP) */
    seccomp_release(ctx);
    if (rc < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, -rc, "seccomp: loading the filter");
    return 0;
}

bool a3s_seccomp_syscall_known(const char *name)
{
    return name && *name && seccomp_syscall_resolve_name(name) != __NR_SCMP_ERROR;
}

/* ---- description ---- */

/* Names come from the policy: text that is not UTF-8 is written as {"base64": ...}
 * (engine/json.h), so the rule is still described, exactly. */
static int sc_json_str(json_t *o, const char *key, const char *val)
{
    return a3s_json_set(o, key, a3s_json_cstr(val));
}

static int sc_json_errno(json_t *o, int e)
{
    const char *name = a3s_errno_symbol(e);
    return json_object_set_new(o, "errno", name ? json_string(name) : json_integer(e));
}

static int sc_emit_json(void *ud, const sc_desc *d, a3s_error *err)
{
    json_t *arr = ud;
    json_t *o = json_object();
    if (!o || json_array_append_new(arr, o) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "seccomp: out of memory");

    if (sc_json_str(o, "syscall", d->syscall ? d->syscall : "") < 0 ||
        sc_json_str(o, "action", "errno") < 0 || sc_json_errno(o, d->errnum) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "seccomp: out of memory");

    int rc = 0;
    switch (d->cond) {
    case SC_ALWAYS:
        if (!d->prov &&
            (strcmp(d->syscall, "socket") == 0 || strcmp(d->syscall, "socketpair") == 0))
            rc = sc_json_str(o, "when", "any family");
        break;
    case SC_FAMILY_NOT_IN: {
        json_t *allow = json_array();
        rc = json_object_set_new(o, "allow", allow);
        for (size_t i = 0; rc == 0 && i < d->nfam; i++) {
            const char *n = sc_family_name(d->fam[i]);
            char num[16];
            if (!n) {
                snprintf(num, sizeof num, "%d", d->fam[i]);
                n = num;
            }
            rc = json_array_append_new(allow, json_string(n));
        }
        if (rc == 0)
            rc = sc_json_str(o, "when", d->stream_only ? "family not in allow list, or type "
                                                         "not SOCK_STREAM/SOCK_SEQPACKET"
                                                       : "family not in allow list");
        break;
    }
    case SC_CLONE_NS: rc = sc_json_str(o, "when", "namespace flags"); break;
    case SC_TTY_INJECT: rc = sc_json_str(o, "when", "TIOCSTI|TIOCLINUX"); break;
    case SC_SETID_MODE:
        rc = sc_json_str(o, "when",
                         d->flags_arg < 0 ? "mode has S_ISUID|S_ISGID"
                                          : "O_CREAT|O_TMPFILE and mode has S_ISUID|S_ISGID");
        break;
    }
    if (rc == 0 && d->fixed)
        rc = json_object_set_new(o, "fixed", json_true());
    if (rc == 0 && d->problem)
        rc = sc_json_str(o, "error", d->problem);
    else if (rc == 0 && d->absent)
        rc = sc_json_str(o, "skipped", "not a syscall on this architecture");
    if (rc < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "seccomp: out of memory");
    return 0;
}

char *a3s_seccomp_describe_json(const a3s_seccomp_plan *sp)
{
    a3s_error err;
    char *out = NULL;
    json_t *arr = json_array();
    if (!arr || !sp)
        goto out;
    if (sc_walk(sp, sc_emit_json, arr, &err) < 0)
        goto out;

    json_t *o = json_object();
    if (!o || json_array_append_new(arr, o) < 0 || sc_json_str(o, "arch", "foreign") < 0 ||
        sc_json_str(o, "action", "kill_process") < 0)
        goto out;
    if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
        o = json_object();
        if (!o || json_array_append_new(arr, o) < 0 || sc_json_str(o, "abi", "x32") < 0 ||
            sc_json_str(o, "action", "kill_process") < 0)
            goto out;
    }
    out = json_dumps(arr, JSON_COMPACT | JSON_PRESERVE_ORDER);
out:
    json_decref(arr);
    return out;
}
