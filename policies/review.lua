--[[ review.lua — read-only review: look at the workspace, change nothing in it.

The baseline, with the workspace read-only instead of writable: a reviewer (or an
agent asked to review) can read, search, diff and run read-only tools, while writes
into the workspace fail (EROFS). The scratch dir (HOME and TMPDIR inside) and /tmp stay
writable, so tools that need a cache or temp files still work.

The baseline declares `writable(ctx.workspace)` and its `.a3s/loops` carve-out; a plan
allows one kind of rule per path, so those rules are replaced, not overridden: each
replaced rule is attributed to this file in `a3s-sandbox plan`.

    a3s-sandbox --policy review -c 'git diff --stat; rg -n TODO'
]]

local path = require "lib.path"

local plan = a3s.extend("baseline", "review")

-- The workspace itself: read-only.
plan:replace(ctx.workspace, "read_only")
-- The goal-loop directory the baseline keeps writable (when it exists): read-only too.
plan:replace(path.join(ctx.workspace, ".a3s/loops"), "read_only", { optional = true })

return plan
