-- The README's embedding example, extracted from README.md and run as written: a tool
-- with its own derived policy, streaming output live.
local lu = require("spec_helper").lu

local src = os.getenv("A3S_SOURCE_DIR") or "."
local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read "a"
  local ok, _, code = p:close()
  return out, ok and 0 or code
end
local function block(readme, name)
  local code = readme:match("<!%-%- example:" .. name:gsub("%p", "%%%0") .. " %-%->\n```lua\n(.-)\n```")
  return assert(code, "README has no example block " .. name)
end

TestReadmeExample = {}

function TestReadmeExample:setUp()
  local f = assert(io.open(src .. "/README.md"))
  local readme = f:read "a"
  f:close()
  self.dir = (sh "mktemp -d \"${TMPDIR:-/tmp}/a3s-readme-XXXXXX\""):gsub("\n$", "")
  self.ws = self.dir .. "/ws"
  os.execute("mkdir -p " .. self.ws)
  for _, name in ipairs{ "tool-policy.lua", "tool.lua" } do
    local out = assert(io.open(self.dir .. "/" .. name, "w"))
    out:write(block(readme, name), "\n")
    out:close()
  end
end

function TestReadmeExample:tearDown()
  os.execute("rm -rf '" .. self.dir .. "'")
end

function TestReadmeExample:run(cmd)
  return sh(string.format("LUA_CPATH=%q lua5.4 %s/tool.lua %s %q 2>&1", package.cpath,
    self.dir, self.ws, cmd))
end

function TestReadmeExample:test_streams_output_and_reports_exit()
  local out, code = self:run("echo streamed; echo to-stderr >&2; exit 3")
  lu.assertStrContains(out, "streamed")
  lu.assertStrContains(out, "to-stderr")
  lu.assertStrContains(out, "[exit 3,")
  lu.assertEquals(code, 3)
end

function TestReadmeExample:test_its_policy_applies()
  local out = self:run("mkdir ci && echo made")
  lu.assertNotStrContains(out, "made")
  local out2, code = self:run("exit 7")
  lu.assertStrContains(out2, "[exit 7,")
  lu.assertEquals(code, 7)
end

os.exit(lu.LuaUnit.run())
