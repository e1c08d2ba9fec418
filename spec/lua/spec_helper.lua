-- Shared prelude of the luaunit specs: luaunit (with a fallback to the system Lua
-- directories: CMake may pass LUA_PATH without its ";;"), the module, shell helpers,
-- temporary directories removed at the end, and the run/exit.
local M = {}

local found, lu = pcall(require, "luaunit")
if not found then
  package.path = package.path .. ";/usr/share/lua/5.4/?.lua;/usr/local/share/lua/5.4/?.lua"
  lu = require "luaunit"
end
M.lu = lu
M.sandbox = require "a3s_sandbox"

-- Output of a shell command, trailing newlines removed.
function M.sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read "a"
  p:close()
  return (out:gsub("\n+$", ""))
end

local dirs = {}
-- A fresh temporary directory, removed by M.run().
function M.tmpdir(tag)
  local d = M.sh("mktemp -d \"${TMPDIR:-/tmp}/a3s-lua-" .. (tag or "spec") .. "-XXXXXX\"")
  dirs[#dirs + 1] = d
  return d
end

function M.write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- Whether the sandbox boundary works on this host (probed once), and why not.
local have, why_not
function M.have_sandbox()
  if have == nil then
    local ws = M.tmpdir("probe")
    local sb, err = M.sandbox.new { workspace = ws }
    local ok, perr
    if sb then ok, perr = sb:probe() end
    if sb then sb:close() end
    have, why_not = ok == true, tostring(err or perr)
    -- The variant run without the boundary (A3S_SPEC_NO_BOUNDARY=1, bwrap pointed at a
    -- path that does not exist) proves that policy-only specs need none: it must
    -- really have none.
    if have and os.getenv "A3S_SPEC_NO_BOUNDARY" == "1" then
      error("A3S_SPEC_NO_BOUNDARY=1, but the sandbox boundary works here", 0)
    end
  end
  return have, why_not
end

-- The variant without the boundary checks at once that it really has none.
if os.getenv "A3S_SPEC_NO_BOUNDARY" == "1" then M.have_sandbox() end

local function must_work()
  return os.getenv "A3S_MUST_WORK" == "1" and os.getenv "A3S_SPEC_NO_BOUNDARY" ~= "1"
end

-- Skip (exit 77) when the sandbox boundary cannot work on this host, and fail instead
-- under A3S_MUST_WORK=1 (CI). `cleanup` (optional) runs before exiting. For specs whose
-- every test runs commands.
function M.require_sandbox(cleanup)
  local ok, why = M.have_sandbox()
  if ok then return end
  print("SKIP: the sandbox boundary is unavailable here: " .. why)
  if cleanup then cleanup() end
  for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  if must_work() then
    print "A3S_MUST_WORK=1: failing instead"
    os.exit(1)
  end
  os.exit(77)
end

-- In a test that runs commands: skip it when the boundary cannot work here (fail
-- instead under A3S_MUST_WORK=1). The policy-only tests of the spec still run.
function M.need_sandbox()
  local ok, why = M.have_sandbox()
  if ok then return end
  if must_work() then
    M.lu.fail("A3S_MUST_WORK=1, but the sandbox boundary is unavailable here: " .. why)
  end
  M.lu.skip("the sandbox boundary is unavailable here: " .. why)
end

-- Run the tests, remove the temporary directories, exit with luaunit's status.
function M.run()
  local rc = lu.LuaUnit.run()
  for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  os.exit(rc)
end

return M
