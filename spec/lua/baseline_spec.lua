-- The baseline policy as a plan (policies/baseline.lua), read through sb:plan(): the
-- filesystem rules, the environment pipeline, the seccomp denials, the limits, the
-- provenance of every declared rule, and a digest that does not depend on the host
-- roots.
--
-- Run: LUA_CPATH="build/?.so;;" LUA_PATH="spec/lua/?.lua;;" lua5.4 spec/lua/baseline_spec.lua -v
-- Exits 77 (skip) when the sandbox cannot be constructed, unless A3S_MUST_WORK=1.
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
local function is_dir(p) return os.execute("test -d " .. q(p)) == true end

local tmp_roots = {}
local function tmpdir()
  local d = chomp(sh "mktemp -d \"${TMPDIR:-/tmp}/a3s-lua-spec-XXXXXX\"")
  assert(d ~= "", "mktemp failed")
  tmp_roots[#tmp_roots + 1] = d
  return chomp(sh("cd " .. q(d) .. " && pwd -P"))
end
local function cleanup()
  for _, d in ipairs(tmp_roots) do os.execute("rm -rf " .. q(d)) end
end

local function plan_for(ws, policy)
  local sb, err = sandbox.new { workspace = ws, policy = policy }
  if not sb then return nil, err end
  local p, perr = sb:plan()
  local d = sb:digest()
  sb:close()
  return p, perr, d
end

-- Skip (77) when no plan can be made here, fail instead under A3S_MUST_WORK=1.
local WS = tmpdir()
local PLAN, PLAN_ERR, DIGEST = plan_for(WS)
if not PLAN then
  print("SKIP: no sandbox/plan here: " .. tostring(PLAN_ERR))
  cleanup()
  if os.getenv "A3S_MUST_WORK" == "1" then
    print "A3S_MUST_WORK=1: failing instead"
    os.exit(1)
  end
  os.exit(77)
end

-- Rules of one kind at one path.
local function fs_rules(plan, kind, path)
  local out = {}
  for _, r in ipairs(plan.fs) do
    if r.kind == kind and r.path == path then out[#out + 1] = r end
  end
  return out
end
local function has_fs(plan, kind, path)
  return #fs_rules(plan, kind, path) > 0
end
local function kinds_at(plan, path)
  local ks = {}
  for _, r in ipairs(plan.fs) do if r.path == path then ks[#ks + 1] = r.kind end end
  return table.concat(ks, ",")
end
local function names(list)
  local s = {}
  for _, e in ipairs(list or {}) do s[#s + 1] = type(e) == "table" and e.name or e end
  return s
end
local function has_name(list, want, ci)
  for _, n in ipairs(names(list)) do
    if n == want or (ci and n:upper() == want:upper()) then return true end
  end
  return false
end
local function from_ok(from)
  return type(from) == "string" and (from:match "baseline%.lua:%d+$" ~= nil
    or from:match "lib/[%w_%-]+%.lua:%d+$" ~= nil)
end

TestBaseline = {}

function TestBaseline:test_plan_identity()
  lu.assertEquals(PLAN.name, "baseline")
  lu.assertEquals(PLAN.network, "none")
  lu.assertEquals(PLAN.policy_digest, DIGEST)
  lu.assertEquals(PLAN.digest, DIGEST)
  lu.assertEquals(PLAN.backend, "linux-bwrap")
  lu.assertStrMatches(PLAN.source, ".*baseline%.lua")
  lu.assertEquals(PLAN.roots.workspace, WS)
end

function TestBaseline:test_writable_roots_are_the_workspace_and_the_scratch()
  local roots = PLAN.roots
  lu.assertTrue(has_fs(PLAN, "writable", roots.workspace), kinds_at(PLAN, roots.workspace))
  lu.assertTrue(has_fs(PLAN, "writable", roots.scratch), kinds_at(PLAN, roots.scratch))
  lu.assertStrContains(roots.scratch, roots.tmp .. "/")
  -- Nothing else is writable except the optional .a3s/loops carve-out in the workspace.
  for _, r in ipairs(PLAN.fs) do
    if r.kind == "writable" then
      lu.assertTrue(r.path == roots.workspace or r.path == roots.scratch
        or r.path == roots.workspace .. "/.a3s/loops", "unexpected writable " .. r.path)
    end
  end
end

function TestBaseline:test_hidden_roots()
  local roots = PLAN.roots
  lu.assertTrue(has_fs(PLAN, "hide", roots.home), "home " .. roots.home .. ": " .. kinds_at(PLAN, roots.home))
  for _, p in ipairs { "/root", "/home", "/run" } do
    if is_dir(p) then lu.assertTrue(has_fs(PLAN, "hide", p), p .. ": " .. kinds_at(PLAN, p)) end
  end
  if roots.tmp ~= "/tmp" then
    lu.assertTrue(has_fs(PLAN, "hide", roots.tmp), "host tmp " .. roots.tmp)
  end
  lu.assertTrue(has_fs(PLAN, "tmpfs", "/tmp"), "/tmp: " .. kinds_at(PLAN, "/tmp"))
end

function TestBaseline:test_system_secrets_masked()
  for _, p in ipairs { "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d",
    "/etc/ssl/private", "/run/secrets" } do
    lu.assertTrue(has_fs(PLAN, "mask", p), p .. ": " .. kinds_at(PLAN, p))
  end
end

function TestBaseline:test_home_credentials_masked()
  local home = PLAN.roots.home
  for _, rel in ipairs { ".ssh", ".gnupg", ".aws", ".netrc", ".git-credentials", ".docker",
    ".kube", ".config/gh", ".cargo/credentials.toml", ".claude/.credentials.json" } do
    lu.assertTrue(has_fs(PLAN, "mask", home .. "/" .. rel), rel)
  end
  for _, rel in ipairs { ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".claude.json" } do
    lu.assertTrue(has_fs(PLAN, "mask", WS .. "/" .. rel), "workspace " .. rel)
  end
end

function TestBaseline:test_workspace_env_files_found_by_the_scan_are_masked()
  local ws = tmpdir()
  os.execute("mkdir -p " .. q(ws .. "/sub/deeper") .. " " .. q(ws .. "/node_modules/pkg") .. " " .. q(ws .. "/.git"))
  for _, rel in ipairs { ".env", ".ENV.local", "sub/.env.production", "sub/deeper/.envrc",
    "node_modules/pkg/.env", ".git/.env", "not.env" } do
    assert(io.open(ws .. "/" .. rel, "w")):close()
  end
  local p, err, d = plan_for(ws)
  lu.assertNotNil(p, err)
  for _, rel in ipairs { ".env", ".ENV.local", "sub/.env.production", "sub/deeper/.envrc" } do
    local rules = fs_rules(p, "mask", ws .. "/" .. rel)
    lu.assertEquals(#rules, 1, rel .. ": " .. kinds_at(p, ws .. "/" .. rel))
    lu.assertEquals(rules[1].discovered, true, rel)
  end
  for _, rel in ipairs { "node_modules/pkg/.env", ".git/.env", "not.env" } do
    lu.assertFalse(has_fs(p, "mask", ws .. "/" .. rel), rel .. " is not a workspace secret")
  end
  -- Discovered entries stay out of the digest.
  lu.assertEquals(d, DIGEST)
end

function TestBaseline:test_path_dirs_under_hidden_roots_are_reexposed_read_only()
  local roots = PLAN.roots
  local hidden = { roots.home, "/root", "/home", "/run" }
  for dir in (os.getenv "PATH" or ""):gmatch "[^:]+" do
    if dir:sub(1, 1) == "/" and is_dir(dir) then
      local real = chomp(sh("cd " .. q(dir) .. " && pwd -P"))
      for _, h in ipairs(hidden) do
        if real:sub(1, #h + 1) == h .. "/" then
          lu.assertTrue(has_fs(PLAN, "read_only", real), "PATH dir " .. real .. ": " .. kinds_at(PLAN, real))
        end
      end
    end
  end
end

function TestBaseline:test_protected_names_and_scan()
  for _, n in ipairs { ".git", ".a3s", ".agents", ".codex", ".claude", ".vscode", ".idea" } do
    lu.assertTrue(has_name(PLAN.protect_dirs, n), "protect dir " .. n)
  end
  for _, n in ipairs { ".gitmodules", ".mcp.json", ".ripgreprc", ".bashrc", ".bash_profile",
    ".zshrc", ".zprofile", ".profile" } do
    lu.assertTrue(has_name(PLAN.protect_files, n), "protect file " .. n)
  end
  lu.assertTrue(has_name(PLAN.secret_prefixes, ".env"))
  for _, n in ipairs { ".git", "node_modules", "target" } do
    lu.assertTrue(has_name(PLAN.scan_skip, n), "scan skip " .. n)
  end
end

function TestBaseline:test_environment_pipeline()
  local env = PLAN.env
  lu.assertTrue(has_name(env.keep, "PATH"))
  lu.assertTrue(has_name(env.keep, "LC_ALL"))
  lu.assertTrue(has_name(env.keep_prefix, "LC_"))
  for _, n in ipairs { "BASH_ENV", "LD_PRELOAD", "ENV", "NODE_OPTIONS", "PYTHONPATH", "LUA_INIT",
    "HTTP_PROXY", "https_proxy", "NO_PROXY", "A3S_SANDBOX_MEDIATOR_PIPE",
    "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "GCONV_PATH", "IFS", "CDPATH", "LD_AUDIT" } do
    lu.assertTrue(has_name(env.strip, n, true), "strip " .. n)
  end
  for _, n in ipairs { "BASH_FUNC_", "GIT_", "LUA_INIT_" } do
    lu.assertTrue(has_name(env.strip_prefix, n, true), "strip prefix " .. n)
  end
  -- HOME/TMP/XDG are re-homed to the scratch dir.
  local set = {}
  for _, kv in ipairs(env.set) do set[kv.name] = kv.value end
  for _, n in ipairs { "HOME", "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
    "XDG_DATA_HOME", "XDG_STATE_HOME" } do
    lu.assertEquals(set[n], PLAN.roots.scratch, n)
  end
  -- The computed environment for this host.
  local result = {}
  for _, e in ipairs(PLAN.env_result) do
    local k, v = e:match "^([^=]*)=(.*)$"
    result[k] = v
  end
  lu.assertEquals(result.HOME, PLAN.roots.scratch)
  lu.assertEquals(result.PATH, os.getenv "PATH")
  lu.assertNil(result.LUA_PATH)
  lu.assertNil(result.LUA_CPATH)
end

function TestBaseline:test_seccomp()
  local sc = PLAN.seccomp
  local deny = {}
  for _, r in ipairs(sc.deny) do deny[r.syscall] = r.errno end
  for _, s in ipairs { "keyctl", "add_key", "request_key", "unshare", "setns", "link", "linkat",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "perf_event_open",
    "userfaultfd", "mount" } do
    lu.assertEquals(deny[s], "EPERM", s)
  end
  lu.assertEquals(deny.clone3, "ENOSYS")
  for _, s in ipairs { "fsopen", "fsmount", "move_mount", "open_tree", "fsconfig", "fspick" } do
    lu.assertNotNil(deny[s], s)
  end
  lu.assertNil(deny.ptrace, "ptrace stays allowed")
  lu.assertEquals(#sc.socket_allow, 0)
  lu.assertEquals(sc.socketpair_unix, true)
  lu.assertEquals(sc.deny_clone_ns, true)
  lu.assertEquals(sc.deny_tty_inject, true)
end

function TestBaseline:test_limits()
  local l = PLAN.limits
  lu.assertEquals(l.timeout_ms, 120000)
  lu.assertEquals(l.output_bytes, 102400)
  lu.assertEquals(l.core_bytes, 0)
  lu.assertTrue(l.nofile > 0)
end

function TestBaseline:test_every_declared_rule_has_provenance()
  local bad = {}
  local function need(what, from)
    if not from_ok(from) then bad[#bad + 1] = what .. " from=" .. tostring(from) end
  end
  for _, r in ipairs(PLAN.fs) do
    if not r.discovered then need("fs " .. r.kind .. " " .. r.path, r.from) end
  end
  for _, k in ipairs { "keep", "keep_prefix", "strip", "strip_prefix", "set" } do
    for _, e in ipairs(PLAN.env[k]) do need("env." .. k .. " " .. e.name, e.from) end
  end
  for _, k in ipairs { "protect_dirs", "protect_files", "secret_prefixes", "scan_skip" } do
    for _, e in ipairs(PLAN[k]) do need(k .. " " .. e.name, e.from) end
  end
  for _, r in ipairs(PLAN.seccomp.deny) do need("seccomp " .. r.syscall, r.from) end
  need("seccomp", PLAN.seccomp.from)
  need("limits", PLAN.limits.from)
  need("network", PLAN.network_from)
  lu.assertEquals(bad, {})
  -- Spot check: the limits line is really the plan:limits call of baseline.lua.
  local file, line = PLAN.limits.from:match "^(.*):(%d+)$"
  local f = io.open(file, "r") or io.open(PLAN.source, "r")
  if f then
    local n, text = 0, nil
    for l in f:lines() do
      n = n + 1
      if n == tonumber(line) then text = l break end
    end
    f:close()
    lu.assertStrContains(text or "", "limits")
  end
end

function TestBaseline:test_digest_is_independent_of_the_workspace_and_host_roots()
  local p2, err, d2 = plan_for(tmpdir())
  lu.assertNotNil(p2, err)
  lu.assertEquals(d2, DIGEST)
  lu.assertNotEquals(p2.roots.workspace, PLAN.roots.workspace)
  -- Same plan, same digest, different scratch per evaluation.
  local p3, _, d3 = plan_for(WS)
  lu.assertEquals(d3, DIGEST)
  lu.assertNotEquals(p3.roots.scratch, PLAN.roots.scratch)
end

function TestBaseline:test_digest_changes_with_a_rule()
  local dir = tmpdir()
  local f = assert(io.open(dir .. "/longer.lua", "w"))
  f:write 'local plan = a3s.extend("baseline", "baseline")\nplan:limits{ timeout_ms = 60000 }\nreturn plan\n'
  f:close()
  local p, err, d = plan_for(WS, dir .. "/longer.lua")
  lu.assertNotNil(p, err)
  lu.assertEquals(p.limits.timeout_ms, 60000)
  lu.assertStrContains(p.limits.from, "longer.lua:2")
  lu.assertNotEquals(d, DIGEST)
  -- Renaming alone changes the digest too (the name is part of the declarations).
  f = assert(io.open(dir .. "/renamed.lua", "w"))
  f:write 'return a3s.extend("baseline", "renamed")\n'
  f:close()
  local p2, err2, d2 = plan_for(WS, dir .. "/renamed.lua")
  lu.assertNotNil(p2, err2)
  lu.assertNotEquals(d2, DIGEST)
  -- The unchanged base through extend keeps the digest.
  f = assert(io.open(dir .. "/same.lua", "w"))
  f:write 'return a3s.extend("baseline", "baseline")\n'
  f:close()
  local p3, err3, d3 = plan_for(WS, dir .. "/same.lua")
  lu.assertNotNil(p3, err3)
  lu.assertEquals(d3, DIGEST)
end

local rc = lu.LuaUnit.run()
cleanup()
os.exit(rc)
