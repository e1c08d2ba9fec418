--[[ offline-build.lua — builds that use the host's package caches, without network.

The baseline, plus:
  - the host's package caches, re-exposed read-only where they exist, so offline
    builds find what earlier (networked) builds downloaded; they cannot be poisoned
    or filled from inside (read-only);
  - Go and Gradle pointed at their caches (both read read-only caches), Go told not
    to download modules or toolchains;
  - a 10 minute deadline ceiling instead of 2 minutes.
The network stays "none" (the baseline's): nothing here grants any.

    a3s-sandbox --policy offline-build -- go build ./...
]]

local path = require "lib.path"

local plan = a3s.extend("baseline", "offline-build")

-- Package caches below the home (hidden by the baseline). Only the caches, not the
-- tools' config dirs: ~/.m2/settings.xml and ~/.gradle/gradle.properties hold
-- repository credentials. (~/.cargo and ~/go may already be re-exposed whole as
-- toolchain roots by the baseline; the caches are declared here all the same, so this
-- policy does not depend on what the toolchain discovery found.)
local caches = {
  ".cache/pip",       -- pip's wheel and HTTP cache
  ".npm",             -- npm's content-addressed cache
  ".m2/repository",   -- Maven's local repository
  ".gradle/caches",   -- Gradle's dependency cache (GRADLE_RO_DEP_CACHE below)
  ".cargo/registry",  -- downloaded crates (CARGO_HOME is ~/.cargo in the baseline)
  "go/pkg/mod",       -- Go modules (GOMODCACHE below)
}

-- Declared only on hosts that have them, on their canonical path (the backend refuses
-- rules on symlinks): host facts, labelled `discovered` (the neutral host of the digest
-- has no such caches, so they are not in it; replace_policy counts them). Skipped
-- like the baseline's re-exposures: paths already declared, and caches inside the
-- workspace or the scratch dir (visible and writable there already).
local exposed = {}
for _, rel in ipairs(caches) do
  local dir = a3s.host.exposable(path.join(ctx.home, rel))
  if dir and dir ~= "/" and not plan:rule_kind(dir)
      and not path.within(dir, ctx.workspace) and not path.within(dir, ctx.scratch)
      and not path.within(ctx.workspace, dir) then
    plan:read_only(dir, { optional = true, discovered = true })
    exposed[rel] = dir
  end
end

-- HOME is the scratch dir inside, so tools must be told where their cache is. Go reads
-- a read-only module cache fine; Gradle has a read-only dependency cache mode.
if exposed["go/pkg/mod"] and (ctx.env.GOMODCACHE or "") == "" then
  plan:env_set("GOMODCACHE", exposed["go/pkg/mod"], { discovered = true })
end
if exposed[".gradle/caches"] then
  plan:env_set("GRADLE_RO_DEP_CACHE", exposed[".gradle/caches"], { discovered = true })
end
-- No module or toolchain downloads: fail at once instead of waiting on the network.
plan:env_set("GOPROXY", "off")
plan:env_set("GOTOOLCHAIN", "local")

-- Builds take longer than the baseline's 120 s.
plan:limits{ timeout_ms = 600000 }

return plan
