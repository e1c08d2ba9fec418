/* Policy runtime: the locked state's refusals (escape attempts, budgets, strictness),
 * then derived policies, whose base runs apart from them (spec/unit/policy_fixture.h).
 * TAP output. */
#include "policy_fixture.h"

/* ------------------------------------------------------------------ tests */

static void test_lockdown(void)
{
    expect_ok("unsafe globals are absent",
              "assert(io == nil and os == nil and package == nil and debug == nil)\n"
              "assert(dofile == nil and loadfile == nil and collectgarbage == nil)\n"
              "assert(coroutine == nil and print == nil and string.dump == nil)\n"
              "assert(math.random == nil and getmetatable('') == false)\n"
              "assert(getmetatable(ctx) == false and getmetatable(a3s.plan('y')) == false)\n"
              "local s = 0; for i, d in ipairs(ctx.path_dirs) do s = s + 1 end; assert(s == #ctx.path_dirs)\n"
              "x_global = 1; assert(_G.x_global == 1)\n"
              "return a3s.plan('locked')\n");

    expect_fail("io.open", "io.open('/etc/passwd')", "global 'io'");
    expect_fail("os.execute", "os.execute('true')", "global 'os'");
    expect_fail("package.loadlib", "package.loadlib('libc.so.6', 'system')", "global 'package'");
    expect_fail("debug.sethook", "debug.sethook()", "global 'debug'");
    expect_fail("string.dump", "string.dump(function() end)", "field 'dump'");
    expect_fail("load of bytecode",
                "local f, e = load('\\27LuaT\\0\\25\\147\\r\\n\\26\\n') assert(f, e)",
                "binary chunk");
    expect_fail("load with mode 'b'", "load('return 1', 'x', 'b')", "only text chunks");
    expect_fail("load with mode 'bt'", "load('return 1', 'x', 'bt')", "only text chunks");
    expect_fail("require 'os'", "require 'os'", "module 'os' not found");
    expect_fail("require '../etc/passwd'", "require '../etc/passwd'", "invalid module name");
    expect_fail("require '/etc/passwd'", "require '/etc/passwd'", "invalid module name");
    expect_fail("require of a file outside the search path", "require 'secret'",
                "module 'secret' not found");
    expect_fail("require of a non-string", "require(42)", "string expected");
    expect_fail("setmetatable on a string", "setmetatable('', {})", "table expected");
    expect_fail("string metatable", "getmetatable('').__index = {}", "boolean");
    expect_fail("ctx.workspace = '/'", "ctx.workspace = '/'", "ctx is read-only");
    expect_fail("ctx.env write", "ctx.env.PATH = '/evil'", "ctx.env is read-only");
    expect_fail("rawset on ctx", "rawset(ctx, 'workspace', '/')", "table expected");
    expect_fail("a3s.plan = nil", "a3s.plan = nil", "a3s is read-only");
    expect_fail("a3s.host write", "a3s.host.exists = function() return true end",
                "a3s.host is read-only");
    expect_fail("string library write", "string.rep = nil", "string is read-only");
    expect_fail("__gc finalizer", "setmetatable({}, { __gc = function() while true do end end })",
                "__gc metamethods are not allowed");
}

static void test_budgets(void)
{
    expect_fail("infinite loop", "local plan = a3s.plan('x')\nwhile true do end\n",
                "case.lua:2: instruction budget exceeded");
    expect_fail("loop that catches the budget error",
                "while true do pcall(function() while true do end end) end",
                "instruction budget exceeded");
    expect_fail("loop with xpcall and a looping handler",
                "while true do xpcall(function() while true do end end, "
                "function() while true do end end) end",
                "instruction budget exceeded");
    /* Few instructions, each a 16 MiB copy: the instruction budget alone would allow
     * hours; the wall-clock limit (5 s) ends it. It may overrun by one hook step (100
     * instructions): the bound is 5 s + 5x such a step measured just before (it slows
     * down with the machine) + 2 s, never an absolute figure that a loaded machine could
     * miss, and far below the hours it would run without the limit. */
    unsigned long long t0 = a3s_now_ms();
    a3s_error step_err = {0};
    a3s_plan_free(eval_text("step.lua",
                            "local s = string.rep('x', 1 << 24)\n"
                            "for i = 1, 25 do local t = s:upper() end\n"
                            "return a3s.plan('x')",
                            &step_err));
    unsigned long long bound = 5000 + 5 * (a3s_now_ms() - t0) + 2000;
    t0 = a3s_now_ms();
    expect_fail("loop of costly C operations (time limit)",
                "local s = string.rep('x', 1 << 24)\n"
                "while true do pcall(function() while true do local t = s:upper() end end) end",
                "case.lua:2: time limit exceeded");
    unsigned long long dt = a3s_now_ms() - t0;
    ok(dt < bound, "time limit stopped it after %llu ms (< %llu ms)", dt, bound);
    expect_fail("memory hog (string doubling)", "local s = 'x' while true do s = s .. s end",
                "memory limit exceeded");
    expect_fail("memory hog (table growth)",
                "local t = {} local i = 0 while true do i = i + 1 t[i] = i end",
                "memory limit exceeded");
    expect_fail("memory hog caught by pcall",
                "pcall(function() local s = 'x' while true do s = s .. s end end)\n"
                "return a3s.plan('x')",
                "memory limit exceeded");
    expect_fail("string.rep beyond the cap", "local s = string.rep('x', 1 << 40)",
                "exceed the memory limit");
    expect_ok("string.rep of empty pieces returns at once",
              "assert(string.rep('', 1 << 60) == '' and ('x'):rep(3, ',') == 'x,x,x')\n"
              "return a3s.plan('x')");
    expect_fail("table.insert with a lying __len",
                "local t = setmetatable({}, { __len = function() return 1 << 60 end })\n"
                "table.insert(t, 1, 'x')",
                "__len metamethod");
    expect_fail("table.move over a huge range", "table.move({}, 1, 1 << 50, 2)",
                "range of more than");
    expect_fail("catastrophic pattern", "local s = string.rep('a', 100000)\ns:find('.-.-.-b')",
                "pattern too costly");
    expect_ok("ordinary patterns and table functions still work",
              "local t = {} for w in ('a:b:c'):gmatch('[^:]+') do table.insert(t, w) end\n"
              "assert(table.concat(t, ',') == 'a,b,c')\n"
              "assert(('/x/y/z'):match('^(.*)/[^/]*$') == '/x/y')\n"
              "table.sort(t, function(a, b) return a > b end); assert(t[1] == 'c')\n"
              "assert(select('#', table.unpack(t)) == 3)\n"
              "return a3s.plan('x')");
}

static void test_errors(void)
{
    expect_fail("error({})", "error({})", "case.lua:1: (error object is a table value)");
    expect_fail("error with __tostring",
                "error(setmetatable({}, { __tostring = function() return 'custom' end }))",
                "custom");
    expect_fail("error(nil)", "error(nil)", "(error object is a nil value)");
    expect_fail("error(42)", "error(42)", "42");
    expect_fail("syntax error", "local x = = 1\n", "case.lua:1:");
    expect_fail("policy returning a number", "return 42", "policy must return a plan");
    expect_fail("policy returning nothing", "local x = 1", "policy must return a plan");
    expect_fail("unknown limits key", "local p = a3s.plan('x') p:limits{ timeout = 1 } return p",
                "unknown key 'timeout'");
    expect_fail("non-integer limit", "local p = a3s.plan('x') p:limits{ nofile = 1.5 } return p",
                "must be an integer");
    expect_fail("string limit", "local p = a3s.plan('x') p:limits{ nofile = '10' } return p",
                "must be an integer");
    expect_fail("limit out of range (validation)",
                "local p = a3s.plan('x') p:limits{ nofile = 0 } return p", "nofile");
    expect_fail("relative path", "local p = a3s.plan('x') p:hide('relative/x') return p",
                "absolute path expected");
    expect_fail("path with ..", "local p = a3s.plan('x') p:mask('/a/../b') return p",
                "not clean");
    expect_fail("path with a trailing /", "local p = a3s.plan('x') p:mask('/a/') return p",
                "not clean");
    expect_fail("path of the wrong type", "local p = a3s.plan('x') p:hide(42) return p",
                "string expected");
    expect_fail("unknown fs option", "local p = a3s.plan('x') p:hide('/x', { optinal = true }) return p",
                "unknown option 'optinal'");
    expect_fail("non-boolean fs option",
                "local p = a3s.plan('x') p:hide('/x', { optional = 1 }) return p",
                "must be a boolean");
    /* A writable root is never a host fact: the label must not travel with a widening. */
    expect_fail("discovered writable root",
                "local p = a3s.plan('x') p:writable('/opt', { broaden = true, discovered = true })"
                " return p",
                "writable: option 'discovered' does not apply to writable roots");
    expect_fail("replace into a discovered writable root",
                "local p = a3s.plan('x') p:hide('/opt') "
                "p:replace('/opt', 'writable', { broaden = true, discovered = true }) return p",
                "replace: option 'discovered' does not apply to writable roots");
    expect_fail("unknown network mode", "local p = a3s.plan('x') p:network('host') return p",
                "unknown network mode");
    expect_fail("unknown errno", "local p = a3s.plan('x') p:seccomp_deny({ 'bpf' }, 'EWHAT') return p",
                "unknown errno name");
    expect_fail("unknown seccomp key",
                "local p = a3s.plan('x') p:seccomp{ socket_family = {} } return p",
                "unknown key 'socket_family'");
    expect_fail("unknown socket family",
                "local p = a3s.plan('x') p:seccomp{ socket_families = { 'AF_PACKET' } } return p",
                "unknown socket family");
    expect_fail("list with a non-string",
                "local p = a3s.plan('x') p:env_strip{ 'A', 42 } return p",
                "must be a string");
    expect_fail("list with extra keys",
                "local p = a3s.plan('x') p:scan_skip{ '.git', x = 1 } return p",
                "non-list key");
    expect_fail("unknown protect_names key",
                "local p = a3s.plan('x') p:protect_names{ dir = {} } return p",
                "unknown key 'dir'");
    expect_fail("bad plan name", "return a3s.plan('a b')", "plan name");
    expect_fail("env name set and stripped (validation)",
                "local p = a3s.plan('x') p:env_strip{ 'HOME' } p:env_set('HOME', '/x') return p",
                "both set");
    expect_fail("require cycle", "require 'case'", "cycle");
    expect_fail("method on a non-plan", "local p = a3s.plan('x') p.hide({}, '/x')",
                "a3s.Plan expected");
}

static void test_derived(void)
{
    a3s_error err = {0};
    a3s_plan *p = eval_text("derived.lua",
                            "local plan = a3s.extend(\"baseline\", \"derived\")\n"
                            "plan:limits{ timeout_ms = 5000 }\n"
                            "return plan\n",
                            &err);
    ok(p != NULL, "derived policy evaluates (%s)", p ? "ok" : err.msg);
    if (p) {
        ok_streq(p->name, "derived", "renamed by a3s.extend");
        ok(p->limits.timeout_ms == 5000 && p->limits.output_bytes == 102400,
           "one limit changed, the rest kept");
        ok(p->limits.prov.file && ends_with(p->limits.prov.file, "/pol/derived.lua") &&
               p->limits.prov.line == 2,
           "limit provenance points at derived.lua:2");
        const a3s_fs_rule *r = find_fs(p, A3S_FS_HIDE, home);
        ok(r && ends_with(r->prov.file, "/policies/baseline.lua"),
           "base rules keep the base's provenance");
        ok(ends_with(p->source, "/pol/derived.lua"), "source is the derived file");
        a3s_plan_free(p);
    }

    /* The base runs in its own environment: globals the derived policy breaks (even the
     * shared library tables it can reach) do not reach it. */
    p = eval_text("hijack.lua",
                  "ipairs = function() error('hijacked') end\n"
                  "string = nil; table = nil\n"
                  "require = function() error('hijacked') end\n"
                  "local plan = a3s.extend(\"baseline\", \"hijack\")\n"
                  "return plan\n",
                  &err);
    ok(p && p->protect_dirs.n == 7, "derived globals do not leak into the base (%s)",
       p ? "ok" : err.msg);
    a3s_plan_free(p);

    p = eval_text("selfext.lua", "return a3s.extend('selfext', 'x')\n", &err);
    ok(!p && strstr(err.msg, "extend cycle"), "extend cycle refused: %s", err.msg);
    p = eval_text("badbase.lua", "return a3s.extend('case', 'x')\n", &err);
    /* case.lua (last written by the escape tests) does not return a plan */
    ok(!p && err.code == A3S_ERR_POLICY, "extending a non-plan policy refused: %s", err.msg);

    /* Plan validation runs after evaluation, with the rule's provenance. */
    p = eval_text("broad.lua",
                  "local plan = a3s.extend('baseline', 'broad')\n"
                  "plan:writable('/etc')\n"
                  "return plan\n",
                  &err);
    ok(!p && err.code == A3S_ERR_POLICY && strstr(err.msg, "/etc") &&
           strstr(err.msg, "broad.lua:2"),
       "invalid plan refused with provenance: %s", err.msg);

    /* Provenance through load(): attributed to the file line that ran the chunk. */
    p = eval_text("viaload.lua",
                  "local plan = a3s.plan('viaload')\n"
                  "local f = assert(load(\"local plan = ...; plan:hide('/opt/x')\", '@/etc/fake'))\n"
                  "f(plan)\n"
                  "return plan\n",
                  &err);
    const a3s_fs_rule *r = p ? find_fs(p, A3S_FS_HIDE, "/opt/x") : NULL;
    ok(r && ends_with(r->prov.file, "/pol/viaload.lua") && r->prov.line == 3,
       "load()ed code attributed to its caller (%s:%d)", r ? r->prov.file : err.msg,
       r ? r->prov.line : 0);
    a3s_plan_free(p);
}

int main(void)
{
    find_policies_dir();
    printf("# policies: %s\n", policies_dir);
    setup();
    test_lockdown();
    test_budgets();
    test_errors();
    test_derived();
    teardown();
    return tap_done();
}
