-- The Lua module (README "Lua module"): construction, probe, exec (shell and argv forms), result
-- fields, timeouts, explicit env, stdin, the live observer (deltas, errors propagate and
-- the tree is killed), argument checking, digest/plan/capabilities, close.
--
-- Run: LUA_CPATH="build/?.so;;" LUA_PATH="spec/lua/?.lua;;" lua5.4 spec/lua/module_spec.lua -v
-- Exits 77 (skip) when the sandbox boundary is unavailable, unless A3S_MUST_WORK=1.
-- LUA_PATH may arrive without its ";;" (CMake splits ENVIRONMENT on ';'): fall back to
-- the system Lua directories for luaunit.
local H = require "spec_helper"
local lu = H.lu
local sandbox = require "a3s_sandbox"

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read "a"
  p:close()
  return out
end
local function chomp(s) return (s:gsub("\n+$", "")) end
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function now_ms() return tonumber(chomp(sh "date +%s%N")) // 1000000 end
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end
local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read "a"
  f:close()
  return s
end

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

-- The CLI next to the module, unless A3S_CLI says otherwise.
local function cli_path()
  local env = os.getenv "A3S_CLI"
  if env and env ~= "" then return env end
  local so = assert(package.searchpath("a3s_sandbox", package.cpath))
  return (so:gsub("[^/]*$", "")) .. "a3s-sandbox"
end

local function is_hex64(s) return type(s) == "string" and s:match "^[0-9a-f]+$" ~= nil and #s == 64 end

-- Skip (77) when the boundary cannot work here, fail instead under A3S_MUST_WORK=1.
require("spec_helper").require_sandbox(cleanup)

TestModule = {}

function TestModule:setUp()
  self.ws = tmpdir()
  self.sb = assert(sandbox.new { workspace = self.ws })
end

function TestModule:tearDown()
  if self.sb then self.sb:close() end
end

function TestModule:test_new_canonical_workspace()
  local sb, err = sandbox.new { workspace = self.ws .. "/." }
  lu.assertNotNil(sb, err)
  lu.assertStrContains(tostring(sb), self.ws)
  local r = sb:exec "pwd -P"
  lu.assertEquals(r.stdout, self.ws .. "\n")
  sb:close()
end

function TestModule:test_new_on_a_file_is_not_a_directory()
  local f = self.ws .. "/plain-file"
  assert(io.open(f, "w")):close()
  local sb, err = sandbox.new { workspace = f }
  lu.assertNil(sb)
  lu.assertStrContains(err, "not a directory")
end

function TestModule:test_new_on_a_missing_path_fails()
  local sb, err = sandbox.new { workspace = self.ws .. "/does-not-exist" }
  lu.assertNil(sb)
  lu.assertIsString(err)
  lu.assertStrContains(err, "does-not-exist")
end

function TestModule:test_probe()
  lu.assertEquals(self.sb:probe(), true)
end

function TestModule:test_exec_streams_status_and_fields()
  local r, err = self.sb:exec "printf one; printf two >&2; exit 3"
  lu.assertNotNil(r, err)
  lu.assertEquals(r.stdout, "one")
  lu.assertEquals(r.stderr, "two")
  lu.assertEquals(r.exit_code, 3)
  lu.assertEquals(r.timed_out, false)
  lu.assertEquals(r.truncated, false)
  lu.assertEquals(r.total_bytes, 6)
  lu.assertEquals(r.captured_bytes, 6)
  lu.assertNil(r.signal)
  lu.assertEquals(r.backend, "linux-bwrap")
  lu.assertEquals(r.policy, "baseline")
  lu.assertTrue(is_hex64(r.policy_digest), tostring(r.policy_digest))
  lu.assertEquals(r.policy_digest, self.sb:digest())
  lu.assertIsTable(r.network_grants)
  lu.assertEquals(#r.network_grants, 0)
  lu.assertIsTable(r.denials)
  lu.assertIsNumber(r.duration_ms)
end

function TestModule:test_exec_argv_table_runs_as_given()
  local r, err = self.sb:exec { "printf", "%s|%s", "a  b", "$HOME;echo x" }
  lu.assertNotNil(r, err)
  lu.assertEquals(r.exit_code, 0)
  lu.assertEquals(r.stdout, "a  b|$HOME;echo x")
end

function TestModule:test_exec_argv_table_with_options()
  local r, err = self.sb:exec({ "cat" }, { stdin = "argv-in", timeout = 5 })
  lu.assertNotNil(r, err)
  lu.assertEquals(r.stdout, "argv-in")
end

function TestModule:test_exec_writes_land_in_the_workspace()
  local r = assert(self.sb:exec "printf changed > ordinary.txt")
  lu.assertEquals(r.exit_code, 0)
  lu.assertEquals(read_file(self.ws .. "/ordinary.txt"), "changed")
end

-- Timing checks must hold on a loaded machine: a bound is what the check allows + 5x a
-- plain exec measured just before (it slows down with the machine) + 3 s of slack. The
-- timed commands would run on for 30 s if the kill were broken, far above any such bound.
local function bound_ms(sb, allowed)
  local t0 = now_ms()
  assert(sb:exec "true")
  return allowed + 5 * (now_ms() - t0) + 3000
end

function TestModule:test_timeout_kills_and_reports()
  local bound = bound_ms(self.sb, 50)
  local t0 = now_ms()
  local r, err = self.sb:exec("(sleep 0.3; touch timeout-leak) & sleep 30", { timeout = 0.05 })
  local ms = now_ms() - t0
  lu.assertNotNil(r, err) -- a timeout is not an error
  lu.assertEquals(r.timed_out, true)
  lu.assertNil(r.exit_code)
  lu.assertTrue(ms < bound, ("returned after %d ms (bound %d ms)"):format(ms, bound))
  local found = false
  for _, d in ipairs(r.denials) do if d.kind == "deadline" then found = true end end
  lu.assertTrue(found, "a deadline denial is recorded")
  os.execute "sleep 0.5"
  lu.assertFalse(exists(self.ws .. "/timeout-leak"), "the background job was killed")
end

function TestModule:test_timeout_zero_is_refused()
  local r, err = self.sb:exec("touch ran", { timeout = 0 })
  lu.assertNil(r)
  lu.assertStrContains(err, "timeout")
  lu.assertFalse(exists(self.ws .. "/ran"))
end

function TestModule:test_signal()
  local r = assert(self.sb:exec "kill -9 $$")
  -- bwrap's init reports a child killed by signal N as exit status 128+N: either form.
  lu.assertTrue((r.signal == 9 and r.exit_code == nil) or (r.signal == nil and r.exit_code == 137),
    "signal=" .. tostring(r.signal) .. " exit_code=" .. tostring(r.exit_code))
  lu.assertEquals(r.timed_out, false)
end

function TestModule:test_env_visible()
  local r = assert(self.sb:exec('printf %s "$SAFE_VALUE"', { env = { SAFE_VALUE = "v" } }))
  lu.assertEquals(r.stdout, "v")
end

function TestModule:test_env_bootstrap_stripped()
  local r = assert(self.sb:exec('printf "%s|%s|%s" "${SAFE_VALUE:-}" "${BASH_ENV:-}" "${LD_PRELOAD:-}"',
    { env = { SAFE_VALUE = "visible", BASH_ENV = "attack", LD_PRELOAD = "/x" } }))
  lu.assertEquals(r.stdout, "visible||")
end

function TestModule:test_env_bad_entries_return_nil_err()
  for _, env in ipairs { { ["BAD-NAME"] = "x" }, { ["BAD=KEY"] = "v" }, { BAD_VALUE = "bad\0value" },
    { ["1ABC"] = "x" } } do
    local r, err = self.sb:exec("touch ran-bad-env", { env = env })
    lu.assertNil(r)
    lu.assertStrContains(err, "invalid explicit command environment")
  end
  lu.assertFalse(exists(self.ws .. "/ran-bad-env"))
end

function TestModule:test_stdin_data()
  local r = assert(self.sb:exec("cat", { stdin = "data" }))
  lu.assertEquals(r.stdout, "data")
  lu.assertEquals(r.exit_code, 0)
end

function TestModule:test_default_stdin_is_empty()
  local r = assert(self.sb:exec("cat; echo done", { timeout = 5 }))
  lu.assertEquals(r.timed_out, false)
  lu.assertEquals(r.stdout, "done\n")
end

function TestModule:test_on_output_deltas_concatenate_to_the_captures()
  local got = { stdout = {}, stderr = {} }
  local r = assert(self.sb:exec("printf one; printf two >&2; head -c 50000 /dev/zero | tr '\\0' a; printf err >&2", {
    on_output = function(stream, chunk)
      lu.assertIsString(chunk)
      got[stream][#got[stream] + 1] = chunk
    end,
  }))
  lu.assertEquals(table.concat(got.stdout), r.stdout)
  lu.assertEquals(table.concat(got.stderr), r.stderr)
  lu.assertEquals(r.stdout, "one" .. ("a"):rep(50000))
  lu.assertEquals(r.stderr, "twoerr")
  for k in pairs(got) do lu.assertTrue(k == "stdout" or k == "stderr") end
end

function TestModule:test_on_output_is_unbounded_past_the_budget()
  local n = 0
  local r = assert(self.sb:exec("dd if=/dev/zero bs=110000 count=1 2>/dev/null | tr '\\0' x", {
    on_output = function(_, chunk) n = n + #chunk end,
  }))
  lu.assertEquals(r.truncated, true)
  lu.assertEquals(r.total_bytes, 110000)
  lu.assertEquals(n, 110000)
end

function TestModule:test_on_output_error_propagates_and_kills_the_tree()
  local bound = bound_ms(self.sb, 0)
  local t0 = now_ms()
  local ok, msg = pcall(self.sb.exec, self.sb, "printf first; sleep 0.5; touch leak; sleep 30", {
    on_output = function() error("observer boom", 0) end,
  })
  local ms = now_ms() - t0
  lu.assertFalse(ok)
  lu.assertStrContains(tostring(msg), "observer boom")
  lu.assertTrue(ms < bound, ("returned after %d ms (bound %d ms)"):format(ms, bound))
  os.execute "sleep 0.8"
  lu.assertFalse(exists(self.ws .. "/leak"), "the process tree was killed")
  -- The sandbox stays usable afterwards.
  local r = assert(self.sb:exec "printf again")
  lu.assertEquals(r.stdout, "again")
end

function TestModule:test_nul_in_command()
  local r, err = self.sb:exec "echo\0never"
  lu.assertNil(r)
  lu.assertStrContains(err, "NUL")
  local r2, err2 = self.sb:exec { "printf", "a\0b" }
  lu.assertNil(r2)
  lu.assertStrContains(err2, "NUL")
end

function TestModule:test_wrong_argument_types_raise()
  local sb = self.sb
  lu.assertFalse(pcall(sb.exec, sb, 42))
  lu.assertFalse(pcall(sb.exec, sb))
  lu.assertFalse(pcall(sb.exec, sb, {}))
  lu.assertFalse(pcall(sb.exec, sb, { "printf", 42 }))
  lu.assertFalse(pcall(sb.exec, sb, "true", { bogus = 1 }))
  lu.assertFalse(pcall(sb.exec, sb, "true", { timeout = "5" }))
  lu.assertFalse(pcall(sb.exec, sb, "true", { env = "FOO=bar" }))
  lu.assertFalse(pcall(sb.exec, sb, "true", { env = { FOO = 1 } }))
  lu.assertFalse(pcall(sb.exec, sb, "true", { stdin = 5 }))
  lu.assertFalse(pcall(sb.exec, sb, "true", { on_output = "print" }))
  lu.assertFalse(pcall(sandbox.new, { workspace = 1 }))
  lu.assertFalse(pcall(sandbox.new, { workspace = self.ws, unknown_option = true }))
  lu.assertFalse(pcall(sandbox.new, { workspace = self.ws, allow_process_host = "yes" }))
  lu.assertFalse(pcall(sandbox.new, "not a table"))
  lu.assertFalse(pcall(sb.probe, 42))
end

-- Misuse raises an argument error that names the method or function as Lua names its
-- own, whatever the form of the call (sb:exec(42), pcall(sb.exec, sb, 42)): a method's
-- arguments are counted without self, a wrong self is "calling 'exec' on bad self", and
-- an option's error is an error of the options argument.
function TestModule:test_argument_errors_name_the_function()
  local sb = self.sb
  local function raises(expect, f, ...)
    local ok, err = pcall(f, ...)
    lu.assertFalse(ok, expect)
    lu.assertStrContains(tostring(err), expect)
    lu.assertNotStrContains(tostring(err), "'?'")
  end
  raises("bad argument #1 to 'exec' (command string or argv table expected", sb.exec, sb, 42)
  raises("bad argument #1 to 'exec' (command string or argv table expected",
         function() return sb:exec(42) end)
  raises("bad argument #1 to 'exec' (argv table must not be empty)", sb.exec, sb, {})
  raises("bad argument #1 to 'exec' (argv entries must be strings)", sb.exec, sb, { "printf", 42 })
  raises("bad argument #2 to 'exec' (table expected, got string)", sb.exec, sb, "true", "x")
  raises("bad argument #2 to 'exec' (unknown option 'bogus')", sb.exec, sb, "true", { bogus = 1 })
  raises("bad argument #2 to 'exec' (option 'timeout' must be a number", sb.exec, sb, "true",
         { timeout = "5" })
  raises("bad argument #2 to 'exec' (option 'env' must be a table)", sb.exec, sb, "true",
         { env = "FOO=bar" })
  raises("bad argument #2 to 'exec' (option 'stdin' must be a string)", sb.exec, sb, "true",
         { stdin = 5 })
  raises("bad argument #2 to 'exec' (option 'on_output' must be a function)", sb.exec, sb,
         "true", { on_output = "print" })
  raises("bad argument #2 to 'exec' (option 'cwd' must be a string)", sb.exec, sb, "true",
         { cwd = 5 })
  raises("calling 'exec' on bad self (a3s.Sandbox expected, got number)", sb.exec, 42, "true")
  for _, m in ipairs { "probe", "digest", "plan", "explain", "capabilities", "close" } do
    raises("calling '" .. m .. "' on bad self (a3s.Sandbox expected, got number)", sb[m], 42)
    raises("calling '" .. m .. "' on bad self (a3s.Sandbox expected, got no value)", sb[m])
  end
  raises("bad argument #1 to 'replace_policy' (string expected, got no value)",
         sb.replace_policy, sb)
  raises("bad argument #2 to 'replace_policy' (table expected, got number)", sb.replace_policy,
         sb, "baseline", 5)
  raises("bad argument #2 to 'replace_policy' (unknown option 'x')", sb.replace_policy, sb,
         "baseline", { x = 1 })
  raises("bad argument #1 to 'grant' (table expected, got string)", sb.grant, sb, "example.com")
  raises("bad argument #1 to 'grant' ('host' is required)", sb.grant, sb, {})
  raises("bad argument #1 to 'grant_set' (table expected, got no value)", sb.grant_set, sb)
  raises("bad argument #2 to 'grant_set' (table expected, got number)", sb.grant_set, sb, {}, 5)
  raises("bad argument #1 to 'grant_set' (entry 1 must be", sb.grant_set, sb, { 5 })
  raises("bad argument #1 to 'new' (table expected, got string)", sandbox.new, "not a table")
  raises("bad argument #1 to 'new' (option 'workspace' must be a string)", sandbox.new,
         { workspace = 1 })
  raises("bad argument #1 to 'new' (unknown option 'unknown_option')", sandbox.new,
         { unknown_option = true })
  -- A closed sandbox names the method too.
  local closed = assert(sandbox.new { workspace = self.ws })
  closed:close()
  raises("exec: the sandbox is closed", closed.exec, closed, "true")
  raises("digest: the sandbox is closed", function() return closed:digest() end)
end

-- exec{ cwd = DIR }: the command starts in DIR, a directory of the workspace given
-- relative to it; anything else is refused before the command runs (nil, message).
local function cwd_cases(self, sb)
  os.execute("mkdir -p " .. q(self.ws .. "/sub/dir"))
  local r = assert(sb:exec("pwd -P", { cwd = "sub/dir" }))
  lu.assertEquals(r.stdout, self.ws .. "/sub/dir\n")
  r = assert(sb:exec({ "bash", "-c", "pwd -P" }, { cwd = "./sub/" }))
  lu.assertEquals(r.stdout, self.ws .. "/sub\n")
  r = assert(sb:exec("pwd -P", { cwd = "." }))
  lu.assertEquals(r.stdout, self.ws .. "\n")
  -- A symbolic link that stays inside the workspace is followed.
  os.execute("ln -s sub/dir " .. q(self.ws .. "/inside"))
  r = assert(sb:exec("pwd -P", { cwd = "inside" }))
  lu.assertEquals(r.stdout, self.ws .. "/sub/dir\n")
  -- Refused: what is not a relative path inside the workspace, and what is not a
  -- directory there. Nothing runs.
  os.execute("ln -s /etc " .. q(self.ws .. "/outside"))
  os.execute("ln -s ../.. " .. q(self.ws .. "/sub/up"))
  H.write(self.ws .. "/afile", "x")
  local refused = {
    ["/"] = "relative", ["/etc"] = "relative", [self.ws .. "/sub"] = "relative",
    [".."] = "'..'", ["../x"] = "'..'", ["sub/.."] = "'..'", ["sub/../sub"] = "'..'",
    [""] = "empty", ["sub\0x"] = "NUL",
    ["missing"] = "does not exist", ["sub/missing/deeper"] = "does not exist",
    ["afile"] = "not a directory", ["afile/x"] = "not a directory",
    ["outside"] = "out of the workspace", ["sub/up"] = "out of the workspace",
  }
  for cwd, why in pairs(refused) do
    local r2, err = sb:exec("touch ran", { cwd = cwd })
    lu.assertNil(r2, ("cwd %q was refused"):format(cwd))
    lu.assertStrContains(err, "working directory")
    lu.assertStrContains(err, why)
    lu.assertFalse(exists(self.ws .. "/ran"), ("nothing ran for cwd %q"):format(cwd))
  end
end

function TestModule:test_cwd()
  cwd_cases(self, self.sb)
end

-- The process-host fallback (no boundary) starts the command in the same place and
-- refuses the same directories.
function TestModule:test_cwd_process_host()
  local sb = assert(sandbox.new { workspace = self.ws, bwrap = "/nonexistent/bwrap",
                                  allow_process_host = true, allow_host_root = true })
  lu.assertEquals(assert(sb:capabilities()).backend, "process-host")
  cwd_cases(self, sb)
  sb:close()
end

function TestModule:test_digest_equals_cli_digest()
  local d = self.sb:digest()
  lu.assertTrue(is_hex64(d), tostring(d))
  local cli = chomp(sh(q(cli_path()) .. " digest -w " .. q(self.ws) .. " 2>&1"))
  lu.assertEquals(d, cli)
  local other = assert(sandbox.new { workspace = tmpdir() })
  lu.assertEquals(other:digest(), d)
  other:close()
end

function TestModule:test_plan()
  local p, err = self.sb:plan()
  lu.assertIsTable(p, err)
  lu.assertIsTable(p.bwrap_argv)
  lu.assertStrMatches(p.bwrap_argv[1], "/.*bwrap")
  lu.assertEquals(p.policy_digest, self.sb:digest())
end

function TestModule:test_capabilities()
  local c, err = self.sb:capabilities()
  lu.assertIsTable(c, err)
  lu.assertEquals(c.backend, "linux-bwrap")
  lu.assertIsTable(c.capabilities)
  lu.assertEquals(c.capabilities.network_deny_all, true)
  lu.assertIsTable(c.unavailable)
end

function TestModule:test_close_then_use_raises()
  local sb = assert(sandbox.new { workspace = self.ws })
  sb:close()
  lu.assertFalse(pcall(sb.exec, sb, "true"))
  lu.assertFalse(pcall(sb.probe, sb))
  lu.assertFalse(pcall(sb.digest, sb))
  lu.assertFalse(pcall(sb.plan, sb))
  sb:close() -- idempotent
  lu.assertStrContains(tostring(sb), "closed")
end

function TestModule:test_to_be_closed_variable()
  local ran
  do
    local sb <close> = assert(sandbox.new { workspace = self.ws })
    ran = sb
    lu.assertEquals(sb:exec("printf tbc").stdout, "tbc")
  end
  lu.assertFalse(pcall(ran.exec, ran, "true"))
end

local rc = lu.LuaUnit.run()
cleanup()
os.exit(rc)
