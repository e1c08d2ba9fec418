-- lib/path.lua: pure helpers for absolute paths (no host access, no plan changes).
--
-- Plan rules need *clean* absolute paths: no '.', '..', '//' and no trailing '/'.

local M = {}

-- base .. "/" .. rel for a clean absolute base and a clean relative rel.
function M.join(base, rel)
  if base == "/" then
    return "/" .. rel
  end
  return base .. "/" .. rel
end

-- Lexically clean an absolute path: drop empty and "." components and the trailing '/'.
-- nil for a relative path or one with ".." (only the host can resolve those: use
-- a3s.host.realpath).
function M.clean(p)
  if type(p) ~= "string" or p:sub(1, 1) ~= "/" then
    return nil
  end
  local parts = {}
  for comp in p:gmatch("[^/]+") do
    if comp == ".." then
      return nil
    end
    if comp ~= "." then
      parts[#parts + 1] = comp
    end
  end
  return "/" .. table.concat(parts, "/")
end

-- true when p equals root or lies below it (both clean).
function M.within(p, root)
  if root == "/" then
    return true
  end
  return p == root or p:sub(1, #root + 1) == root .. "/"
end

-- The parent of a clean absolute path ("/" for "/" and for top-level entries).
function M.dirname(p)
  local parent = p:match("^(.*)/[^/]*$")
  if parent == nil or parent == "" then
    return "/"
  end
  return parent
end

return M
