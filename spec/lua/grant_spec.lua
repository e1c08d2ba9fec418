-- sb:grant{} and sb:grant_set() through the Lua module: digest-pinned,
-- exact, idempotent, recorded in results; stale and wildcard grants refused and nothing
-- changes. The approval digest covers the policy and the exact grant set (normalized,
-- order-free), so an approval is never replayed with other grants; at most 256 grants.
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

-- The approval digest of `grants` (a list for grant_set), computed by another sandbox of
-- the same policy: what an operator approves.
local function approval(grants)
  local sb = assert(sandbox.new{ workspace = tmpdir() })
  local d = assert(sb:grant_set(grants))
  sb:close()
  return d
end

function TestGrant:test_grant_changes_digest_and_is_idempotent()
  local base = self.sb:digest()
  local d1 = assert(self.sb:grant{ host = "api.example.com", port = 443 })
  lu.assertNotEquals(d1, base)
  lu.assertEquals(self.sb:digest(), d1)
  local d2 = assert(self.sb:grant{ host = "API.Example.com", port = 443, digest = d1 })
  lu.assertEquals(d2, d1, "an identical re-grant (any case) changes nothing")
end

function TestGrant:test_digest_covers_the_set_after_the_grant()
  local want = approval{ "api.example.com:443" }
  local d = assert(self.sb:grant{ host = "api.example.com", port = 443, digest = want })
  lu.assertEquals(d, want)
  lu.assertEquals(self.sb:digest(), want)
  -- A second grant needs an approval of both.
  local both = approval{ "api.example.com:443", "files.example.com:443" }
  local no, err = self.sb:grant{ host = "files.example.com", port = 443, digest = want }
  lu.assertNil(no)
  lu.assertStrContains(err, want)
  lu.assertStrContains(err, both)
  lu.assertEquals(self.sb:digest(), want, "nothing changed")
  lu.assertEquals(assert(self.sb:grant{ host = "files.example.com", port = 443, digest = both }),
    both)
end

function TestGrant:test_policy_digest_alone_approves_no_grant()
  local base = self.sb:digest()
  local want = approval{ "api.example.com:443" }
  local d, err = self.sb:grant{ host = "api.example.com", port = 443, digest = base }
  lu.assertNil(d)
  lu.assertStrContains(err, base)
  lu.assertStrContains(err, want)
  lu.assertEquals(self.sb:digest(), base)
end

function TestGrant:test_stale_digest_refused_and_nothing_changes()
  local base = self.sb:digest()
  local want = approval{ "api.example.com:443" }
  local stale = ("0"):rep(64)
  local d, err = self.sb:grant{ host = "api.example.com", port = 443, digest = stale }
  lu.assertNil(d)
  lu.assertStrContains(err, stale)
  lu.assertStrContains(err, want)
  lu.assertEquals(self.sb:digest(), base)
end

function TestGrant:test_grant_set_is_order_free_and_normalized()
  local a = approval{ "b.example.com:443", { host = "A.Example.com", port = 80 } }
  local b = approval{ { host = "a.example.com", port = 80 }, "B.EXAMPLE.COM:443",
                      "a.example.com:80" }
  lu.assertEquals(a, b)
  lu.assertEquals(approval{ "[0:0::1]:8080" }, approval{ { host = "::1", port = 8080 } })
  lu.assertNotEquals(approval{ "a.example.com" }, approval{ "a.example.com:80" })
  lu.assertEquals(approval{}, self.sb:digest(), "no grants: the policy digest")
end

function TestGrant:test_grant_set_checks_the_whole_set()
  local base = self.sb:digest()
  local set = { "api.example.com:443", "files.example.com:443" }
  local want = approval(set)
  -- Replays with other sets: one more, one fewer, every port, the bare policy.
  for _, other in ipairs{
    { "api.example.com:443", "files.example.com:443", "127.0.0.1" },
    { "api.example.com:443" },
    { "api.example.com", "files.example.com:443" },
  } do
    local d, err = self.sb:grant_set(other, { digest = want })
    lu.assertNil(d)
    lu.assertStrContains(err, want)
    lu.assertStrContains(err, approval(other))
    lu.assertEquals(self.sb:digest(), base, "nothing changed")
  end
  local d, err = self.sb:grant_set({ "files.example.com:443", "API.example.com:443" },
    { digest = want })
  lu.assertEquals(d, want, err)
  lu.assertEquals(self.sb:digest(), want)
  -- The set replaces what was granted before; an empty set clears it.
  lu.assertEquals(assert(self.sb:grant_set{ "api.example.com:443" }),
    approval{ "api.example.com:443" })
  lu.assertEquals(assert(self.sb:grant_set({}, { digest = base })), base)
  lu.assertEquals(self.sb:digest(), base)
end

function TestGrant:test_grant_set_agrees_with_the_cli()
  local cli = os.getenv("A3S_CLI")
  if not cli then return end
  local ws = tmpdir()
  local d = sh(cli .. " digest -w " .. ws .. " --grant files.example.com:443 --grant api.example.com")
  local sb = assert(sandbox.new{ workspace = ws })
  lu.assertEquals(assert(sb:grant_set({ "api.example.com", "files.example.com:443" },
    { digest = d })), d)
  sb:close()
end

function TestGrant:test_at_most_256_grants()
  local list = {}
  for i = 1, 257 do list[i] = "h" .. i .. ".example.com:443" end
  local d, err = self.sb:grant_set(list)
  lu.assertNil(d)
  lu.assertStrContains(err, "at most 256")
  local base = self.sb:digest()
  list[257] = nil
  assert(self.sb:grant_set(list))
  lu.assertNotEquals(self.sb:digest(), base)
  local full = self.sb:digest()
  d, err = self.sb:grant{ host = "one-more.example.com" }
  lu.assertNil(d)
  lu.assertStrContains(err, "at most 256")
  lu.assertEquals(self.sb:digest(), full, "nothing changed")
  lu.assertEquals(assert(self.sb:grant{ host = "h1.example.com", port = 443 }), full,
    "a re-grant of a held origin is not one more")
end

function TestGrant:test_grant_set_records_every_grant()
  local d = assert(self.sb:grant_set{ "127.0.0.1:9", "127.0.0.1:7" })
  local r = assert(self.sb:exec("true"))
  lu.assertEquals(r.policy_digest, d)
  lu.assertEquals(#r.network_grants, 2)
  local ports = {}
  for _, g in ipairs(r.network_grants) do
    lu.assertEquals(g.host, "127.0.0.1")
    lu.assertEquals(g.policy_digest, d)
    ports[#ports + 1] = g.port
  end
  table.sort(ports)
  lu.assertEquals(ports, { 7, 9 })
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
  lu.assertError(function() self.sb:grant_set("a.example.com") end)
  lu.assertErrorMsgContains("entry 1", function() self.sb:grant_set{ 443 } end)
  lu.assertErrorMsgContains("unknown option", function()
    self.sb:grant_set({ "a.example.com" }, { digest = "x", wild = true })
  end)
  lu.assertErrorMsgContains("unknown option", function()
    self.sb:grant_set{ { host = "a.example.com", digest = "x" } }
  end)
  -- An approval slipped into the list instead of the options would go unchecked: raise.
  lu.assertErrorMsgContains("list", function()
    self.sb:grant_set{ "a.example.com", digest = ("0"):rep(64) }
  end)
end

H.run()
