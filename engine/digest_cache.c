/* Policy digests kept between processes (digest_cache.h).
 *
 * Entry: a file named by the key (hex), written whole and renamed into place:
 *   "a3s-digest-cache 1\n" "key <hex>\n" "digest <hex>\n" ("broaden <path>\n")*
 *   "facts <length>\n" <the policy engine's record of what the evaluation read>
 * Key: SHA-256 over this build (its GNU build id: another build may evaluate differently),
 * the policy engine and backend, the policy's name, path and text, the guard (no policy
 * file is read below it) and the search path, each field length-prefixed. */
#include "digest_cache.h"

#include <dirent.h>
#ifdef __ELF__
#include <elf.h>
#include <link.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#define ENTRY_MAX (16u << 20)
#define ENTRIES_KEPT 256 /* more: the others are dropped when one is added */
#define MAGIC "a3s-digest-cache 1\n"

/* ---- this build's identity ----------------------------------------------------------- */

/* ELF hosts only (the GNU build id note); elsewhere nothing tells builds apart and
 * nothing is kept. */
typedef struct build_id {
    const void *addr; /* a function of this object */
    unsigned char id[64];
    size_t len;
} build_id;

#ifdef __ELF__
static int find_note(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    build_id *b = data;
    uintptr_t a = (uintptr_t)b->addr;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        mine = ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz;
    }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            size_t name = (n->n_namesz + 3) & ~(size_t)3, desc = (n->n_descsz + 3) & ~(size_t)3;
            const unsigned char *q = p + sizeof *n;
            if ((size_t)(end - q) < name || (size_t)(end - q) - name < desc)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(q, "GNU", 4) &&
                n->n_descsz > 0 && n->n_descsz <= sizeof b->id) {
                memcpy(b->id, q + name, n->n_descsz);
                b->len = n->n_descsz;
                return 1;
            }
            p = q + name + desc;
        }
    }
    return 1; /* our object, without a build id */
}
#endif

/* ---- the key ------------------------------------------------------------------------- */

static void field(struct sha256_ctx *h, const void *p, size_t n)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    sha256_update(h, sizeof len, len);
    if (n)
        sha256_update(h, n, p);
}

static void sfield(struct sha256_ctx *h, const char *s)
{
    field(h, s ? s : "", s ? strlen(s) : 0);
    field(h, s ? "1" : "0", 1); /* NULL and "" differ */
}

static bool make_key(const a3s_sandbox *sb, const a3s_policy_ctx *ctx, char hex[65])
{
    build_id b = {.addr = (const void *)make_key};
#ifdef __ELF__
    dl_iterate_phdr(find_note, &b);
#endif
    if (!b.len)
        return false; /* nothing tells this build from another: keep nothing */
    struct sha256_ctx h;
    sha256_init(&h);
    field(&h, MAGIC, sizeof MAGIC - 1);
    field(&h, b.id, b.len);
    sfield(&h, sb->policy->name);
    sfield(&h, sb->backend->ops->name);
    sfield(&h, sb->src.name);
    sfield(&h, sb->src.path);
    sfield(&h, sb->src.text);
    sfield(&h, ctx->workspace);
    sfield(&h, ctx->scratch);
    sfield(&h, ctx->home);
    sfield(&h, ctx->tmp);
    sfield(&h, ctx->platform);
    sfield(&h, ctx->guard);
    for (size_t i = 0; ctx->search_path && ctx->search_path[i]; i++)
        sfield(&h, ctx->search_path[i]);
    field(&h, "end", 3);
    unsigned char d[SHA256_DIGEST_SIZE];
    sha256_digest(&h, sizeof d, d);
    for (size_t i = 0; i < sizeof d; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return true;
}

static int cache_dir(a3s_sandbox *sb)
{
    return sb->backend && sb->backend->ops->cache_open ? sb->backend->ops->cache_open(sb->backend)
                                                       : -1;
}

/* ---- reading ------------------------------------------------------------------------- */

/* The entry's bytes when it is a regular file of ours that no one else can write. */
static char *read_entry(int dir, const char *name, size_t *len)
{
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 022) || st.st_size <= 0 || (uint64_t)st.st_size > ENTRY_MAX ||
        !(buf = malloc((size_t)st.st_size + 1)))
        goto fail;
    size_t got = 0, want = (size_t)st.st_size;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            goto fail;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *len = got;
    return buf;
fail:
    free(buf);
    close(fd);
    return NULL;
}

/* The line at *p that starts with word and a space: its rest (NUL-terminated in place). */
static char *line(char **p, const char *end, const char *word)
{
    size_t w = strlen(word);
    char *nl = memchr(*p, '\n', (size_t)(end - *p));
    if (!nl || (size_t)(nl - *p) <= w || memcmp(*p, word, w) != 0 || (*p)[w] != ' ')
        return NULL;
    *nl = '\0';
    char *rest = *p + w + 1;
    *p = nl + 1;
    return strlen(rest) == (size_t)(nl - rest) ? rest : NULL; /* no NUL inside */
}

static bool is_hex64(const char *s)
{
    if (!s || strlen(s) != 64)
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

int a3s_digest_cache_get(a3s_sandbox *sb, const a3s_policy_ctx *ctx, char digest[65],
                         a3s_strv *broaden)
{
    const a3s_policy_engine *pe = sb->policy;
    char key[65];
    if (!pe->facts_decode || !pe->facts_check || !pe->facts_free || !make_key(sb, ctx, key))
        return 0;
    int dir = cache_dir(sb);
    if (dir < 0)
        return 0;
    size_t len = 0;
    char *buf = read_entry(dir, key, &len);
    close(dir);
    if (!buf)
        return 0;
    int hit = 0;
    a3s_strv got = {0};
    a3s_policy_facts *facts = NULL;
    char *p = buf, *end = buf + len, *k, *d, *b, *f, *stop;
    if (len < sizeof MAGIC - 1 || memcmp(p, MAGIC, sizeof MAGIC - 1) != 0)
        goto out;
    p += sizeof MAGIC - 1;
    if (!(k = line(&p, end, "key")) || strcmp(k, key) != 0 || !(d = line(&p, end, "digest")) ||
        !is_hex64(d))
        goto out;
    while ((b = line(&p, end, "broaden")) != NULL)
        if (b[0] != '/' || a3s_strv_push(&got, b) < 0)
            goto out;
    if (!(f = line(&p, end, "facts")))
        goto out;
    errno = 0;
    unsigned long long n = strtoull(f, &stop, 10);
    if (errno || stop == f || *stop || n != (unsigned long long)(end - p))
        goto out;
    if (!(facts = pe->facts_decode(p, (size_t)n)) || pe->facts_check(facts, ctx) != A3S_FACTS_HOLD)
        goto out;
    memcpy(digest, d, 65);
    *broaden = got;
    got = (a3s_strv){0};
    hit = 1;
out:
    if (facts)
        pe->facts_free(facts);
    a3s_strv_free(&got);
    free(buf);
    return hit;
}

/* ---- writing ------------------------------------------------------------------------- */

/* Too many entries (also what writers killed before their rename left): all but the one
 * just written go (a cache, not a record). */
static void prune(int dir, const char *keep)
{
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (n > ENTRIES_KEPT) {
        rewinddir(d);
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep))
                (void)unlinkat(dir, e->d_name, 0);
    }
    closedir(d);
}

void a3s_digest_cache_put(a3s_sandbox *sb, const a3s_policy_ctx *ctx,
                          const a3s_policy_facts *facts, const char *digest,
                          const a3s_strv *broaden)
{
    const a3s_policy_engine *pe = sb->policy;
    char key[65], tmp[32];
    char *fbytes = NULL, *text = NULL;
    size_t flen = 0, tlen = 0;
    if (!facts || !pe->facts_encode || !make_key(sb, ctx, key) || !is_hex64(digest) ||
        pe->facts_encode(facts, &fbytes, &flen) < 0)
        return;
    FILE *m = open_memstream(&text, &tlen);
    if (!m) {
        free(fbytes);
        return;
    }
    bool ok = fprintf(m, MAGIC "key %s\ndigest %s\n", key, digest) > 0;
    for (size_t i = 0; ok && i < broaden->n; i++)
        ok = !strchr(broaden->v[i], '\n') && fprintf(m, "broaden %s\n", broaden->v[i]) > 0;
    ok = ok && fprintf(m, "facts %zu\n", flen) > 0 && fwrite(fbytes, 1, flen, m) == flen;
    free(fbytes);
    if (fclose(m) != 0 || !ok) {
        free(text);
        return;
    }
    int dir = cache_dir(sb);
    if (dir < 0) {
        free(text);
        return;
    }
    /* Unique among live writers (O_EXCL: a dead one's leftover only loses this entry). */
    static atomic_uint counter;
    snprintf(tmp, sizeof tmp, ".new-%ld-%u", (long)getpid(), atomic_fetch_add(&counter, 1));
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        bool written = a3s_write_all(fd, text, tlen) == 0;
        close(fd);
        if (!written || renameat(dir, tmp, dir, key) < 0)
            (void)unlinkat(dir, tmp, 0);
        else
            prune(dir, key);
    }
    close(dir);
    free(text);
}
