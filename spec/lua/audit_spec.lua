-- Audit events through the Lua module: a callback receives one JSON line per event of an
-- execution (with its execution id), a file path gets the same lines appended, and an
-- error raised in the callback is re-raised from sb:exec, not swallowed.
local H = require "spec_helper"
local lu, sandbox, sh = H.lu, H.sandbox, H.sh
local function tmpdir() return H.tmpdir("audit") end
H.require_sandbox()

TestAudit = {}

function TestAudit:test_callback_gets_attributable_events()
  local lines = {}
  local sb = assert(sandbox.new{ workspace = tmpdir(), audit = function(l) lines[#lines + 1] = l end })
  local r = assert(sb:exec("sleep 2", { timeout = 0.1, env = { API_TOKEN = "lua-audit-canary" } }))
  lu.assertTrue(r.timed_out)
  lu.assertEquals(#r.execution_id, 32)
  local all = table.concat(lines, "\n")
  lu.assertStrContains(all, '"event":"compile"')
  lu.assertStrContains(all, '"event":"network"')
  lu.assertStrContains(all, '"reason":"timeout"')
  for _, l in ipairs(lines) do
    lu.assertStrContains(l, '"execution_id":"' .. r.execution_id .. '"')
    lu.assertStrContains(l, '"policy_digest":"' .. r.policy_digest .. '"')
  end
  lu.assertNotStrContains(all, "lua-audit-canary")
  sb:close()
end

function TestAudit:test_file_sink()
  local path = tmpdir() .. "/audit.jsonl"
  local sb = assert(sandbox.new{ workspace = tmpdir(), audit = path })
  local r = assert(sb:exec("true"))
  local f = assert(io.open(path))
  local n = 0
  for l in f:lines() do
    n = n + 1
    lu.assertStrContains(l, r.execution_id)
  end
  f:close()
  lu.assertTrue(n >= 2)
  sb:close()
end

function TestAudit:test_callback_errors_are_raised()
  local sb = assert(sandbox.new{ workspace = tmpdir(), audit = function() error("audit-sink-broke") end })
  local ok, err = pcall(sb.exec, sb, "true")
  lu.assertFalse(ok)
  lu.assertStrContains(tostring(err), "audit-sink-broke")
  sb:close()
end

function TestAudit:test_bad_option_raises()
  lu.assertErrorMsgContains("audit", function() sandbox.new{ audit = 42 } end)
end

H.run()
