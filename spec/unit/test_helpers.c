/* The embedded helper programs handed over as sealed memfds (backends/linux/helpers.c):
 * each memfd holds exactly the embedded bytes, whether the kernel copied them from the
 * running program's file (this test program holds the images itself, as the CLI does) or
 * they were written from memory (a library's), and is sealed against every change. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "tap.h"

extern const unsigned char a3s_helper_launch[], a3s_helper_launch_end[];
extern const unsigned char a3s_helper_relay[], a3s_helper_relay_end[];
extern const unsigned char a3s_helper_mediator[], a3s_helper_mediator_end[];

static void check(a3s_helper h, const unsigned char *img, const unsigned char *end)
{
    const char *name = a3s_helpers_name(h);
    size_t len = (size_t)(end - img);
    a3s_error err = {0};
    int fd = a3s_helpers_memfd(h, 100, &err);
    ok(fd >= 100, "%s: a memfd at or above the asked number (%s)", name, err.msg);
    if (fd < 0)
        return;
    struct stat st;
    ok(fstat(fd, &st) == 0 && (size_t)st.st_size == len, "%s: its size is the image's (%zu)",
       name, len);
    unsigned char *got = malloc(len);
    size_t have = 0;
    ssize_t n;
    while (got && have < len && (n = pread(fd, got + have, len - have, (off_t)have)) > 0)
        have += (size_t)n;
    ok(got && have == len && !memcmp(got, img, len), "%s: its bytes are the embedded ones",
       name);
    ok(len > 4 && !memcmp(img, "\177ELF", 4), "%s: the embedded image is an ELF program", name);
    free(got);
    int seals = fcntl(fd, F_GET_SEALS);
    int want = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    ok(seals >= 0 && (seals & want) == want, "%s: sealed (write, shrink, grow, seal)", name);
    ok(write(fd, "x", 1) < 0 && errno == EPERM, "%s: a write is refused", name);
    ok(ftruncate(fd, 0) < 0, "%s: shrinking is refused", name);
    ok((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0, "%s: close-on-exec", name);
    close(fd);
}

int main(void)
{
    check(A3S_HELPER_LAUNCH, a3s_helper_launch, a3s_helper_launch_end);
    check(A3S_HELPER_RELAY, a3s_helper_relay, a3s_helper_relay_end);
    check(A3S_HELPER_MEDIATOR, a3s_helper_mediator, a3s_helper_mediator_end);
    return tap_done();
}
