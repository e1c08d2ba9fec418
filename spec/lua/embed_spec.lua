-- A Lua host embedding the module (a separate `lua5.4` process, SIGPIPE at its default
-- disposition, a private TMPDIR): more than a pipe's worth of stdin to commands that exit
-- without reading it all is a normal result and never kills the host; `mirror = true`
-- prints the output live on the host's own fds 1 and 2, and a reader that goes away
-- (host | head -1) kills the tree and sets r.output_closed, the host surviving. After
-- every host: no a3s-sandbox-* scratch dir in its TMPDIR, the workspace unchanged, no
-- process of the run left.
local H = require "spec_helper"
local lu, sandbox, sh = H.lu, H.sandbox, H.sh
H.require_sandbox()

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read "a"
  f:close()
  return s
end
-- The interpreter running this spec (the one CMake found), for the hosts.
local lua
do
  local i = -1
  while arg[i - 1] do i = i - 1 end
  lua = arg[i] or "lua5.4"
end

-- The host program: `host.lua MODE WORKSPACE RESULTFILE MARKER`. It writes "key=value"
-- lines to RESULTFILE (an error too) and exits 0; a SIGPIPE would kill it instead.
local host_src = [==[
local mode, ws, out, marker = arg[1], arg[2], arg[3], arg[4]
local res = {}
local function put(k, v) res[#res + 1] = k .. "=" .. tostring(v) end
local function finish()
  local f = assert(io.open(out, "w"))
  f:write(table.concat(res, "\n"), "\n")
  f:close()
  os.exit(0)
end
-- This host must really be exposed: SIGPIPE (13) neither ignored nor blocked.
do
  local f = assert(io.open("/proc/self/status"))
  local s = f:read "a"
  f:close()
  local ign = tonumber(s:match "SigIgn:%s*(%x+)", 16)
  local blk = tonumber(s:match "SigBlk:%s*(%x+)", 16)
  put("sigpipe_default", (ign & (1 << 12)) == 0 and (blk & (1 << 12)) == 0)
end
local function main()
  local sandbox = require "a3s_sandbox"
  local sb = assert(sandbox.new { workspace = ws })
  if mode == "stdin" then
    local data = string.rep("x", 1 << 20)
    local good = 0
    for n = 1, 6 do
      local argv = n % 2 == 1 and { "true", marker } or { "bash", "-c", "head -c1; :", marker }
      local r, err = sb:exec(argv, { stdin = data, timeout = 60 })
      if not r then put("error", err) break end
      if r.exit_code == 0 and not r.timed_out and (n % 2 == 1 or r.stdout == "x") then
        good = good + 1
      else
        put("bad_run", n .. " exit " .. tostring(r.exit_code) .. " stdout " .. #r.stdout)
      end
    end
    put("good_runs", good)
  elseif mode == "mirror-closed" then
    -- stdout is a pipe to `head -1`: it goes away after one line.
    local r, err = sb:exec({ "yes", marker }, { mirror = true, timeout = 30 })
    if not r then put("error", err) finish() end
    put("output_closed", r.output_closed)
    put("timed_out", r.timed_out)
    put("duration_ms", r.duration_ms)
  elseif mode == "mirror-normal" then
    io.write "before\n" -- buffered by Lua: must come out before the command's output
    local r, err = sb:exec({ "bash", "-c", "head -c1; echo; echo err >&2", marker },
      { mirror = true, stdin = string.rep("x", 1 << 20) })
    if not r then put("error", err) finish() end
    io.write "after\n"
    io.stdout:flush()
    put("output_closed", r.output_closed)
    put("exit_code", r.exit_code)
    put("stdout", (r.stdout:gsub("\n", "\\n")))
    put("stderr", (r.stderr:gsub("\n", "\\n")))
  elseif mode == "mirror-invalid" then
    local okk, e = pcall(sb.exec, sb, "true", { mirror = "yes" })
    put("raised", not okk)
    put("message", e)
  end
  sb:close()
end
-- An error is a result too (put in the file); only a signal ends this host otherwise.
local okk, e = pcall(main)
if not okk then put("error", (tostring(e):gsub("\n", " "))) end
finish()
]==]

TestEmbed = {}

function TestEmbed:setUp()
  self.root = H.tmpdir "embed"
  self.ws = self.root .. "/ws"
  self.tmp = self.root .. "/tmp" -- the host's private TMPDIR
  os.execute("mkdir -p " .. q(self.ws .. "/sub") .. " " .. q(self.tmp))
  H.write(self.ws .. "/keep.txt", "workspace content\n")
  self.host = self.root .. "/host.lua"
  H.write(self.host, host_src)
  self.marker = "a3s-embed-lua-" .. sh "echo $$-$RANDOM$RANDOM"
end

function TestEmbed:snapshot()
  return sh("cd " .. q(self.ws) .. " && find . -printf '%p %y %m %s\\n' | sort && " ..
    "find . -type f -exec md5sum {} + | sort")
end

-- Runs the host in MODE with `shell_tail` appended to its command line (redirections, a
-- pipe); returns its exit status (a signal shows as 128+N) and its results as a table.
function TestEmbed:run_host(mode, shell_tail)
  local out = self.root .. "/result-" .. mode
  local status = self.root .. "/status-" .. mode
  local cmd = "env --default-signal=PIPE TMPDIR=" .. q(self.tmp) .. " " .. q(lua) .. " " ..
    q(self.host) .. " " .. mode .. " " .. q(self.ws) .. " " .. q(out) .. " " ..
    q(self.marker) .. " " .. (shell_tail or "") .. '; echo "${PIPESTATUS[0]}" >' .. q(status)
  os.execute("bash -c " .. q(cmd))
  local res = {}
  for k, v in (read_file(out) or ""):gmatch "([%w_]+)=([^\n]*)" do res[k] = v end
  return tonumber((read_file(status) or ""):match "%d+"), res
end

-- Nothing of the runs is left: scratch dirs in the private TMPDIR, the workspace as it
-- was, processes carrying the marker.
function TestEmbed:assert_nothing_left(before)
  lu.assertEquals(sh("ls -A " .. q(self.tmp) .. " | grep -c '^a3s-sandbox-'"), "0",
    "a scratch dir was left in the host's TMPDIR")
  lu.assertEquals(self:snapshot(), before, "the workspace changed")
  -- [a]: the pattern does not match pgrep's own shell.
  local pat = "[" .. self.marker:sub(1, 1) .. "]" .. self.marker:sub(2)
  lu.assertEquals(sh("pgrep -f -- " .. q(pat) .. " | wc -l"), "0", "a process of the run is left")
end

function TestEmbed:test_big_stdin_to_commands_that_do_not_read_it()
  local before = self:snapshot()
  local st, res = self:run_host("stdin")
  lu.assertEquals(st, 0, "the host died (141 = SIGPIPE)")
  lu.assertEquals(res.sigpipe_default, "true", "the host must have SIGPIPE at its default")
  lu.assertNil(res.error)
  lu.assertNil(res.bad_run)
  lu.assertEquals(res.good_runs, "6")
  self:assert_nothing_left(before)
end

function TestEmbed:test_mirror_reader_goes_away()
  local before = self:snapshot()
  local first = self.root .. "/first-line"
  local st, res = self:run_host("mirror-closed", "| head -1 >" .. q(first))
  lu.assertEquals(st, 0, "the host died (141 = SIGPIPE)")
  lu.assertEquals(res.sigpipe_default, "true", "the host must have SIGPIPE at its default")
  lu.assertNil(res.error)
  lu.assertEquals(read_file(first), self.marker .. "\n")
  lu.assertEquals(res.output_closed, "true")
  lu.assertEquals(res.timed_out, "false")
  lu.assertTrue(tonumber(res.duration_ms) < 10000,
    "the tree was not killed when the reader went away (" .. res.duration_ms .. " ms)")
  self:assert_nothing_left(before)
end

function TestEmbed:test_mirror_prints_live_on_fds_1_and_2()
  local before = self:snapshot()
  local o, e = self.root .. "/host-stdout", self.root .. "/host-stderr"
  local st, res = self:run_host("mirror-normal", ">" .. q(o) .. " 2>" .. q(e))
  lu.assertEquals(st, 0, "the host died")
  lu.assertNil(res.error)
  lu.assertEquals(res.output_closed, "false")
  lu.assertEquals(res.exit_code, "0")
  lu.assertEquals(res.stdout, "x\\n")
  lu.assertEquals(res.stderr, "err\\n")
  lu.assertEquals(read_file(o), "before\nx\nafter\n", "mirrored once, after what Lua buffered")
  lu.assertEquals(read_file(e), "err\n")
  self:assert_nothing_left(before)
end

function TestEmbed:test_mirror_must_be_a_boolean()
  local st, res = self:run_host("mirror-invalid")
  lu.assertEquals(st, 0)
  lu.assertEquals(res.raised, "true")
  lu.assertStrContains(res.message, "option 'mirror' must be a boolean")
end

function TestEmbed:test_result_has_output_closed_false_without_mirror()
  local sb = assert(sandbox.new { workspace = self.ws })
  local r = assert(sb:exec("echo hi"))
  lu.assertEquals(r.output_closed, false)
  sb:close()
end

H.run()
