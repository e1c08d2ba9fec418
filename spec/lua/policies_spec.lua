-- Every shipped policy (policies/*.lua) through the Lua module: it loads by name, runs
-- a command, has a digest of its own, and shows its distinctive effect; sb:plan() shows
-- the changed limits/rules with provenance ("from") at the line of the derived file that
-- changed them, and the inherited ones at baseline.lua.
--   offline-build: host caches readable, not writable (a child Lua with a fake HOME)
--   review:        workspace read-only, scratch writable
--   strict-ci:     32 KiB output budget, 30 s ceiling, CI definition protected
-- A shipped policy without a distinctive test here fails the spec: add one.
--
-- Run: LUA_CPATH="build/?.so;;" LUA_PATH="spec/lua/?.lua;;" lua5.4 spec/lua/policies_spec.lua -v
-- Exits 77 (skip) when the sandbox boundary is unavailable, unless A3S_MUST_WORK=1.
-- LUA_PATH may arrive without its ";;" (CMake splits ENVIRONMENT on ';'): fall back to
-- the system Lua directories for luaunit.
local lu = require("spec_helper").lu
local sandbox = require "a3s_sandbox"

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read "a"
  p:close()
  return out
end
local function chomp(s) return (s:gsub("\n+$", "")) end
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read "a"
  f:close()
  return s
end
local function write_file(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end
local function exists(path) return os.execute("test -e " .. q(path)) == true end

local tmp_roots = {}
local function tmpdir()
  local d = chomp(sh "mktemp -d \"${TMPDIR:-/tmp}/a3s-lua-spec-XXXXXX\"")
  assert(d ~= "", "mktemp failed")
  tmp_roots[#tmp_roots + 1] = d
  return chomp(sh("cd " .. q(d) .. " && pwd -P"))
end
local function cleanup()
  for _, d in ipairs(tmp_roots) do os.execute("chmod -R u+rwX " .. q(d) .. " 2>/dev/null; rm -rf " .. q(d)) end
end

-- The shipped policies: $A3S_SOURCE_DIR/policies, or the tree this spec is in.
local SRC = os.getenv "A3S_SOURCE_DIR"
if not SRC or SRC == "" then
  SRC = chomp(sh("cd " .. q((arg[0]:gsub("[^/]*$", ""))) .. "../.. && pwd -P"))
end
-- Where the module finds them: the build's copy next to it (share/a3s-sandbox/policies).
local BUILD = os.getenv "A3S_BUILD_DIR"
local SHIPPED = (BUILD and BUILD ~= "") and chomp(sh("cd " .. q(BUILD) .. " && pwd -P"))
  .. "/share/a3s-sandbox/policies" or SRC .. "/policies"
local POLICIES = {}
for f in sh("ls " .. q(SRC .. "/policies") .. "/*.lua"):gmatch "[^\n]+" do
  POLICIES[#POLICIES + 1] = f:match "([^/]+)%.lua$"
end

-- Tests that run commands need the boundary (each skips where it cannot work, and fails
-- instead under A3S_MUST_WORK=1); the others are about policies only.
local H = require "spec_helper"

local function open(policy, ws)
  local sb, err = sandbox.new { policy = policy, workspace = ws }
  lu.assertNotNil(sb, err)
  return sb
end

-- "file:LINE" of the first line of `file` containing `needle` (plain text).
local function line_of(file, needle)
  local n = 0
  for l in assert(io.open(file)):lines() do
    n = n + 1
    if l:find(needle, 1, true) then return file .. ":" .. n end
  end
  error(needle .. " not found in " .. file)
end
local function from_baseline(from)
  return type(from) == "string" and from:match "/baseline%.lua:%d+$" ~= nil
end
local function fs_at(plan, path)
  local out = {}
  for _, r in ipairs(plan.fs) do
    if r.path == path then out[#out + 1] = r end
  end
  return out
end
local function entry(list, name)
  for _, e in ipairs(list) do
    if e.name == name then return e end
  end
end

TestPolicies = {}

function TestPolicies:test_every_policy_runs_by_name_with_a_digest_of_its_own()
  H.need_sandbox()
  lu.assertTrue(#POLICIES >= 4, "shipped: " .. table.concat(POLICIES, " "))
  local ws = tmpdir()
  local seen = {}
  for _, name in ipairs(POLICIES) do
    local sb = open(name, ws)
    local plan, perr = sb:plan()
    lu.assertIsTable(plan, perr)
    lu.assertEquals(plan.name, name)
    lu.assertEquals(plan.source, SHIPPED .. "/" .. name .. ".lua")
    lu.assertEquals(plan.network, "none")
    local r, err = sb:exec { "printf", "%s", "ran-" .. name }
    lu.assertNotNil(r, err)
    lu.assertEquals({ r.exit_code, r.stdout, r.policy }, { 0, "ran-" .. name, name })
    local d = sb:digest()
    lu.assertEquals(r.policy_digest, d)
    lu.assertNil(seen[d], name .. " has the digest of " .. tostring(seen[d]))
    seen[d] = name
    sb:close()
  end
end

function TestPolicies:test_every_policy_has_a_distinctive_test()
  for _, name in ipairs(POLICIES) do
    local fn = "test_" .. name:gsub("[-.]", "_")
    lu.assertIsFunction(TestPolicies[fn], name .. ": no " .. fn .. " in policies_spec.lua")
  end
end

-- replace_policy: moving a live sandbox from the baseline to a derived policy is refused when
-- it broadens anything. review and strict-ci only narrow; offline-build broadens (host
-- caches, a longer deadline, new environment values).
function TestPolicies:test_replace_policy_from_baseline()
  H.need_sandbox()
  local ws = tmpdir()
  for name, narrows in pairs { review = true, ["strict-ci"] = true, ["offline-build"] = false } do
    local sb = open("baseline", ws)
    local ok, err = sb:replace_policy(name)
    if narrows then
      lu.assertEquals({ ok, err }, { true, nil }, name)
      lu.assertEquals(sb:exec("printf x").policy, name)
    else
      lu.assertNil(ok, name)
      lu.assertStrContains(err, "broadens")
      lu.assertEquals(sb:replace_policy(name, { allow_broadening = true }), true)
    end
    sb:close()
  end
end

function TestPolicies:test_baseline()
  H.need_sandbox()
  local ws = tmpdir()
  local sb = open("baseline", ws)
  lu.assertEquals(sb:exec("printf base > made.txt").exit_code, 0)
  lu.assertEquals(read_file(ws .. "/made.txt"), "base")
  sb:close()
end

-- offline-build reads the caches of ctx.home, which is the caller's HOME: run it in a
-- child Lua whose HOME is a fake one, and read its report.
function TestPolicies:test_offline_build()
  H.need_sandbox()
  local home, ws = tmpdir(), tmpdir()
  os.execute("mkdir -p " .. q(home .. "/.cache/pip") .. " " .. q(home .. "/go/pkg/mod") .. " " .. q(home .. "/other"))
  write_file(home .. "/.cache/pip/marker", "pip-cache-marker")
  write_file(home .. "/other/notes.txt", "home-canary")
  local child = string.format([[
    package.cpath = %q
    local sb = assert(require("a3s_sandbox").new { policy = "offline-build", workspace = %q })
    local home = %q
    local r = assert(sb:exec("cat " .. home .. "/.cache/pip/marker; echo;"
      .. " echo poison >> " .. home .. "/.cache/pip/marker 2>/dev/null && echo appended;"
      .. " cat " .. home .. "/other/notes.txt 2>/dev/null; printf %%s \"$GOMODCACHE\""))
    local p = sb:plan()
    local cache_from, cache_kind, cache_discovered
    for _, rule in ipairs(p.fs) do
      if rule.path == home .. "/.cache/pip" then
        cache_from, cache_kind, cache_discovered = rule.from, rule.kind, rule.discovered
      end
    end
    io.write(r.exit_code, "\n", r.stdout, "\n", p.limits.timeout_ms, "\n", p.limits.from, "\n",
      tostring(cache_kind), "\n", tostring(cache_from), "\n", tostring(cache_discovered), "\n")
  ]], package.cpath, ws, home)
  local out = sh("HOME=" .. q(home) .. " " .. q(arg[-1]) .. " -e " .. q(child) .. " 2>&1")
  local lines = {}
  for l in (out .. "\n"):gmatch "([^\n]*)\n" do lines[#lines + 1] = l end
  local file = SHIPPED .. "/offline-build.lua"
  -- Exactly these lines: the cache is readable; no "appended" (not writable) and no
  -- "home-canary" (the rest of HOME stays hidden); Go is pointed at its module cache.
  lu.assertEquals(lines, {
    "0",
    "pip-cache-marker",
    home .. "/go/pkg/mod",
    "600000",
    line_of(file, "plan:limits"),
    "read_only",
    line_of(file, "plan:read_only(dir"),
    "true", -- discovered: labelled a host fact (the neutral host of the digest has none)
    "",
  }, out)
  lu.assertEquals(read_file(home .. "/.cache/pip/marker"), "pip-cache-marker")
  lu.assertEquals(chomp(sh("ls -A " .. q(home .. "/.cache/pip"))), "marker")
end

function TestPolicies:test_review()
  H.need_sandbox()
  local ws = tmpdir()
  write_file(ws .. "/file.txt", "original")
  local sb = open("review", ws)
  local r = sb:exec "cat file.txt; echo changed > file.txt"
  lu.assertEquals(r.stdout, "original")
  lu.assertEquals(r.exit_code, 1)
  lu.assertStrContains(r.stderr, "Read-only file system")
  r = sb:exec "touch new.txt 2>/dev/null || printf refused; printf s > \"$HOME/s\" && cat \"$HOME/s\""
  lu.assertEquals(r.stdout, "refuseds")
  lu.assertEquals(read_file(ws .. "/file.txt"), "original")
  lu.assertFalse(exists(ws .. "/new.txt"))

  local p = sb:plan()
  local file = SHIPPED .. "/review.lua"
  local w = fs_at(p, p.roots.workspace)
  lu.assertEquals(#w, 1)
  lu.assertEquals({ w[1].kind, w[1].from }, { "read_only", line_of(file, "plan:replace(ctx.workspace") })
  local loops = fs_at(p, p.roots.workspace .. "/.a3s/loops")
  lu.assertEquals({ loops[1].kind, loops[1].from }, { "read_only", line_of(file, "plan:replace(path.join(ctx.workspace, \".a3s/loops\")") })
  -- Inherited: the scratch dir stays writable, declared by the baseline.
  local s = fs_at(p, p.roots.scratch)
  lu.assertEquals(s[1].kind, "writable")
  lu.assertTrue(from_baseline(s[1].from), s[1].from)
  lu.assertTrue(from_baseline(p.limits.from), p.limits.from)
  sb:close()
end

function TestPolicies:test_strict_ci()
  H.need_sandbox()
  local ws = tmpdir()
  local sb = open("strict-ci", ws)
  local r = sb:exec "head -c 200000 /dev/zero | tr '\\0' a"
  lu.assertEquals({ r.truncated, r.captured_bytes, r.total_bytes }, { true, 32768, 200000 })
  r = sb:exec "mkdir ci 2>/dev/null || printf refused; echo ok > build.log"
  lu.assertEquals(r.stdout, "refused")
  lu.assertEquals(chomp(sh("ls -A " .. q(ws))), "build.log") -- no ci/, no placeholder left

  local p = sb:plan()
  local file = SHIPPED .. "/strict-ci.lua"
  lu.assertEquals({ p.limits.timeout_ms, p.limits.output_bytes, p.limits.from },
    { 30000, 32768, line_of(file, "plan:limits") })
  local protect = line_of(file, "plan:protect_names")
  lu.assertEquals(entry(p.protect_dirs, "ci").from, protect)
  lu.assertEquals(entry(p.protect_dirs, ".github").from, protect)
  lu.assertEquals(entry(p.protect_files, ".gitlab-ci.yml").from, protect)
  -- Inherited: the baseline's protected names and writable workspace.
  lu.assertTrue(from_baseline(entry(p.protect_dirs, ".git").from))
  local w = fs_at(p, p.roots.workspace)
  lu.assertEquals(w[1].kind, "writable")
  lu.assertTrue(from_baseline(w[1].from), w[1].from)
  sb:close()
end

local rc = lu.LuaUnit.run()
cleanup()
os.exit(rc)
