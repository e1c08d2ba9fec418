/* The embedded helper programs (helpers.h). The build strips each program and includes
 * its bytes here (.incbin, paths given by CMake: A3S_IMAGE_*); the symbols are hidden,
 * so the shared library exports nothing more. */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util.h"

#define A3S_INCBIN(sym, file)                                                                      \
    __asm__(".pushsection .rodata.a3s_helpers,\"a\",@progbits\n"                                  \
            ".balign 16\n"                                                                         \
            ".globl " #sym "\n.hidden " #sym "\n.type " #sym ", @object\n" #sym ":\n"              \
            ".incbin \"" file "\"\n"                                                               \
            ".globl " #sym "_end\n.hidden " #sym "_end\n" #sym "_end:\n"                           \
            ".popsection\n")

A3S_INCBIN(a3s_helper_launch, A3S_IMAGE_LAUNCH);
A3S_INCBIN(a3s_helper_relay, A3S_IMAGE_RELAY);
A3S_INCBIN(a3s_helper_mediator, A3S_IMAGE_MEDIATOR);

#define A3S_HIDDEN __attribute__((visibility("hidden")))
extern const unsigned char a3s_helper_launch[] A3S_HIDDEN, a3s_helper_launch_end[] A3S_HIDDEN;
extern const unsigned char a3s_helper_relay[] A3S_HIDDEN, a3s_helper_relay_end[] A3S_HIDDEN;
extern const unsigned char a3s_helper_mediator[] A3S_HIDDEN,
    a3s_helper_mediator_end[] A3S_HIDDEN;

/* Linux 6.3 made executability of memfds explicit (vm.memfd_noexec); older kernels
 * refuse the flag and make every memfd executable. */
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

const char *a3s_helpers_name(a3s_helper h)
{
    static const char *const names[] = {"a3s-sandbox-launch", "a3s-sandbox-relay",
                                        "a3s-sandbox-mediator"};
    return (unsigned)h < A3S_HELPER_COUNT ? names[h] : "?";
}

int a3s_helpers_memfd(a3s_helper h, int min_fd, a3s_error *err)
{
    const unsigned char *img, *end;
    switch (h) {
    case A3S_HELPER_LAUNCH:
        img = a3s_helper_launch, end = a3s_helper_launch_end;
        break;
    case A3S_HELPER_RELAY:
        img = a3s_helper_relay, end = a3s_helper_relay_end;
        break;
    case A3S_HELPER_MEDIATOR:
        img = a3s_helper_mediator, end = a3s_helper_mediator_end;
        break;
    default:
        return a3s_fail(err, A3S_ERR_INTERNAL, "no such helper program");
    }
    const char *name = a3s_helpers_name(h);
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
    if (fd < 0 && errno == EINVAL)
        fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "%s: memfd_create", name);
    if (fd < min_fd) {
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, min_fd);
        int e = errno;
        close(fd);
        if (hi < 0)
            return a3s_fail_errno(err, A3S_ERR_SETUP, e, "%s: fcntl(F_DUPFD_CLOEXEC)", name);
        fd = hi;
    }
    /* Sealed before anyone else can see it: from then on its bytes are the embedded ones,
     * whoever holds it. */
    if (a3s_write_all(fd, img, (size_t)(end - img)) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "%s: writing and sealing its image", name);
    }
    return fd;
}
