-- Policy digest vectors (policies/README.md, the digest): pinned for the shipped policies, identical
-- across workspaces, users' homes, PATHs and hosts (the digest comes from an evaluation
-- against a neutral host), and different for any rule change.
--
-- When a shipped policy changes on purpose, its vector here changes with it: update it
-- in the same commit (the point of the vector is that nothing changes it by accident).
local H = require "spec_helper"
local lu, sandbox, sh = H.lu, H.sandbox, H.sh
local function tmpdir() return H.tmpdir("digest") end

local VECTORS = {
  baseline = "658714c41b596ab93412448859e41f2563a139f52a5a105128b0de545ea188fd",
}

local function digest(policy, ws)
  local sb = assert(sandbox.new{ workspace = ws or tmpdir(), policy = policy })
  local d = assert(sb:digest())
  sb:close()
  return d
end
-- The digest as another process with another HOME and PATH computes it.
local function digest_elsewhere(env, ws)
  local code = [[local s = require "a3s_sandbox"
    local sb = assert(s.new{ workspace = os.getenv("WS") }); io.write(assert(sb:digest()))]]
  return sh(string.format("cd / && env WS=%q %s LUA_CPATH=%q lua5.4 -e %q 2>&1", ws, env,
    package.cpath, code))
end

TestDigest = {}

function TestDigest:test_pinned_vector_of_baseline()
  lu.assertEquals(digest("baseline"), VECTORS.baseline)
end

function TestDigest:test_shape()
  lu.assertStrMatches(digest("baseline"), ("%x"):rep(64))
  lu.assertEquals(digest("baseline"):lower(), digest("baseline"))
end

function TestDigest:test_same_across_workspaces_homes_and_paths()
  local a = digest("baseline", tmpdir())
  local ws = tmpdir()
  local home = tmpdir()
  sh("mkdir -p " .. home .. "/.ssh " .. home .. "/.cargo/bin " .. home .. "/.pyenv/shims")
  local b = digest_elsewhere("HOME=" .. home .. " PATH=" .. home .. "/.cargo/bin:/usr/bin:/bin "
    .. "CARGO_HOME=" .. home .. "/.cargo CODEX_HOME=" .. home, ws)
  local c = digest_elsewhere("HOME=/ PATH=/usr/bin TMPDIR=" .. tmpdir(), tmpdir())
  lu.assertEquals(b, a)
  lu.assertEquals(c, a)
end

function TestDigest:test_same_with_workspace_contents()
  local ws = tmpdir()
  local before = digest("baseline", ws)
  sh("cd " .. ws .. " && mkdir -p .git src && echo x > .env && echo y > src/.env.local && ln src/.env.local hard")
  lu.assertEquals(digest("baseline", ws), before, "scan discoveries are not in the digest")
end

function TestDigest:test_any_rule_change_changes_it()
  local pol = tmpdir()
  local changes = {
    'plan:limits{ timeout_ms = 119999 }',
    'plan:limits{ output_bytes = 102401 }',
    'plan:mask("/etc/hosts", { optional = true })',
    'plan:hide("/srv", { optional = true })',
    'plan:read_only("/opt", { optional = true })',
    'plan:env_keep{ "EDITOR" }',
    'plan:env_strip{ "EDITOR" }',
    'plan:env_set("A3S_X", "1")',
    'plan:seccomp_deny({ "ptrace" }, "EPERM")',
    'plan:protect_names{ dirs = { "ci" } }',
    'plan:secret_prefix(".secret")',
    'plan:scan_skip{ "vendor" }',
    'plan:writable(ctx.workspace .. "/out", { optional = true })',
  }
  local seen = { [digest("baseline")] = "baseline" }
  for i, change in ipairs(changes) do
    local f = assert(io.open(pol .. "/c" .. i .. ".lua", "w"))
    f:write('local plan = a3s.extend("baseline", "baseline")\n', change, "\nreturn plan\n")
    f:close()
    local d = digest(pol .. "/c" .. i .. ".lua")
    lu.assertNil(seen[d], change .. " gave the same digest as " .. tostring(seen[d]))
    seen[d] = change
  end
end

-- `discovered = true` labels host-derived rules; it excludes nothing from the digest. On
-- the neutral host every host query answers "absent", so whatever a policy still declares
-- there is a declaration, and a widening one must change the digest.
local function policy_file(dir, name, lines)
  local f = assert(io.open(dir .. "/" .. name .. ".lua", "w"))
  f:write('local plan = a3s.extend("baseline", "baseline")\n', lines, "\nreturn plan\n")
  f:close()
  return dir .. "/" .. name .. ".lua"
end

function TestDigest:test_discovered_declarations_are_in_it()
  local pol = tmpdir()
  local base = digest("baseline")
  local seen = { [base] = "baseline" }
  for i, change in ipairs{
    'plan:read_only("/opt", { optional = true, discovered = true })',
    'plan:replace(ctx.home, "read_only", { optional = true, discovered = true })',
    'plan:replace("/etc/shadow", "read_only", { optional = true, discovered = true })',
    'plan:env_set("A3S_SPEC_X", "/opt/x", { discovered = true })',
    'plan:hide("/srv", { optional = true, discovered = true })',
  } do
    local d = digest(policy_file(pol, "d" .. i, change))
    lu.assertNil(seen[d], change .. " gave the same digest as " .. tostring(seen[d]))
    seen[d] = change
  end
  -- The label itself changes no enforcement, so it does not change the digest either.
  lu.assertEquals(digest(policy_file(pol, "plain", 'plan:read_only("/opt", { optional = true })')),
    digest(policy_file(pol, "label", 'plan:read_only("/opt", { optional = true, discovered = true })')))
end

function TestDigest:test_a_discovered_writable_root_is_refused()
  local pol = tmpdir()
  for i, change in ipairs{
    'plan:writable("/opt", { broaden = true, discovered = true })',
    'plan:writable(ctx.workspace .. "/out", { optional = true, discovered = true })',
    'plan:replace(ctx.home, "writable", { broaden = true, discovered = true })',
  } do
    local sb, err = sandbox.new{ workspace = tmpdir(), policy = policy_file(pol, "w" .. i, change) }
    lu.assertNil(sb, change .. " was accepted")
    lu.assertStrContains(err, "discovered")
    lu.assertStrContains(err, "writable")
  end
end

function TestDigest:test_provenance_is_not_part_of_it()
  local pol = tmpdir()
  local f = assert(io.open(pol .. "/moved.lua", "w"))
  f:write('\n\n\nlocal plan = a3s.extend("baseline", "baseline")\n\n\nreturn plan\n')
  f:close()
  lu.assertEquals(digest(pol .. "/moved.lua"), digest("baseline"))
end

function TestDigest:test_cli_agrees()
  local ws = tmpdir()
  local cli = os.getenv("A3S_CLI")
  if not cli then return end
  lu.assertEquals(sh(cli .. " digest -w " .. ws), digest("baseline", ws))
end

H.run()
