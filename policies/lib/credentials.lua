-- lib/credentials.lua: where credentials live. Data and pure lookups
-- only: baseline.lua declares the rules, so every rule's provenance names that file.

local path = require "lib.path"

local M = {}

-- Home-relative credential files and directories (the original's 33 entries, then three).
M.home_relative = {
  ".ssh",
  ".gnupg",
  ".aws",
  ".azure",
  ".kube",
  ".docker",
  ".config/gcloud",
  ".config/gh",
  ".netrc",
  ".npmrc",
  ".pypirc",
  ".cargo/credentials",
  ".cargo/credentials.toml",
  ".codex/auth.json",
  ".claude/.credentials.json",
  ".claude.json",
  ".git-credentials",
  ".config/git/credentials",
  ".workbuddy",
  ".workbuddy-ai",
  "credentials/kimi-code.json",
  ".kimi-code/credentials/kimi-code.json",
  ".kimi/credentials/kimi-code.json",
  ".config/kimi-desktop/daimon-share",
  "Library/Application Support/kimi-desktop/daimon-share",
  ".config/opencode/auth.json",
  ".local/share/opencode/auth.json",
  ".gemini/oauth_creds.json",
  ".terraform.d/credentials.tfrc.json",
  ".local/share/keyrings",
  ".password-store",
  ".a3s/os-auth.json",
  "Library/Keychains",
  -- Beyond the original's list: Gradle's and Maven's credential stores.
  ".gradle/gradle.properties",
  ".m2/settings.xml",
  ".m2/settings-security.xml",
}

-- Files below a directory named by an environment variable.
M.env_files = {
  { var = "CODEX_HOME", file = "auth.json" },
  { var = "CLAUDE_CONFIG_DIR", file = ".credentials.json" },
  { var = "CARGO_HOME", file = "credentials" },
  { var = "CARGO_HOME", file = "credentials.toml" },
  { var = "A3S_KIMI_HOME", file = "credentials/kimi-code.json" },
  { var = "KIMI_CODE_HOME", file = "credentials/kimi-code.json" },
  { var = "KIMI_SHARE_DIR", file = "credentials/kimi-code.json" },
  -- Gradle's credential store, in a home that baseline may re-expose as a toolchain root.
  { var = "GRADLE_USER_HOME", file = "gradle.properties" },
  -- The home-relative ones below .config and .local/share, where XDG says they are.
  { var = "XDG_CONFIG_HOME", file = "gh" },
  { var = "XDG_CONFIG_HOME", file = "gcloud" },
  { var = "XDG_CONFIG_HOME", file = "git/credentials" },
  { var = "XDG_CONFIG_HOME", file = "opencode/auth.json" },
  { var = "XDG_CONFIG_HOME", file = "kimi-desktop/daimon-share" },
  { var = "XDG_DATA_HOME", file = "opencode/auth.json" },
  { var = "XDG_DATA_HOME", file = "keyrings" },
}

-- Variables whose relative values tools ignore (the XDG base directories).
M.relative_ignored = { XDG_CONFIG_HOME = true, XDG_DATA_HOME = true }

-- Credential files named by an environment variable themselves (KUBECONFIG: a list of
-- them, separated by ':').
M.env_named_files = {
  "AWS_SHARED_CREDENTIALS_FILE",
  "AWS_CONFIG_FILE",
  "GOOGLE_APPLICATION_CREDENTIALS",
  "NPM_CONFIG_USERCONFIG",
  "npm_config_userconfig", -- npm reads its configuration variables in either case
  "REGISTRY_AUTH_FILE",
  "SOPS_AGE_KEY_FILE",
  "NETRC",
  "PGPASSFILE",
  "AWS_WEB_IDENTITY_TOKEN_FILE",
  "KUBECONFIG",
}

-- Whole directories named by an environment variable.
M.env_dirs = {
  "A3S_KIMI_DESKTOP_HOME",
  "KIMI_DESKTOP_HOME",
  "WORKBUDDY_CONFIG_DIR",
  "CODEBUDDY_CONFIG_DIR",
  "DOCKER_CONFIG",
  "GNUPGHOME",
  "GH_CONFIG_DIR",
  "AZURE_CONFIG_DIR",
  "CLOUDSDK_CONFIG",
  "PASSWORD_STORE_DIR",
}

-- Workspace-relative secret files. The original's `.env`, `.env.local`,
-- `.env.development`, `.env.production` and `.env.test` are not listed: the ".env"
-- secret prefix already masks every `.env*` entry of the workspace (found by the scan).
M.workspace_relative = {
  ".netrc",
  ".npmrc",
  ".pypirc",
  ".git-credentials",
  ".a3s/os-auth.json",
  ".codex/auth.json",
  ".claude/.credentials.json",
  ".claude.json",
}

-- The path an environment value names, as a clean absolute path: nil for an unset
-- or empty value; ".." is resolved on the host, and where it cannot be (nothing there, or
-- a resolution the host cannot finish) the value comes back as it is spelled, for the
-- caller to check where it leads. A relative value is an error: tools resolve it against
-- their own working directory (the workspace, inside the sandbox), so no one path can
-- be masked for it.
local function env_dir(env, var, value)
  local v = value or env[var]
  if type(v) ~= "string" or v == "" then
    return nil
  end
  if v:sub(1, 1) ~= "/" then
    if M.relative_ignored[var] then
      return nil -- XDG: "a relative path ... should be considered invalid and ignored"
    end
    error(("the credential variable %s is a relative path (%s): tools resolve it against"
      .. " their working directory, so it cannot be masked: set it to an absolute path"
      .. " or unset it"):format(var, v), 0)
  end
  return path.clean(v) or a3s.host.realpath(v) or v
end

-- The env-configured credential paths for this host environment (a list of clean
-- absolute paths, in the order of the tables above), and beside it each one as the
-- environment spells it (a ".." not resolved): where a spelling leads through the
-- workspace, a command there could change where the path resolves (baseline.lua).
function M.env_configured(env)
  local out, spelled = {}, {}
  for _, e in ipairs(M.env_files) do
    local dir = env_dir(env, e.var)
    if dir then
      out[#out + 1] = path.join(dir, e.file)
      spelled[#out] = env[e.var] .. "/" .. e.file
    end
  end
  for _, var in ipairs(M.env_dirs) do
    local dir = env_dir(env, var)
    if dir then
      out[#out + 1] = dir
      spelled[#out] = env[var]
    end
  end
  for _, var in ipairs(M.env_named_files) do
    local v = env[var]
    for entry in (type(v) == "string" and v or ""):gmatch(var == "KUBECONFIG" and "[^:]+" or ".+") do
      local file = env_dir(env, var, entry)
      if file then
        out[#out + 1] = file
        spelled[#out] = entry
      end
    end
  end
  return out, spelled
end

return M
