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

-- Run the tests, remove the temporary directories, exit with luaunit's status.
function M.run()
  local rc = lu.LuaUnit.run()
  for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  os.exit(rc)
end

return M
