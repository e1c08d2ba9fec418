-- sb:grant{} through the Lua module (reference §6.16): digest-pinned, exact, idempotent,
-- recorded in results; stale and wildcard grants refused and nothing changes.
local H = require "spec_helper"
local lu, sandbox, sh = H.lu, H.sandbox, H.sh
local function tmpdir() return H.tmpdir("grant") end
H.require_sandbox()

TestGrant = {}

function TestGrant:setUp()
  self.sb = assert(sandbox.new{ workspace = tmpdir() })
end

function TestGrant:tearDown()
  self.sb:close()
end

function TestGrant:test_grant_changes_digest_and_is_idempotent()
  local base = self.sb:digest()
  local d1 = assert(self.sb:grant{ host = "api.example.com", port = 443, digest = base })
  lu.assertNotEquals(d1, base)
  lu.assertEquals(self.sb:digest(), d1)
  local d2 = assert(self.sb:grant{ host = "API.Example.com", port = 443 })
  lu.assertEquals(d2, d1, "an identical re-grant (any case) changes nothing")
end

function TestGrant:test_stale_digest_refused_and_nothing_changes()
  local base = self.sb:digest()
  local stale = ("0"):rep(64)
  local d, err = self.sb:grant{ host = "api.example.com", port = 443, digest = stale }
  lu.assertNil(d)
  lu.assertStrContains(err, stale)
  lu.assertStrContains(err, base)
  lu.assertEquals(self.sb:digest(), base)
end

function TestGrant:test_wildcards_and_malformed_hosts_refused()
  for _, h in ipairs{ "*", "*.example.com", "api.*.com", "a b", "a/b", "a\\b", "" } do
    local d, err = self.sb:grant{ host = h }
    lu.assertNil(d, h)
    lu.assertNotNil(err)
  end
end

function TestGrant:test_result_records_the_grant()
  local d = assert(self.sb:grant{ host = "127.0.0.1", port = 9 })
  local r = assert(self.sb:exec("true"))
  lu.assertEquals(#r.network_grants, 1)
  lu.assertEquals(r.network_grants[1].host, "127.0.0.1")
  lu.assertEquals(r.network_grants[1].port, 9)
  lu.assertEquals(r.network_grants[1].policy_digest, d)
  lu.assertEquals(r.policy_digest, d)
end

function TestGrant:test_misuse_raises()
  lu.assertErrorMsgContains("unknown option", function() self.sb:grant{ host = "a", wild = true } end)
  lu.assertErrorMsgContains("host", function() self.sb:grant{ port = 1 } end)
end

H.run()
