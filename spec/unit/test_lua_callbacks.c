/* Memory errors in the Lua module's callbacks (bindings/lua/module.c), from a C host that
 * owns the allocator: a lua_State made with lua_newstate and an allocator that starts
 * failing when the Lua callback says so (`arm()`), with the module linked in.
 *
 * For each callback (on_output, audit) and each place (pushing the callback's data, or
 * inside the Lua function), the exec must fail with Lua's memory error raised from
 * sb:exec, after everything was released: the process tree is gone (the observer's
 * failure kills it; the audit function's lets a 1 s command finish), the workspace is as
 * it was (pins removed), no scratch dir is left, no fd is left open. The host then runs
 * another exec, and after lua_close nothing the allocator handed out is outstanding.
 * Exits 77 (skip) when the sandbox boundary is unavailable, unless A3S_MUST_WORK=1. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

int luaopen_a3s_sandbox(lua_State *L);

/* < 0: allocations succeed; otherwise that many more growing allocations succeed, then
 * every one fails (Lua requires that shrinking never fails). */
static long countdown = -1;
static unsigned long failed_allocs;
static size_t in_use;

static void *t_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    size_t old = ptr ? osize : 0; /* without ptr, osize is a type tag */
    if (nsize == 0) {
        free(ptr);
        in_use -= old;
        return NULL;
    }
    if (nsize > old && countdown >= 0) {
        if (countdown == 0) {
            failed_allocs++;
            return NULL;
        }
        countdown--;
    }
    void *p = realloc(ptr, nsize);
    if (p)
        in_use = in_use - old + nsize;
    return p;
}

/* arm([n]): after n more allocations (default 0), every allocation fails. */
static int l_arm(lua_State *L)
{
    countdown = (long)luaL_optinteger(L, 1, 0);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Processes whose command line holds `mark`, killed when `kill_them`. */
static int marked_processes(const char *mark, bool kill_them)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof buf);
        close(fd);
        if (len > 0 && memmem(buf, (size_t)len, mark, strlen(mark))) {
            n++;
            if (kill_them)
                kill(atoi(e->d_name), SIGKILL);
        }
    }
    closedir(d);
    return n;
}

/* Entries of a directory, sorted, "\n"-separated, into out; entries starting with
 * `prefix` only when prefix is non-NULL. */
static void listing(const char *dir, const char *prefix, char *out, size_t cap)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    out[0] = '\0';
    if (n < 0) {
        snprintf(out, cap, "(cannot list %s)", dir);
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        if (strcmp(nm, ".") && strcmp(nm, "..") &&
            (!prefix || strncmp(nm, prefix, strlen(prefix)) == 0)) {
            size_t l = strlen(out);
            snprintf(out + l, cap - l, "%s\n", nm);
        }
        free(names[i]);
    }
    free(names);
}

/* Runs chunk with the arguments (string) given; returns the status, result on top. */
static int run_chunk(lua_State *L, const char *chunk, int nargs, int nres)
{
    if (luaL_loadstring(L, chunk) != LUA_OK)
        return -1;
    lua_insert(L, -1 - nargs);
    return lua_pcall(L, nargs, nres, 0);
}

/* Makes the sandbox, the command and the options of one case: returns sb.exec, sb, cmd,
 * opts (the host calls them), and keeps what the command printed in the global SEEN. */
static const char *setup_chunk =
    "local sandbox, ws, mode, mark = ...\n"
    "SEEN = ''\n"
    "local live, armed = false, false\n"
    "local function trip()\n" /* the first time only: fail from now on */
    "  if armed or not live then return end\n"
    "  armed = true\n"
    "  arm(0)\n"
    "  if mode:find 'body' then return string.rep('x', 64) end\n" /* fails inside */
    "end\n"
    "local audit\n"
    "if mode:find '^audit' then audit = function(line) trip() end end\n"
    "local sb = assert(sandbox.new{ workspace = ws, audit = audit })\n"
    /* A first exec: the sandbox keeps a few fds of its own from then on. */
    "assert(sb:exec 'true')\n"
    "live = true\n"
    "local opts = { timeout = 60 }\n"
    "local cmd = 'exec sleep ' .. mark\n"
    "if mode:find '^output' then\n"
    "  cmd = \"printf 'scratch=%s\\\\n' \\\"$TMPDIR\\\"; ls -A; echo READY; sleep 0.5; \"\n"
    "        .. \"printf '%0200d\\\\n' 0; exec sleep \" .. mark\n"
    "  opts.on_output = function(stream, chunk)\n"
    "    SEEN = SEEN .. chunk\n"
    "    if SEEN:find 'READY' then trip() end\n"
    "  end\n"
    "end\n"
    "SB = sb\n"
    "return sb.exec, sb, cmd, opts\n";

static void run_case(lua_State *L, const char *ws, const char *tmp, const char *mode)
{
    printf("# case %s\n", mode);
    static long seq;
    char mark[32]; /* a `sleep` duration of its own: the tree's processes are found by it */
    snprintf(mark, sizeof mark, "%d.%06ld", strncmp(mode, "audit", 5) == 0 ? 1 : 30,
             ((long)getpid() * 7919L + (long)time(NULL) * 13L + ++seq) % 1000000);
    char before[4096], after[4096], scratch[4096];
    listing(ws, NULL, before, sizeof before);
    int fds0 = count_fds();

    lua_pushstring(L, ws);
    lua_pushstring(L, mode);
    lua_pushstring(L, mark);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "a3s_sandbox");
    lua_call(L, 1, 1);
    lua_insert(L, -4);
    int st = run_chunk(L, setup_chunk, 4, 4);
    ok(st == LUA_OK, "%s: setup", mode);
    if (st != LUA_OK) {
        printf("#   %s\n", lua_tostring(L, -1));
        lua_settop(L, 0);
        return;
    }

    int fds = count_fds(); /* with those the sandbox holds after its first exec */
    failed_allocs = 0;
    double t0 = now_s();
    st = lua_pcall(L, 3, 1, 0); /* sb.exec(sb, cmd, opts) */
    countdown = -1;             /* the host's allocations succeed again */
    double took = now_s() - t0;

    const char *msg = lua_tostring(L, -1);
    /* lua_error raises Lua's own memory error message as LUA_ERRMEM again. */
    ok(st == LUA_ERRMEM, "%s: sb:exec raised a memory error (status %d)", mode, st);
    ok(failed_allocs > 0, "%s: an allocation failed (%lu)", mode, failed_allocs);
    ok_streq(msg, "not enough memory", "sb:exec raised Lua's memory error");
    lua_settop(L, 0);
    ok(took < 10, "%s: sb:exec returned after %.2f s (sleep %s)", mode, took, mark);

    int left = 0;
    for (int i = 0; i < 50 && (left = marked_processes(mark, false)) > 0; i++)
        usleep(100 * 1000);
    ok(left == 0, "%s: no process of the tree is left (%d)", mode, left);
    if (left > 0)
        marked_processes(mark, true);

    listing(ws, NULL, after, sizeof after);
    ok_streq(after, before, "the workspace is as it was (pins removed)");
    listing(tmp, "a3s-sandbox-", scratch, sizeof scratch);
    ok_streq(scratch, "", "no scratch dir is left");
    ok(count_fds() == fds, "%s: no fd is left open (%d before, %d after)", mode, fds,
       count_fds());

    if (strncmp(mode, "output", 6) == 0) {
        /* What the command saw while it ran: a scratch dir and pins, both gone now. */
        lua_getglobal(L, "SEEN");
        const char *seen = lua_tostring(L, -1);
        const char *s = seen ? strstr(seen, "scratch=") : NULL;
        char path[1024] = "";
        if (s)
            sscanf(s + 8, "%1023[^\n]", path);
        struct stat sst;
        ok(path[0] == '/' && stat(path, &sst) < 0, "%s: the command's scratch dir %s is gone",
           mode, path);
        ok(seen && strstr(seen, "\n.git\n"), "%s: the command saw the .git pin", mode);
        lua_settop(L, 0);
    }

    /* The host goes on: the same sandbox runs another command. */
    st = run_chunk(L, "local r = assert(SB:exec 'printf again'); SB:close(); SB = nil; "
                      "return r.stdout",
                   0, 1);
    ok_streq(st == LUA_OK ? lua_tostring(L, -1) : NULL, "again", "another exec runs");
    if (st != LUA_OK)
        printf("#   %s\n", lua_tostring(L, -1));
    lua_settop(L, 0);
    lua_gc(L, LUA_GCCOLLECT);
    ok(count_fds() == fds0, "%s: the sandbox closed, no fd is left (%d before, %d after)",
       mode, fds0, count_fds());
}

/* Is the boundary usable here? (the same probe as spec/lua/spec_helper.lua) */
static bool boundary_ok(lua_State *L, const char *ws)
{
    lua_pushstring(L, ws);
    int st = run_chunk(L,
                       "local ws = ...\n"
                       "local sb, err = require('a3s_sandbox').new{ workspace = ws }\n"
                       "if not sb then return err end\n"
                       "local ok, perr = sb:probe(); sb:close()\n"
                       "return ok and true or perr\n",
                       1, 1);
    bool usable = st == LUA_OK && lua_toboolean(L, -1) && !lua_isstring(L, -1);
    if (!usable)
        printf("# the sandbox boundary is unavailable here: %s\n", lua_tostring(L, -1));
    lua_settop(L, 0);
    return usable;
}

int main(void)
{
    char tmp[] = "/tmp/a3s-test-luacb-tmp-XXXXXX", ws[] = "/tmp/a3s-test-luacb-ws-XXXXXX";
    if (!mkdtemp(tmp) || !mkdtemp(ws)) {
        perror("mkdtemp");
        return 1;
    }
    /* The scratch dirs of this test go to a directory of its own. */
    setenv("TMPDIR", tmp, 1);
    char kept[sizeof ws + 16];
    snprintf(kept, sizeof kept, "%s/kept.txt", ws);
    FILE *f = fopen(kept, "w");
    if (f) {
        fputs("kept\n", f);
        fclose(f);
    }

    lua_State *L = lua_newstate(t_alloc, NULL);
    luaL_openlibs(L);
    luaL_requiref(L, "a3s_sandbox", luaopen_a3s_sandbox, 0);
    lua_pop(L, 1);
    lua_register(L, "arm", l_arm);

    int rc;
    if (!boundary_ok(L, ws)) {
        const char *must = getenv("A3S_MUST_WORK");
        rc = must && strcmp(must, "1") == 0 ? 1 : 77;
    } else {
        run_case(L, ws, tmp, "output-push");
        run_case(L, ws, tmp, "output-body");
        run_case(L, ws, tmp, "audit-push");
        run_case(L, ws, tmp, "audit-body");
        rc = -1;
    }
    lua_close(L);
    if (rc < 0) {
        ok(in_use == 0, "after lua_close nothing is outstanding (%zu bytes)", in_use);
        rc = tap_done();
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", tmp, ws);
    if (system(cmd) != 0)
        printf("# could not remove %s, %s\n", tmp, ws);
    return rc;
}
