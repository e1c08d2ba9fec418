-- Monotonic policy updates through the Lua module: sb:replace_policy(p, opts) accepts a
-- narrowing, refuses a broadening without allow_broadening (nothing changes: same digest,
-- same behaviour), and accepts it with the explicit opt-in.
local H = require "spec_helper"
local lu, sandbox, sh = H.lu, H.sandbox, H.sh
local function tmpdir() return H.tmpdir("update") end
H.require_sandbox()
local write = H.write

TestUpdate = {}

function TestUpdate:setUp()
  self.ws, self.pol = tmpdir(), tmpdir()
  write(self.pol .. "/tight.lua", [[
local plan = a3s.extend("baseline", "tight")
plan:limits{ timeout_ms = 2000, output_bytes = 4096 }
plan:protect_names{ dirs = { "ci" } }
return plan
]])
  write(self.pol .. "/wider.lua", [[
local plan = a3s.extend("baseline", "wider")
plan:env_keep{ "AWS_SECRET_ACCESS_KEY" }
return plan
]])
  local sb, err = sandbox.new{ workspace = self.ws }
  lu.assertNotNil(sb, err)
  self.sb = sb
end

function TestUpdate:tearDown()
  if self.sb then self.sb:close() end
end

function TestUpdate:test_narrowing_is_accepted_without_opt_in()
  local before = self.sb:digest()
  local ok, err = self.sb:replace_policy(self.pol .. "/tight.lua")
  lu.assertTrue(ok, err)
  lu.assertNotEquals(self.sb:digest(), before)
  local r = assert(self.sb:exec("sleep 5", { timeout = 30 }))
  lu.assertTrue(r.timed_out, "the new 2 s ceiling applies")
end

function TestUpdate:test_broadening_is_refused_and_nothing_changes()
  assert(self.sb:replace_policy(self.pol .. "/tight.lua"))
  local digest = self.sb:digest()
  local ok, err = self.sb:replace_policy("baseline")
  lu.assertNil(ok)
  lu.assertStrContains(err, "broadens")
  lu.assertStrContains(err, "allow_broadening")
  lu.assertEquals(self.sb:digest(), digest, "refused update leaves the policy as it was")
  local r = assert(self.sb:exec("sleep 5", { timeout = 30 }))
  lu.assertTrue(r.timed_out, "still the tight policy")
end

function TestUpdate:test_allowing_host_root_is_a_broadening()
  write(self.pol .. "/hostroot.lua", [[
local plan = a3s.extend("baseline", "hostroot")
plan:allow_host_root(true)
return plan
]])
  local digest = self.sb:digest()
  local ok, err = self.sb:replace_policy(self.pol .. "/hostroot.lua")
  lu.assertNil(ok)
  lu.assertStrContains(err, "allows host root")
  lu.assertEquals(self.sb:digest(), digest)
  ok, err = self.sb:replace_policy(self.pol .. "/hostroot.lua", { allow_broadening = true })
  lu.assertTrue(ok, err)
  lu.assertNotEquals(self.sb:digest(), digest, "the declaration is in the digest")
end

-- `discovered = true` hides no broadening: both policies are evaluated against this
-- host, so host-derived rules appear in both and only what the policies change differs.
function TestUpdate:test_discovered_broadenings_are_refused()
  for i, t in ipairs{
    { 'plan:read_only("/opt", { optional = true, discovered = true })',
      "adds read-only exposure /opt" },
    { 'plan:replace(ctx.home, "read_only", { optional = true, discovered = true })',
      "adds read-only exposure" },
    { 'plan:replace("/etc/shadow", "read_only", { optional = true, discovered = true })',
      "adds read-only exposure /etc/shadow" },
    { 'plan:env_set("A3S_SPEC_X", "/opt/x", { discovered = true })',
      "sets env A3S_SPEC_X" },
  } do
    local file = self.pol .. "/disc" .. i .. ".lua"
    write(file, 'local plan = a3s.extend("baseline", "disc")\n' .. t[1] .. "\nreturn plan\n")
    local digest = self.sb:digest()
    local ok, err = self.sb:replace_policy(file, { allow_broadening = false })
    lu.assertNil(ok, t[1] .. " was accepted as not broader")
    lu.assertStrContains(err, "broadens")
    lu.assertStrContains(err, t[2])
    lu.assertEquals(self.sb:digest(), digest, "refused update leaves the policy as it was")
  end
  -- With the explicit opt-in it is accepted, and it is in the digest.
  local digest = self.sb:digest()
  local ok, err = self.sb:replace_policy(self.pol .. "/disc1.lua", { allow_broadening = true })
  lu.assertTrue(ok, err)
  lu.assertNotEquals(self.sb:digest(), digest)
end

function TestUpdate:test_a_discovered_writable_root_is_refused()
  write(self.pol .. "/optrw.lua", [[
local plan = a3s.extend("baseline", "optrw")
plan:writable("/opt", { broaden = true, discovered = true })
return plan
]])
  local digest = self.sb:digest()
  local ok, err = self.sb:replace_policy(self.pol .. "/optrw.lua", { allow_broadening = false })
  lu.assertNil(ok)
  lu.assertStrContains(err, "discovered")
  lu.assertEquals(self.sb:digest(), digest)
  local r = assert(self.sb:exec("touch /opt/a3s-update-spec 2>/dev/null && echo wrote || echo ro"))
  lu.assertEquals(r.stdout, "ro\n", "/opt is not writable")
end

function TestUpdate:test_each_direction_needs_its_own_opt_in()
  local ok, err = self.sb:replace_policy(self.pol .. "/wider.lua")
  lu.assertNil(ok)
  lu.assertStrContains(err, "env keep 'AWS_SECRET_ACCESS_KEY'")
  ok, err = self.sb:replace_policy(self.pol .. "/wider.lua", { allow_broadening = true })
  lu.assertTrue(ok, err)
  -- tight drops the extra keep, lowers the limits and adds a protection: narrower.
  ok, err = self.sb:replace_policy(self.pol .. "/tight.lua")
  lu.assertTrue(ok, err)
  -- back to baseline raises the limits again: refused until opted in once more.
  ok, err = self.sb:replace_policy("baseline")
  lu.assertNil(ok)
  lu.assertStrContains(err, "broadens the sandbox")
  ok, err = self.sb:replace_policy("baseline", { allow_broadening = true })
  lu.assertTrue(ok, err)
end

function TestUpdate:test_a_broken_new_policy_is_an_error_and_keeps_the_old_one()
  write(self.pol .. "/broken.lua", "return 42\n")
  local digest = self.sb:digest()
  local ok, err = self.sb:replace_policy(self.pol .. "/broken.lua", { allow_broadening = true })
  lu.assertNil(ok)
  lu.assertStrContains(err, "broken.lua")
  lu.assertEquals(self.sb:digest(), digest)
end

function TestUpdate:test_misuse_raises()
  lu.assertErrorMsgContains("unknown option", function()
    self.sb:replace_policy("baseline", { allow = true })
  end)
  lu.assertError(function() self.sb:replace_policy(true) end)
end

H.run()
