-- Lua callbacks called from inside an exec (the on_output observer, the audit function)
-- run under a protected call. An error in the observer stops the run: the process tree
-- is killed; an error in the audit function lets the run finish without more Lua. Either
-- way the workspace pins and the scratch dir are removed, and only then does sb:exec
-- raise the very value the callback raised (a string stays that string, a table that
-- table).
-- A callback may not close or reuse its own sandbox while it runs. Memory errors in a
-- callback are covered by spec/unit/test_lua_callbacks.c (it needs its own allocator).
--
-- The spec runs itself again with TMPDIR set to a directory of its own, so that "no
-- scratch dir left" (a3s-sandbox-* there) is not disturbed by other specs running at the
-- same time.
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

if not os.getenv "A3S_CB_TMPDIR" then
  local p = assert(io.popen "mktemp -d \"${TMPDIR:-/tmp}/a3s-lua-cbtmp-XXXXXX\"")
  local dir = p:read "a":gsub("\n+$", "")
  p:close()
  assert(dir ~= "", "mktemp failed")
  local lo = -1
  while arg[lo - 1] do lo = lo - 1 end
  local words = {}
  for i = lo, #arg do words[#words + 1] = q(arg[i]) end
  local _, how, code = os.execute("A3S_CB_TMPDIR=" .. q(dir) .. " TMPDIR=" .. q(dir) .. " "
                                  .. table.concat(words, " "))
  os.execute("rm -rf " .. q(dir))
  os.exit(how == "exit" and code or 1)
end

local H = require "spec_helper"
local lu, sandbox, sh = H.lu, H.sandbox, H.sh
local TMP = os.getenv "A3S_CB_TMPDIR"
H.require_sandbox()

local function now_s()
  return tonumber(sh "date +%s%N") / 1e9
end

local function exists(path)
  return os.execute("test -e " .. q(path)) == true
end

-- Entries of a directory, one per line, sorted.
local function listing(dir)
  return sh("ls -A " .. q(dir) .. " | LC_ALL=C sort")
end

-- Scratch dirs of this spec's TMPDIR (backends/linux/runres.c make_scratch).
local function scratch_dirs()
  return sh("cd " .. q(TMP) .. " && ls -d a3s-sandbox-* 2>/dev/null")
end

-- A unique `sleep` duration of about `secs` (30 by default): the processes of the tree
-- are found by it.
local function marker(secs)
  return string.format("%d.%06d", secs or 30, math.random(1, 999999))
end

-- Pids of the processes whose command line holds `mark` (read from /proc: this process's
-- own command line does not hold it).
local function marked(mark)
  local pids = {}
  for pid in sh("ls /proc"):gmatch "%d+" do
    local f = io.open("/proc/" .. pid .. "/cmdline", "rb")
    local cmdline = f and f:read "a"
    if f then f:close() end
    if cmdline and cmdline:find(mark, 1, true) then pids[#pids + 1] = pid end
  end
  return table.concat(pids, " ")
end

-- The processes of the tree still there after up to 5 s (the kernel tears a killed tree
-- down asynchronously). Leftovers are killed so a failure does not leave them running.
local function leftover(mark)
  local pids = ""
  for _ = 1, 50 do
    pids = marked(mark)
    if pids == "" then return "" end
    os.execute "sleep 0.1"
  end
  os.execute("kill -KILL " .. pids .. " 2>/dev/null")
  return pids
end

-- The command: report the scratch dir and the workspace as the command sees it (pins
-- included), then sleep (30 s unless the marker says otherwise).
local function command(mark)
  return "printf 'scratch=%s\\n' \"$TMPDIR\"; ls -A; echo READY; exec sleep " .. mark
end

TestCallbacks = {}

function TestCallbacks:setUp()
  self.ws = H.tmpdir "cb"
  H.write(self.ws .. "/kept.txt", "kept\n")
  self.before = listing(self.ws)
  lu.assertEquals(scratch_dirs(), "")
end

-- After a failed exec: the tree is gone, it did not run its 30 s, the workspace is as it
-- was (pins removed), no scratch dir is left, and the sandbox still works.
function TestCallbacks:check_cleanup(sb, mark, t0, seen)
  local took = now_s() - t0
  lu.assertTrue(took < 10, "sb:exec returned after " .. took .. " s")
  lu.assertEquals(leftover(mark), "", "processes of the tree are still running")
  lu.assertEquals(listing(self.ws), self.before, "the workspace is as it was")
  lu.assertEquals(scratch_dirs(), "", "no scratch dir is left")
  if seen then
    -- What the command saw: a scratch dir (now gone) and the pins (now gone).
    local scratch = seen:match "scratch=([^\n]+)"
    lu.assertNotNil(scratch, seen)
    lu.assertFalse(exists(scratch), "scratch dir " .. scratch .. " is gone")
    lu.assertStrContains(seen, "\n.git\n")
    lu.assertFalse(exists(self.ws .. "/.git"), "the .git pin is gone")
  end
  local r = assert(sb:exec "printf again")
  lu.assertEquals(r.stdout, "again")
  lu.assertEquals(scratch_dirs(), "")
end

-- on_output raises `value` once the command reported READY.
function TestCallbacks:observer_raises(value)
  local sb = assert(sandbox.new{ workspace = self.ws })
  local mark, seen = marker(), ""
  local t0 = now_s()
  local ok, err = pcall(sb.exec, sb, command(mark), {
    timeout = 60,
    on_output = function(_, chunk)
      seen = seen .. chunk
      if seen:find "READY" then error(value, 0) end
    end,
  })
  lu.assertFalse(ok)
  lu.assertTrue(rawequal(err, value), "the same value is raised, got " .. tostring(err))
  self:check_cleanup(sb, mark, t0, seen)
  sb:close()
end

-- An error object with a metatable, raised with a level from a function the observer
-- calls, comes back from a plain sb:exec call as that very object (no message, position
-- or traceback added), and the sandbox is usable afterwards.
function TestCallbacks:test_observer_error_object_identity()
  local sb = assert(sandbox.new{ workspace = self.ws })
  local obj = setmetatable({ code = 42 }, { __tostring = function() return "E42" end })
  local function deep() error(obj, 2) end
  local ok, err = pcall(function()
    return sb:exec("echo hi", { on_output = function() deep() end })
  end)
  lu.assertFalse(ok)
  lu.assertTrue(rawequal(err, obj), "the same object is raised, got " .. tostring(err))
  lu.assertEquals(err.code, 42)
  lu.assertEquals(assert(sb:exec "printf again").stdout, "again")
  sb:close()
end

function TestCallbacks:test_observer_string_error()
  self:observer_raises "observer broke"
end

function TestCallbacks:test_observer_table_error()
  self:observer_raises { code = "observer-table" }
end

function TestCallbacks:test_observer_error_with_position_is_not_rewritten()
  local sb = assert(sandbox.new{ workspace = self.ws })
  local ok, err = pcall(sb.exec, sb, "echo hi", {
    on_output = function() error "positioned" end,
  })
  lu.assertFalse(ok)
  lu.assertStrMatches(err, ".-callbacks_spec%.lua:%d+: positioned")
  sb:close()
end

-- The audit function raises `value` at its first event (before the command starts).
-- Like an audit file whose writes fail, that does not stop the run (engine/run.c):
-- the command (a short one here) runs under its limits, but neither the later events nor
-- its output reach Lua, and sb:exec raises the value once everything is released.
function TestCallbacks:audit_raises(value)
  local events, outputs, broken = 0, 0, true
  local sb = assert(sandbox.new{ workspace = self.ws, audit = function()
    events = events + 1
    if broken then error(value, 0) end
  end })
  local mark = marker(1)
  local t0 = now_s()
  local ok, err = pcall(sb.exec, sb, command(mark), {
    timeout = 60,
    on_output = function() outputs = outputs + 1 end,
  })
  lu.assertFalse(ok)
  lu.assertTrue(rawequal(err, value), "the same value is raised, got " .. tostring(err))
  lu.assertEquals(events, 1, "no event after the first error reaches Lua")
  lu.assertEquals(outputs, 0, "no output after the first error reaches Lua")
  broken = false
  self:check_cleanup(sb, mark, t0)
  lu.assertTrue(events > 1, "the next exec calls the audit function again")
  sb:close()
end

function TestCallbacks:test_audit_string_error()
  self:audit_raises "audit sink broke"
end

function TestCallbacks:test_audit_table_error()
  self:audit_raises { code = "audit-table" }
end

-- The audit event of a deadline comes after the tree is gone: the error is still raised
-- (the result is not returned), once, after cleanup.
function TestCallbacks:test_audit_error_after_the_run()
  local calls = 0
  local sb = assert(sandbox.new{ workspace = self.ws, audit = function(line)
    if line:find '"reason":"timeout"' then
      calls = calls + 1
      error("late audit error", 0)
    end
  end })
  local mark = marker()
  local t0 = now_s()
  local ok, err = pcall(sb.exec, sb, command(mark), { timeout = 0.5 })
  lu.assertFalse(ok)
  lu.assertEquals(err, "late audit error")
  lu.assertEquals(calls, 1)
  self:check_cleanup(sb, mark, t0)
  sb:close()
end

-- Both callbacks would fail: the first error wins, and no Lua runs after it.
function TestCallbacks:test_first_error_wins()
  local broken = true
  local sb = assert(sandbox.new{ workspace = self.ws, audit = function(line)
    if broken and line:find '"event":"network"' then error("audit first", 0) end
  end })
  local mark = marker(1)
  local t0 = now_s()
  local ok, err = pcall(sb.exec, sb, command(mark), {
    on_output = function() error("observer second", 0) end,
  })
  lu.assertFalse(ok)
  lu.assertEquals(err, "audit first")
  broken = false
  self:check_cleanup(sb, mark, t0)
  sb:close()
end

-- A callback that closes or reuses its own sandbox would pull the engine's state from
-- under the exec in progress: refused, and the refusal is the callback's error.
function TestCallbacks:test_callback_cannot_touch_its_sandbox()
  local sb = assert(sandbox.new{ workspace = self.ws })
  for _, f in ipairs{
    function() sb:close() end,
    function() sb:exec "true" end,
    function() sb:replace_policy "review" end,
    function() sb:grant{ host = "example.org" } end,
  } do
    local mark, seen = marker(), ""
    local t0 = now_s()
    local ok, err = pcall(sb.exec, sb, command(mark), {
      on_output = function(_, chunk)
        seen = seen .. chunk
        if seen:find "READY" then f() end
      end,
    })
    lu.assertFalse(ok)
    lu.assertStrContains(tostring(err), "running a command")
    self:check_cleanup(sb, mark, t0, seen)
  end
  -- Another sandbox may be used from a callback.
  local other = assert(sandbox.new{ workspace = H.tmpdir "cb-other" })
  local got
  local r = assert(sb:exec("echo outer", {
    on_output = function() got = assert(other:exec "printf inner").stdout end,
  }))
  lu.assertEquals(r.stdout, "outer\n")
  lu.assertEquals(got, "inner")
  other:close()
  sb:close()
end

-- A yield from the observer cannot cross the engine's C frames: it is an error like any.
function TestCallbacks:test_yield_in_observer()
  local sb = assert(sandbox.new{ workspace = self.ws })
  local mark, seen = marker(), ""
  local t0 = now_s()
  local co = coroutine.create(function()
    return sb:exec(command(mark), {
      on_output = function(_, chunk)
        seen = seen .. chunk
        if seen:find "READY" then coroutine.yield "escaped" end
      end,
    })
  end)
  local ok, err = coroutine.resume(co)
  lu.assertFalse(ok)
  lu.assertStrContains(tostring(err), "yield")
  self:check_cleanup(sb, mark, t0, seen)
  sb:close()
end

H.run()
