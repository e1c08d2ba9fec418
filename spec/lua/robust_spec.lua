-- The module reads its arguments as data: no metamethod of the caller's runs while a
-- command is prepared (one could close the sandbox under the call, or free a string the
-- library still points at), and no length can overflow an allocation.
local H = require "spec_helper"
local lu, sandbox = H.lu, H.sandbox
H.require_sandbox()

TestRobust = {}

function TestRobust:setUp()
  self.sb = assert(sandbox.new{ workspace = H.tmpdir("robust") })
end

function TestRobust:tearDown()
  self.sb:close()
end

function TestRobust:test_options_metamethods_never_run()
  local sb, ran = self.sb, false
  local opts = setmetatable({}, { __index = function() ran = true; sb:close() end })
  local r = assert(sb:exec("printf ok", opts))
  lu.assertEquals(r.stdout, "ok")
  lu.assertFalse(ran, "an __index metamethod of the options ran")
  lu.assertEquals(assert(sb:exec("printf still")).stdout, "still")
end

function TestRobust:test_argv_length_is_raw_and_bounded()
  local huge = setmetatable({}, { __len = function() return 1 << 61 end })
  local ok, err = pcall(self.sb.exec, self.sb, huge)
  lu.assertFalse(ok)
  lu.assertStrContains(err, "must not be empty")
  local viaindex = setmetatable({}, { __index = function(_, i) return i == 1 and "true" or nil end })
  ok, err = pcall(self.sb.exec, self.sb, viaindex)
  lu.assertFalse(ok)
  lu.assertStrContains(err, "must not be empty")
  local long = {}
  for i = 1, 65537 do long[i] = "x" end
  ok, err = pcall(self.sb.exec, self.sb, long)
  lu.assertFalse(ok)
  lu.assertStrContains(err, "more than 65536")
end

function TestRobust:test_strings_outlive_a_callback_that_drops_them()
  -- on_output empties the options and the argv and collects garbage while the run goes
  -- on: what the library holds stays the caller's text.
  local argv = { "sh", "-c", "printf 'x\\n'; sleep 0.2; cat", "arg-one" }
  local opts
  opts = { stdin = string.rep("s", 10) .. "-stdin-text", on_output = function()
    for k in pairs(opts) do if k ~= "on_output" then opts[k] = nil end end
    for i = #argv, 1, -1 do argv[i] = nil end
    collectgarbage(); collectgarbage()
  end }
  local r = assert(self.sb:exec(argv, opts))
  lu.assertEquals(r.stdout, "x\nssssssssss-stdin-text")
end

H.run()
