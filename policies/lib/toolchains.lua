-- lib/toolchains.lua: toolchain roots to re-expose read-only under the hidden home, so
-- offline toolchains keep working (baseline.lua). A query of the host only: it returns
-- canonical existing directories (reached through no link a command could plant) and
-- changes no plan.

local path = require "lib.path"

local M = {}

-- Toolchain location variables, plus PYENV_ROOT (pyenv's shims run
-- its libexec and versions).
M.env_vars = {
  "CARGO_HOME", "RUSTUP_HOME", "GOPATH", "GOROOT", "GOMODCACHE", "NVM_DIR", "FNM_DIR",
  "VOLTA_HOME", "BUN_INSTALL", "DENO_DIR", "PNPM_HOME", "JAVA_HOME", "GRADLE_USER_HOME",
  "MAVEN_HOME", "SDKROOT", "DEVELOPER_DIR", "PYENV_ROOT",
}

-- Default locations, used when they exist.
M.home_defaults = { ".pyenv", ".cargo", ".rustup", ".nvm", "go" }
M.system_defaults = { "/usr/local/go" }

-- A PATH entry inside a directory with one of these names re-exposes that directory:
-- ".../.pyenv/shims" -> ".../.pyenv", ".../.nvm/versions/node/v20/bin" -> ".../.nvm".
M.path_markers = {
  ".pyenv", ".rbenv", ".nodenv", ".goenv", ".cargo", ".rustup", ".nvm", ".volta", ".bun",
  ".deno",
}
-- ... and its sibling: rustup's proxies in .cargo/bin need .rustup.
M.siblings = { [".cargo"] = ".rustup" }

-- The directory made of dir's components up to the first one named marker, or nil.
local function marker_root(dir, marker)
  local prefix = ""
  for comp in dir:gmatch("[^/]+") do
    prefix = prefix .. "/" .. comp
    if comp == marker then
      return prefix
    end
  end
  return nil
end

-- Toolchain roots for this host: canonical, existing directories, deduplicated, in the
-- order env vars, home defaults, system defaults, PATH-derived.
function M.roots(ctx)
  local host = a3s.host
  local out, seen = {}, {}
  local function add(p)
    if type(p) ~= "string" or p:sub(1, 1) ~= "/" then
      return
    end
    -- Not realpath: a link a command could have planted (in a workspace, say) must not
    -- choose what is bound; exposable follows links only where the caller cannot write.
    local real = host.exposable(p)
    if real and not seen[real] then
      seen[real] = true
      out[#out + 1] = real
    end
  end

  for _, var in ipairs(M.env_vars) do
    local v = ctx.env[var]
    if type(v) == "string" and v ~= "" then
      if var == "GOPATH" then -- a list, like PATH
        for entry in v:gmatch("[^:]+") do
          add(entry)
        end
      else
        add(v)
      end
    end
  end
  for _, rel in ipairs(M.home_defaults) do
    add(path.join(ctx.home, rel))
  end
  for _, p in ipairs(M.system_defaults) do
    add(p)
  end
  for _, dir in ipairs(ctx.path_dirs) do
    for _, marker in ipairs(M.path_markers) do
      local root = marker_root(dir, marker)
      if root then
        add(root)
        local sibling = M.siblings[marker]
        if sibling then
          add(path.join(path.dirname(root), sibling))
        end
      end
    end
    add(dir:match("^(.*/go)/bin$")) -- GOROOT or GOPATH: ".../go/bin" -> ".../go"
  end
  return out
end

return M
