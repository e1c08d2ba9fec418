--[[ strict-ci.lua — short CI steps with little output and a pinned pipeline definition.

The baseline, plus:
  - a 30 s deadline ceiling (a request may ask less, never more);
  - a 32 KiB output budget (one head+tail capture for stdout and stderr together);
  - the CI pipeline definition protected: a step must not rewrite what the pipeline
    runs next. `.github` (workflows, actions), `ci` (pipeline scripts) and
    `.gitlab-ci.yml` at the top of the workspace are read-only, matched
    case-insensitively; missing ones are pinned, so they cannot be created either.

    a3s-sandbox --policy strict-ci -- make check
]]

local plan = a3s.extend("baseline", "strict-ci")

-- Tighter limits than the baseline's 120 s and 100 KiB.
plan:limits{ timeout_ms = 30000, output_bytes = 32 * 1024 }

-- The pipeline definition joins the baseline's protected names (.git, .vscode, ...).
plan:protect_names{ dirs = { ".github", "ci" }, files = { ".gitlab-ci.yml" } }

return plan
