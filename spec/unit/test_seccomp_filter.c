/* Unit tests for backends/linux/seccomp.c: the filter as loaded (the baseline denials,
 * sockets, socketpairs, clone and clone3, terminal injection, foreign architectures,
 * everyday fork and threads) and the socket allow list (spec/unit/seccomp_fixture.h). */
#include "seccomp_fixture.h"

#if defined(__x86_64__)
/* i386 getpid through int 0x80: it arrives with the i386 audit arch, a foreign one. */
static int i386_getpid(void *ud)
{
    (void)ud;
    long r = 20; /* __NR_getpid on i386 */
    __asm__ __volatile__("int $0x80" : "+a"(r) : : "r8", "r9", "r10", "r11", "memory");
    return r == (long)getpid() ? 0 : EXIT_OTHER;
}

static int probe_i386(const a3s_seccomp_plan *sp)
{
    return probe_child(sp, i386_getpid, NULL);
}
#endif

static void *thread_main(void *arg)
{
    return arg;
}

/* Everyday process/thread creation under the filter: glibc fork() and pthread_create
 * (which tries clone3 first and must fall back to clone on ENOSYS). */
static int fork_and_thread(void *ud)
{
    (void)ud;
    pid_t g = fork();
    if (g < 0)
        return errno;
    if (g == 0)
        _exit(0);
    int st;
    if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return EXIT_OTHER;
    pthread_t t;
    int token = 7;
    void *back = NULL;
    int rc = pthread_create(&t, NULL, thread_main, &token);
    if (rc != 0)
        return rc;
    if (pthread_join(t, &back) != 0 || back != &token)
        return EXIT_OTHER;
    return 0;
}

static int probe_fork_and_thread(const a3s_seccomp_plan *sp)
{
    return probe_child(sp, fork_and_thread, NULL);
}

static void test_baseline(void)
{
    a3s_seccomp_plan p = baseline_plan();
    int r;

    ok((r = probe(&p, mk(SYS_getpid, 0, 0, 0, 0))) == 0, "getpid allowed (got %d)", r);

    /* socket: every family denied with the configured errno */
    ok((r = probe(&p, c_socket(AF_INET))) == EAFNOSUPPORT,
       "socket(AF_INET) -> EAFNOSUPPORT (got %d)", r);
    ok((r = probe(&p, c_socket(AF_UNIX))) == EAFNOSUPPORT,
       "socket(AF_UNIX) -> EAFNOSUPPORT (got %d)", r);
    ok((r = probe(&p, c_socket(AF_INET6))) == EAFNOSUPPORT,
       "socket(AF_INET6) -> EAFNOSUPPORT (got %d)", r);
    ok((r = probe(NULL, c_socket(AF_INET))) == 0,
       "control: socket(AF_INET) works unfiltered (got %d)", r);

    /* socketpair: AF_UNIX allowed, anything else denied */
    ok((r = probe(&p, c_socketpair(AF_UNIX))) == 0, "socketpair(AF_UNIX) allowed (got %d)", r);
    ok((r = probe(&p, c_socketpair(AF_INET))) == EAFNOSUPPORT,
       "socketpair(AF_INET) -> EAFNOSUPPORT (got %d)", r);
    ok((r = probe(&p, c_socketpair((1UL << 32) | AF_UNIX))) == EAFNOSUPPORT,
       "socketpair(AF_UNIX | 1<<32) -> EAFNOSUPPORT (got %d)", r);
    ok((r = probe(NULL, c_socketpair(AF_INET))) != EAFNOSUPPORT,
       "control: socketpair(AF_INET) unfiltered is not EAFNOSUPPORT (got %d)", r);
    /* Only pairs that cannot be re-addressed: a datagram pair can sendto() any socket. */
    static int pair[2];
    call sp_seq = mk(SYS_socketpair, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
                     (unsigned long)pair);
    ok((r = probe(&p, sp_seq)) == 0, "socketpair(AF_UNIX, SOCK_SEQPACKET) allowed (got %d)", r);
    unsigned long bad_types[] = {SOCK_DGRAM, SOCK_RAW, SOCK_DGRAM | SOCK_NONBLOCK, SOCK_RDM,
                                 SOCK_PACKET, 15};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        call c = mk(SYS_socketpair, AF_UNIX, bad_types[i], 0, (unsigned long)pair);
        ok((r = probe(&p, c)) == EAFNOSUPPORT,
           "socketpair(AF_UNIX, type %#lx) -> EAFNOSUPPORT (got %d)", bad_types[i], r);
    }
    ok((r = probe(NULL, mk(SYS_socketpair, AF_UNIX, SOCK_DGRAM, 0, (unsigned long)pair))) == 0,
       "control: socketpair(AF_UNIX, SOCK_DGRAM) unfiltered works (got %d)", r);

    /* deny list */
    call keyctl = mk(SYS_keyctl, KEYCTL_GET_KEYRING_ID, 0x7ffffff0UL, 0, 0);
    ok((r = probe(&p, keyctl)) == EPERM, "keyctl -> EPERM (got %d)", r);
    ok((r = probe(NULL, keyctl)) != EPERM && r >= 0,
       "control: keyctl unfiltered is not EPERM (got %d)", r);
    call unsh = mk(SYS_unshare, 0x1 /* not an unshare flag: EINVAL unfiltered */, 0, 0, 0);
    ok((r = probe(&p, unsh)) == EPERM, "unshare -> EPERM (got %d)", r);
    ok((r = probe(NULL, unsh)) == EINVAL, "control: unshare(0x1) unfiltered -> EINVAL (got %d)", r);
    ok((r = probe(&p, mk(SYS_setns, (unsigned long)-1L, 0, 0, 0))) == EPERM,
       "setns -> EPERM (got %d)", r);

    /* clone with namespace flags */
    ok((r = probe(&p, c_clone(CLONE_NEWUSER | SIGCHLD))) == EPERM,
       "clone(CLONE_NEWUSER|SIGCHLD) -> EPERM (got %d)", r);
    static const struct {
        unsigned long flag;
        const char *name;
    } ns[] = {
        {CLONE_NEWNS, "CLONE_NEWNS"},     {CLONE_NEWCGROUP, "CLONE_NEWCGROUP"},
        {CLONE_NEWUTS, "CLONE_NEWUTS"},   {CLONE_NEWIPC, "CLONE_NEWIPC"},
        {CLONE_NEWUSER, "CLONE_NEWUSER"}, {CLONE_NEWPID, "CLONE_NEWPID"},
        {CLONE_NEWNET, "CLONE_NEWNET"},   {CLONE_NEWTIME, "CLONE_NEWTIME"},
    };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        /* CLONE_SIGHAND without CLONE_VM: the kernel refuses it (EINVAL) before any
         * namespace work, so the control can never create anything */
        call c = c_clone(ns[i].flag | CLONE_SIGHAND | SIGCHLD);
        ok((r = probe(&p, c)) == EPERM, "clone(%s) -> EPERM (got %d)", ns[i].name, r);
        ok((r = probe(NULL, c)) == EINVAL,
           "control: clone(%s|CLONE_SIGHAND) unfiltered -> EINVAL (got %d)", ns[i].name, r);
        call hi = c_clone((1UL << 40) | ns[i].flag | CLONE_SIGHAND | SIGCHLD);
        ok((r = probe(&p, hi)) == EPERM, "clone(%s | 1<<40) -> EPERM (got %d)", ns[i].name, r);
    }
    ok((r = probe(&p, c_clone(SIGCHLD))) == 0, "raw clone(SIGCHLD) (plain fork) allowed (got %d)",
       r);
    ok((r = probe_fork_and_thread(&p)) == 0,
       "fork() and pthread_create work under the filter (got %d)", r);

    /* clone3 -> ENOSYS */
    call c3 = mk(SYS_clone3, 0, 0, 0, 0);
    ok((r = probe(&p, c3)) == ENOSYS, "clone3 -> ENOSYS (got %d)", r);
    ok((r = probe(NULL, c3)) != ENOSYS && r > 0,
       "control: clone3 unfiltered is not ENOSYS (got %d)", r);

    /* terminal injection ioctls, low 32 bits compared */
    ok((r = probe(&p, c_ioctl(TIOCSTI))) == EPERM, "ioctl(TIOCSTI) -> EPERM (got %d)", r);
    ok((r = probe(&p, c_ioctl(TIOCSTI | (1UL << 32)))) == EPERM,
       "ioctl(TIOCSTI | 1<<32) -> EPERM (got %d)", r);
    ok((r = probe(&p, c_ioctl(TIOCLINUX))) == EPERM, "ioctl(TIOCLINUX) -> EPERM (got %d)", r);
    ok((r = probe(&p, c_ioctl(TIOCLINUX | (0xdeadUL << 32)))) == EPERM,
       "ioctl(TIOCLINUX | 0xdead<<32) -> EPERM (got %d)", r);
    ok((r = probe(&p, c_ioctl(TIOCGWINSZ))) == EBADF,
       "other ioctls untouched: TIOCGWINSZ -> EBADF (got %d)", r);
    ok((r = probe(NULL, c_ioctl(TIOCSTI))) == EBADF,
       "control: ioctl(-1, TIOCSTI) unfiltered -> EBADF (got %d)", r);

#if defined(__x86_64__)
    /* x32 ABI numbers arrive with the x86_64 audit arch: they must kill */
    call x32 = mk(X32_BIT | SYS_getpid, 0, 0, 0, 0);
    ok((r = probe(&p, x32)) == -SIGSYS, "x32 getpid -> killed by SIGSYS (got %d)", r);
    ok((r = probe(NULL, x32)) != -SIGSYS, "control: x32 getpid unfiltered is not SIGSYS (got %d)",
       r);
    call x32sock = mk(X32_BIT | SYS_socket, AF_INET, SOCK_DGRAM, 0, 0);
    ok((r = probe(&p, x32sock)) == -SIGSYS, "x32 socket -> killed by SIGSYS (got %d)", r);

    /* a foreign architecture (i386 via int 0x80) kills; only meaningful where the kernel
     * runs i386 syscalls at all, which the unfiltered control shows */
    int ctl = probe_i386(NULL);
    if (ctl == 0)
        ok((r = probe_i386(&p)) == -SIGSYS, "i386 getpid (int 0x80) -> killed by SIGSYS (got %d)",
           r);
    else
        printf("# skipped foreign-arch check: int 0x80 unavailable here (control %d)\n", ctl);
#endif
}

static void test_allow_list(void)
{
    int fam[] = {AF_INET6, AF_INET, AF_INET}; /* unsorted, with a duplicate */
    a3s_seccomp_plan p;
    memset(&p, 0, sizeof p);
    p.socket_allow = fam;
    p.nsocket_allow = p.capsocket_allow = 3;
    p.socket_errnum = EPFNOSUPPORT; /* a distinctive errno: clearly the filter's */
    int r;

    ok((r = probe(&p, c_socket(AF_INET))) == 0, "allow list: socket(AF_INET) allowed (got %d)", r);
    int r6 = probe(NULL, c_socket(AF_INET6));
    ok((r = probe(&p, c_socket(AF_INET6))) == r6,
       "allow list: socket(AF_INET6) as unfiltered (got %d, unfiltered %d)", r, r6);
    ok((r = probe(&p, c_socket(AF_UNIX))) == EPFNOSUPPORT,
       "allow list: socket(AF_UNIX) -> EPFNOSUPPORT (got %d)", r);
    ok((r = probe(&p, c_socket(AF_UNSPEC))) == EPFNOSUPPORT,
       "allow list: socket(AF_UNSPEC) denied (got %d)", r);
    ok((r = probe(&p, c_socket(3))) == EPFNOSUPPORT, "allow list: socket(3) denied (got %d)", r);
    ok((r = probe(&p, c_socket(AF_NETLINK))) == EPFNOSUPPORT,
       "allow list: socket(AF_NETLINK) denied (got %d)", r);
    ok((r = probe(&p, c_socket(AF_PACKET))) == EPFNOSUPPORT,
       "allow list: socket(AF_PACKET) denied (got %d)", r);
    ok((r = probe(&p, c_socket((1UL << 32) | AF_UNIX))) == EPFNOSUPPORT,
       "allow list: socket(AF_UNIX | 1<<32) denied (got %d)", r);
    ok((r = probe(&p, c_socket((1UL << 32) | AF_INET))) == EPFNOSUPPORT,
       "allow list: socket(AF_INET | 1<<32) denied (fail closed) (got %d)", r);
    ok((r = probe(&p, c_socket((unsigned long)-1L))) == EPFNOSUPPORT,
       "allow list: socket(-1) denied (got %d)", r);
    ok((r = probe(NULL, c_socket(AF_UNIX))) == 0,
       "control: socket(AF_UNIX) works unfiltered (got %d)", r);

    /* socketpair_unix false: every socketpair denied; the other booleans off */
    ok((r = probe(&p, c_socketpair(AF_UNIX))) == EPFNOSUPPORT,
       "socketpair_unix=false: socketpair(AF_UNIX) denied (got %d)", r);
    ok((r = probe(&p, mk(SYS_clone3, 0, 0, 0, 0))) != ENOSYS && r > 0,
       "deny_clone_ns=false: clone3 not filtered (got %d)", r);
    ok((r = probe(&p, c_clone(CLONE_NEWUSER | CLONE_SIGHAND | SIGCHLD))) == EINVAL,
       "deny_clone_ns=false: clone flags not filtered (got %d)", r);
    ok((r = probe(&p, c_ioctl(TIOCSTI))) == EBADF,
       "deny_tty_inject=false: TIOCSTI not filtered (got %d)", r);

    /* only AF_INET allowed (the smallest useful list) */
    int inet[] = {AF_INET};
    p.socket_allow = inet;
    p.nsocket_allow = 1;
    ok((r = probe(&p, c_socket(AF_INET))) == 0, "allow {AF_INET}: socket(AF_INET) allowed (got %d)",
       r);
    ok((r = probe(&p, c_socket(AF_UNIX))) == EPFNOSUPPORT,
       "allow {AF_INET}: socket(AF_UNIX) denied (got %d)", r);
    ok((r = probe(&p, c_socket(AF_INET6))) == EPFNOSUPPORT,
       "allow {AF_INET}: socket(AF_INET6) denied (got %d)", r);

    /* an explicit deny of socket wins over the allow list */
    a3s_sc_rule deny[] = {{.syscall = "socket", .errnum = EPERM}};
    p.deny = deny;
    p.ndeny = 1;
    ok((r = probe(&p, c_socket(AF_INET))) == EPERM,
       "explicit deny of socket wins: socket(AF_INET) -> EPERM (got %d)", r);
}

int main(void)
{
    test_baseline();
    test_allow_list();
    return tap_done();
}
