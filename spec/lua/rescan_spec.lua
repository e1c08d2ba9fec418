-- One sandbox object, many runs: every run scans the workspace afresh, so secrets stay
-- masked and protected directories stay read-only on the second run as on the first,
-- also after a probe (the README's own usage). A scan that read the top level through a
-- shared file offset saw an empty workspace from the second scan on.
local H = require "spec_helper"
local lu, sandbox = H.lu, H.sandbox
H.require_sandbox()

TestRescan = {}

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

function TestRescan:test_every_run_masks_and_protects()
  local ws = H.tmpdir("rescan")
  os.execute("mkdir -p '" .. ws .. "/sub' '" .. ws .. "/.git/hooks' '" .. ws .. "/.vscode'")
  write(ws .. "/.env", "API_KEY=rescan-secret-1\n")
  write(ws .. "/sub/.env.local", "rescan-secret-2\n")
  local sb = assert(sandbox.new{ workspace = ws })
  assert(sb:probe())
  for i = 1, 3 do
    local r = assert(sb:exec("cat .env sub/.env.local 2>&1; " ..
      "echo hook > .git/hooks/pre-commit 2>/dev/null && echo wrote-hook; " ..
      "echo '{}' > .vscode/tasks.json 2>/dev/null && echo wrote-vscode; true"))
    lu.assertNotStrContains(r.stdout, "rescan-secret", false, "run " .. i .. ": " .. r.stdout)
    lu.assertNotStrContains(r.stdout, "wrote-", false, "run " .. i .. ": " .. r.stdout)
  end
  sb:close()
  lu.assertNil(io.open(ws .. "/.git/hooks/pre-commit"), "a hook reached the host")
  lu.assertNil(io.open(ws .. "/.vscode/tasks.json"), "a task file reached the host")
end

H.run()
