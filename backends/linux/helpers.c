/* The embedded helper programs (helpers.h). The build strips each program and includes
 * its bytes here (.incbin, paths given by CMake: A3S_IMAGE_*); the symbols are hidden,
 * so the shared library exports nothing more. */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
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

/* Where the bytes [img, end) lie in the main program's file: found in its PT_LOAD
 * segments (dl_iterate_phdr lists the main program first). */
typedef struct where {
    uintptr_t lo, hi;
    off_t off;
    bool found;
} where;

static int find_in_main(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    where *w = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t seg = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && w->lo >= seg && w->hi <= seg + ph->p_filesz) {
            w->off = (off_t)(ph->p_offset + (w->lo - seg));
            w->found = true;
        }
    }
    return 1; /* the main program only: a library's file is not /proc/self/exe */
}

/* The image copied by the kernel from the running program's own file (/proc/self/exe is
 * the very file executed, and the kernel refuses writes to it while it runs): no page
 * of the embedded copy is faulted into this process, 0.4 ms of each run on a virtual
 * machine. false: not the main program's (a library's), or not copied; the caller
 * writes the image itself. */
static bool copy_from_exe(int fd, const unsigned char *img, size_t len)
{
    where w = {.lo = (uintptr_t)img, .hi = (uintptr_t)img + len};
    (void)dl_iterate_phdr(find_in_main, &w);
    if (!w.found)
        return false;
    int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (exe < 0)
        return false;
    off_t off = w.off;
    size_t left = len;
    while (left > 0) {
        ssize_t n = sendfile(fd, exe, &off, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        left -= (size_t)n;
    }
    close(exe);
    return left == 0;
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
    size_t len = (size_t)(end - img);
    bool copied = copy_from_exe(fd, img, len);
    /* A partial copy is undone: the image is written whole from memory instead. */
    if (!copied && (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "%s: writing its image", name);
    }
    if ((!copied && a3s_write_all(fd, img, len) < 0) ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "%s: writing and sealing its image", name);
    }
    return fd;
}
