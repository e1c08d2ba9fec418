-- lib/env.lua: the environment lists of the baseline (policies/README.md, "Environment").
-- Matching of strip names and prefixes is case-insensitive (engine/env.c).

local M = {}

-- Step 1: copied from the host when set. The original's 56 safe keys minus
-- PROGRAMFILES(X86) and COMMONPROGRAMFILES(X86): Windows-only, and a name with '('
-- is not a valid plan environment name ([A-Za-z_][A-Za-z0-9_]*).
M.safe_keys = {
  "PATH", "USER", "USERNAME", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
  "TERM", "COLORTERM", "NO_COLOR", "CI",
  "CARGO_HOME", "RUSTUP_HOME", "RUSTC_WRAPPER", "GOPATH", "GOROOT", "GOMODCACHE",
  "NVM_DIR", "FNM_DIR", "VOLTA_HOME", "BUN_INSTALL", "DENO_DIR", "PNPM_HOME",
  "JAVA_HOME", "GRADLE_USER_HOME", "MAVEN_HOME", "SDKROOT", "DEVELOPER_DIR",
  "PKG_CONFIG_PATH", "LIBRARY_PATH", "CPATH", "CC", "CXX", "AR",
  "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "PSMODULEPATH",
  "PROGRAMDATA", "PROGRAMFILES", "PROGRAMW6432", "COMMONPROGRAMFILES",
  "COMMONPROGRAMW6432", "PROCESSOR_ARCHITECTURE", "NUMBER_OF_PROCESSORS", "OS",
  "HOMEDRIVE", "HOMEPATH", "PUBLIC", "ALLUSERSPROFILE",
}

-- Step 2.
M.keep_prefixes = { "LC_" }

-- Step 4: bootstrap and injection variables of the original.
M.bootstrap = {
  "BASH_ENV", "ENV", "NODE_OPTIONS", "NODE_PATH", "PYTHONHOME", "PYTHONPATH",
  "PYTHONSTARTUP", "PYTHONINSPECT", "RUBYOPT", "RUBYLIB", "PERL5OPT", "PERL5LIB",
  "LUA_INIT", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS",
  "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH",
}

-- Step 5: proxies are scrubbed (the baseline has no network; mediation sets its own).
M.proxies = {
  "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
  "http_proxy", "https_proxy", "all_proxy", "no_proxy",
  "FTP_PROXY", "ftp_proxy",
}

-- Step 6: the mediator's private channel never reaches the command.
M.mediator = { "A3S_SANDBOX_MEDIATOR_PIPE", "A3S_SANDBOX_MEDIATOR_PIPE_HANDLE" }

-- ★ Shell, loader and resolver knobs the original let through.
M.injection = {
  -- shells: options, traces, prompts, word splitting, cd search, zsh startup dir
  "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH", "ZDOTDIR",
  -- glibc: iconv modules, audit/debug/profile hooks, tunables, malloc checks, catalogs
  "GCONV_PATH", "LD_AUDIT", "LD_DEBUG", "LD_DEBUG_OUTPUT", "LD_PROFILE", "GLIBC_TUNABLES",
  "MALLOC_CHECK_", "MALLOC_PERTURB_", "NLSPATH",
  -- resolver: host aliases and options
  "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN",
  -- interpreters: module search paths and debugger hooks
  "PERLLIB", "PERL5DB", "LUA_PATH", "LUA_CPATH",
}

-- Names starting with these are stripped (case-insensitively). GIT_*: git reads
-- config, commands and directories from its environment (GIT_CONFIG_*, GIT_SSH_COMMAND,
-- GIT_DIR, ...); BASH_FUNC_*: exported shell functions.
M.strip_prefixes = { "LUA_INIT_", "BASH_FUNC_", "GIT_", "LD_", "MALLOC_", "DYLD_" }

-- Step 9: re-homed to the per-execution scratch dir (always overwritten).
M.rehome = {
  "HOME", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "TMPDIR", "TMP", "TEMP",
  "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
}

return M
