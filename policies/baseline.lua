--[[ baseline.lua — the default policy (README "What baseline enforces").

★ marks a rule that closes a gap of the policy this one was ported from.
Every rule is declared in this file, so each rule's provenance ("from" in
`a3s-sandbox plan`) is a line below; lib/ only holds lists and host lookups.

Rules that depend on host facts (PATH, toolchains, symlinks, env-configured
credentials) are labelled `discovered`. They never reach the digest, which is taken of
an evaluation against a neutral host where every host query answers "absent", so the
same policy has the same digest on every host.

A derived policy starts from this one:
    local plan = a3s.extend("baseline", "my-policy")
    plan:limits{ timeout_ms = 300000 }
    return plan
]]

local credentials = require "lib.credentials"
local envlists = require "lib.env"
local path = require "lib.path"
local toolchains = require "lib.toolchains"
local host = a3s.host

local plan = a3s.plan("baseline")

-- A path that exists but is not canonical is (or sits below) a symlink; the backend
-- refuses rules on symlinks, so such rules go to the canonical target instead.
local function symlinked(p)
  local real = host.realpath(p)
  return real ~= nil and real ~= p, real
end

-- The workspace under other names: other mounts of it, or of a directory inside it
-- (a bind mount). The host root is visible read-only, so these are hidden below, and a
-- credential found there lies in the workspace.
local workspace_aliases = host.aliases(ctx.workspace)

-- ★ A mount inside the workspace is refused: the command gets the workspace with every
-- mount below it, writable, whatever that mount shows (a home, /etc), and it could move
-- it where no later rule or hide finds it.
local inner = host.mounts_below(ctx.workspace)
if #inner > 0 then
  error(("the workspace %s holds a mount point (%s%s): the command could reach, change or"
    .. " move what it shows; unmount it or choose another workspace"):format(
    ctx.workspace, inner[1], #inner > 1 and (" and %d more"):format(#inner - 1) or ""), 0)
end
-- The other name of the workspace that p (a path as spelled) lies in or passes through.
local function workspace_alias_of(p)
  for _, a in ipairs(workspace_aliases) do
    if path.within(path.clean(p) or p, a) or host.passes_through(p, a) then
      return a
    end
  end
  return nil
end

-- A credential's mask goes to the canonical path. Where the path is not canonical (a
-- symlink, a "..") and it or its target lies in the workspace, a command there could
-- re-point a link or rename a directory on its way between runs, and the next run would
-- mask a decoy or nothing: such a run is refused. So is one that lies in the workspace,
-- or leads through it, under another name (a mount of it): its mask would cover that
-- name only, and the command would read it, or re-point it, through the workspace.
-- (spelled: the environment's own text.)
local function credential_target(p, spelled)
  local link, real = symlinked(p)
  local text = spelled or p
  local lexically_in = text == ctx.workspace or text:sub(1, #ctx.workspace + 1) == ctx.workspace .. "/"
  local alias = workspace_alias_of(real or p) or workspace_alias_of(text)
  if alias and not path.within(real or p, ctx.workspace) then
    error(("the credential path %s lies in or leads through the workspace under another"
      .. " name (%s shows the workspace, or a directory inside it, again): name it by its"
      .. " path in the workspace"):format(text, alias), 0)
  end
  if (link or path.clean(text) ~= p) and (lexically_in or path.within(real or p, ctx.workspace)
      or host.passes_through(text, ctx.workspace)) then
    error(("the credential path %s is not canonical (a symbolic link or '..' on its way, to"
      .. " %s) and leads through the workspace (or cannot be followed to its end), where a"
      .. " command could change where it resolves: name it by its canonical path"):format(
      text, real or p), 0)
  end
  return link, real
end

---------------------------------------------------------------- network
-- ★ A private network namespace with loopback only (the original kept the host's).
plan:network("none")

---------------------------------------------------------------- seccomp
-- socket(2) is denied for every family; ★ socketpair(AF_UNIX) stays allowed (it cannot
-- reach outside, and node/python need it); clone(2) with CLONE_NEW* flags and the
-- TIOCSTI/TIOCLINUX ioctls are denied by the backend from these booleans.
plan:seccomp{
  socket_families = {},
  socketpair_unix = true,
  deny_clone_ns = true,
  deny_tty_inject = true,
  socket_errno = "EAFNOSUPPORT",
}
-- clone3 passes its flags in memory, which seccomp cannot inspect: ENOSYS makes libc
-- fall back to clone(2), whose flags are checked.
plan:seccomp_deny({ "clone3" }, "ENOSYS")
-- The original's list: namespaces, hard links, io_uring (bypasses the syscall filter).
plan:seccomp_deny({ "unshare", "setns" }, "EPERM")
plan:seccomp_deny({ "link", "linkat" }, "EPERM")
plan:seccomp_deny({ "io_uring_setup", "io_uring_enter", "io_uring_register" }, "EPERM")
-- ★ Kernel keyrings, BPF, perf, userfaultfd and the mount syscalls.
plan:seccomp_deny({ "keyctl", "add_key", "request_key" }, "EPERM")
plan:seccomp_deny({ "bpf", "perf_event_open", "userfaultfd" }, "EPERM")
plan:seccomp_deny({ "mount", "umount2", "pivot_root" }, "EPERM")
-- ★ The new mount API answers ENOSYS, like a kernel without it, so tools fall back to
-- mount(2), which is denied above.
plan:seccomp_deny({ "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
                    "mount_setattr" }, "ENOSYS")
-- ptrace stays allowed: debuggers work, and the pid namespace confines them.

---------------------------------------------------------------- filesystem
-- The backend binds the host root read-only first, then applies these rules shallowest
-- path first, masks last. Plan validation allows one kind per path: hides and
-- re-exposures skip a path an earlier step already declared (plan:rule_kind); masks
-- never skip, so a mask colliding with another kind is refused loudly.

-- Writable: the canonical workspace and the per-execution scratch dir. Declared first:
-- if one of them is also a hidden root (say the workspace is $HOME), it stays writable.
plan:writable(ctx.workspace)
if not plan:rule_kind(ctx.scratch) then
  plan:writable(ctx.scratch)
end
-- The original's goal-loop carve-out: `.a3s/loops` stays writable below the protected
-- `.a3s` when it exists (the sandbox never creates it: optional).
plan:writable(path.join(ctx.workspace, ".a3s/loops"), { optional = true })

-- A private writable /tmp.
if not plan:rule_kind("/tmp") then
  plan:tmpfs("/tmp")
end

-- ★ Hidden (present but empty): the caller's home, other homes, the host temp dirs (the
-- configured one when it is not /tmp, already a private tmpfs, and /var/tmp, where other
-- users' files are world-readable too) and /run. Never "/" (a home of "/" would hide the
-- whole host).
for _, p in ipairs({ ctx.home, "/root", "/home", ctx.tmp, "/var/tmp", "/run" }) do
  local link, real = symlinked(p)
  if link then
    if real ~= "/" and not plan:rule_kind(real) then
      plan:hide(real, { optional = true, discovered = true })
    end
  elseif p ~= "/" and not plan:rule_kind(p) then
    plan:hide(p, { optional = true })
  end
end
-- /var/run is a symlink to /run on most hosts (hidden above); hide it only where it is
-- a real directory.
if host.realpath("/var/run") == "/var/run" and not plan:rule_kind("/var/run") then
  plan:hide("/var/run", { optional = true, discovered = true })
end

-- ★ The same files under another name: another mount of the workspace, of a hidden
-- directory, or of a directory inside one (a bind mount of /home at /data/home, of the
-- workspace at /mnt/ws) shows them again through the read-only host root, secrets and
-- all. Those names are hidden too (a file mounted alone is masked); except, for the
-- hidden directories, a PATH directory or toolchain root that is such a name of a part of
-- one: re-exposed below, as it would be under its first name (never one that shows a
-- hidden directory whole).
local toolchain_roots = toolchains.roots(ctx)
local reexposed = {}
for _, list in ipairs({ ctx.path_dirs, toolchain_roots }) do
  for _, dir in ipairs(list) do
    reexposed[dir] = true
  end
end
-- Whether a shows root itself (the whole of it, under another name).
local function shows_whole(a, root)
  for _, x in ipairs(host.aliases(a)) do
    if x == root then
      return true
    end
  end
  return false
end
local function hide_aliases(aliases, keep, root)
  for _, a in ipairs(aliases) do
    if a ~= "/" and not plan:rule_kind(a) and
        not (keep and keep[a] and not shows_whole(a, root)) then
      if host.is_dir(a) then
        plan:hide(a, { optional = true, discovered = true })
      else
        plan:mask(a, { optional = true, discovered = true })
      end
    end
  end
end
hide_aliases(workspace_aliases)
local home_has_aliases = false
for _, p in ipairs({ ctx.home, "/root", "/home", ctx.tmp, "/tmp", "/var/tmp", "/run" }) do
  local real = host.realpath(p)
  if real and real ~= "/" then
    local aliases = host.aliases(real)
    hide_aliases(aliases, reexposed, real)
    if p == ctx.home and #aliases > 0 then
      home_has_aliases = true
    end
  end
end
-- A credential's mask, unless the path is hidden already (another name of a hidden
-- directory, say), with its own other names hidden.
local function mask_credential(p)
  local kind = plan:rule_kind(p)
  if kind ~= "hide" and kind ~= "mask" then
    plan:mask(p, { optional = true, discovered = true })
  end
  hide_aliases(host.aliases(p))
end

-- ★ System secrets: unreadable and unwritable wherever they are visible.
for _, p in ipairs({ "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d",
                     "/etc/ssl/private", "/run/secrets" }) do
  local link, real = symlinked(p)
  if link then
    plan:mask(real, { optional = true, discovered = true })
  else
    plan:mask(p, { optional = true })
  end
end
-- Their siblings on this host: /etc/sudoers.dpkg-old, /etc/shadow- (backup), ...
for _, prefix in ipairs({ "sudoers", "shadow", "gshadow" }) do
  for _, p in ipairs(host.glob_prefix("/etc", prefix)) do
    if not symlinked(p) and plan:rule_kind(p) ~= "mask" then
      plan:mask(p, { optional = true, discovered = true })
    end
  end
end

-- Credentials below the home (the original's 33 entries and three more): hidden with the
-- home already, and masked again in case a derived policy re-exposes part of the home.
-- Missing ones are skipped by the backend; canonical forms of symlinked ones are
-- masked too.
for _, rel in ipairs(credentials.home_relative) do
  local p = path.join(ctx.home, rel)
  plan:mask(p, { optional = true })
  local link, real = credential_target(p)
  if link then
    mask_credential(real)
  end
  -- Under the home's other names too: a PATH directory or toolchain root re-exposed
  -- there (~/.cargo/bin through a bind mount of the home) must not show them. (The
  -- home's own aliases name every mount of it or of a part of it: none, none here.)
  if home_has_aliases then
    hide_aliases(host.aliases(p))
  end
end
-- Credentials named by the host environment ($CODEX_HOME/auth.json, $CARGO_HOME/...).
local env_creds, env_spelled = credentials.env_configured(ctx.env)
for i, p in ipairs(env_creds) do
  local link, real = credential_target(p, env_spelled[i])
  -- A spelling with ".." that does not resolve (nothing there) has nothing to mask; one
  -- leading through the workspace was refused above.
  if link or path.clean(p) then
    mask_credential(link and real or p)
  end
end
-- Secret files at the top of the workspace (`.env*` are found by the scan below).
for _, rel in ipairs(credentials.workspace_relative) do
  plan:mask(path.join(ctx.workspace, rel), { optional = true })
end

-- Re-exposed read-only: PATH directories and toolchain roots, so offline toolchains
-- keep working under the hidden home. Credential files inside them stay masked (masks
-- apply last). Skipped: anything already declared (a hidden root itself is never
-- re-exposed whole), the host root, directories inside the workspace or scratch
-- (visible and writable already), and directories that hold the workspace (a GOPATH
-- ~/go holding ~/go/src/a would show its sibling projects, their secrets unmasked).
local function reexposable(dir)
  return dir ~= "/" and not plan:rule_kind(dir) and not path.within(dir, ctx.workspace)
    and not path.within(dir, ctx.scratch) and not path.within(ctx.workspace, dir)
end
for _, dir in ipairs(ctx.path_dirs) do
  if reexposable(dir) then
    plan:read_only(dir, { optional = true, discovered = true })
  end
end
for _, dir in ipairs(toolchain_roots) do
  if reexposable(dir) then
    plan:read_only(dir, { optional = true, discovered = true })
  end
end

---------------------------------------------------------------- workspace scan
-- Protected (read-only) top-level entries, matched case-insensitively; missing ones
-- are pinned with placeholders for the run.
plan:protect_names{
  dirs = { ".git", ".a3s", ".agents", ".codex", ".claude", ".vscode", ".idea" },
  files = { ".gitmodules", ".mcp.json", ".ripgreprc", ".bashrc", ".bash_profile", ".zshrc",
            ".zprofile", ".profile" },
}
-- Every `.env*` entry anywhere in the workspace is a secret, and so are the credential
-- files that tools also read from subdirectories (a monorepo's per-package `.npmrc`) ...
plan:secret_prefix(".env")
for _, name in ipairs{ ".netrc", ".npmrc", ".pypirc", ".git-credentials" } do
  plan:secret_prefix(name)
end
-- ... except inside these directories, which the scan does not enter for secrets or
-- hard links (package stores are only searched for aliases of credential inodes).
plan:scan_skip{ ".git", "node_modules", "target" }

---------------------------------------------------------------- environment
-- Start empty; copy the safe keys and LC_*; overlay the request's explicit env; strip;
-- then re-home (engine/env.c applies the steps in this order).
plan:env_keep(envlists.safe_keys)
plan:env_keep_prefix(envlists.keep_prefixes)
plan:env_strip(envlists.bootstrap)
plan:env_strip(envlists.proxies)
plan:env_strip(envlists.mediator)
plan:env_strip(envlists.injection) -- ★
plan:env_strip_prefix(envlists.strip_prefixes) -- ★ except LUA_INIT_
for _, name in ipairs(envlists.rehome) do
  plan:env_set(name, ctx.scratch)
end
-- HOME now points at the scratch dir: toolchains that find their state through HOME
-- (rustup, cargo) are pointed at their re-exposed, read-only default roots instead.
for _, t in ipairs{ { "RUSTUP_HOME", ".rustup" }, { "CARGO_HOME", ".cargo" } } do
  local var, root = t[1], ctx.home .. "/" .. t[2]
  if (ctx.env[var] or "") == "" and a3s.host.is_dir(root) then
    plan:env_set(var, root, { discovered = true })
  end
end

---------------------------------------------------------------- limits
plan:limits{
  timeout_ms = 120000, -- deadline ceiling: 120 s
  output_bytes = 102400, -- one global head+tail capture budget: 100 KiB
  nofile = 1024, -- RLIMIT_NOFILE
  core_bytes = 0, -- no core dumps
  scan_depth = 64, -- workspace scan: depth and entries, both fail closed
  scan_entries = 1000000,
}

return plan
