-- sb:session() (README "Sessions"): the same exec as sb:exec, in one warm boundary; each
-- command in its own namespaces with a fresh /tmp; the workspace rescanned before each;
-- the sandbox cannot be closed under an open session; a closed session refuses.
local H = require "spec_helper"
local lu, sandbox = H.lu, H.sandbox
H.require_sandbox()

TestSession = {}

function TestSession:test_exec_like_sb_exec()
  local ws = H.tmpdir("session")
  local sb = assert(sandbox.new{ workspace = ws })
  local s = assert(sb:session())
  lu.assertStrContains(tostring(s), "a3s.Session")
  local r = assert(s:exec({"sh", "-c", "echo out; echo err >&2; exit 3"}))
  local f = assert(sb:exec({"sh", "-c", "echo out; echo err >&2; exit 3"}))
  for _, k in ipairs{"exit_code", "stdout", "stderr", "policy", "policy_digest", "backend",
                     "timed_out", "truncated"} do
    lu.assertEquals(r[k], f[k], k)
  end
  r = assert(s:exec("cat", {stdin = "fed", env = {GREETING = "hi"}, timeout = 5}))
  lu.assertEquals(r.stdout, "fed")
  r = assert(s:exec("echo $GREETING", {env = {GREETING = "hi"}}))
  lu.assertEquals(r.stdout, "hi\n")
  r = assert(s:exec("sleep 5", {timeout = 0.5}))
  lu.assertTrue(r.timed_out)
  local seen = {}
  r = assert(s:exec("echo live", {on_output = function(stream, data) seen[#seen + 1] = data end}))
  lu.assertEquals(table.concat(seen), "live\n")
  lu.assertErrorMsgContains("bad argument #1 to 'exec'", s.exec, s, 42)
  -- The policy cannot change under an open session.
  local ok, perr = sb:replace_policy("review")
  lu.assertNil(ok)
  lu.assertStrContains(perr, "open sessions")
  -- The sandbox cannot go while its session is open.
  lu.assertErrorMsgContains("close the sandbox's sessions first", sb.close, sb)
  s:close()
  s:close() -- idempotent
  local r2, err = s:exec("true")
  lu.assertNil(r2)
  lu.assertStrContains(err, "closed")
  sb:close()
end

function TestSession:test_fresh_tmp_and_rescan()
  local ws = H.tmpdir("session")
  local sb = assert(sandbox.new{ workspace = ws })
  local s = assert(sb:session())
  local r = assert(s:exec("echo a > /tmp/left-behind && echo b > \"$TMPDIR/left-too\" && echo wrote"))
  lu.assertEquals(r.stdout, "wrote\n")
  r = assert(s:exec("ls -A /tmp \"$TMPDIR\""))
  lu.assertNotStrContains(r.stdout, "left-")
  H.write(ws .. "/.env", "session-lua-canary")
  r = assert(s:exec("cat .env 2>&1; true"))
  lu.assertNotStrContains(r.stdout, "session-lua-canary")
  s:close()
  sb:close()
end

H.run()
