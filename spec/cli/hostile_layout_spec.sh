#!/usr/bin/env bash
# What a command may leave behind for the NEXT run, beyond its files: a re-pointed link in
# a policy search path (one long-lived Lua sandbox, many execs), a workspace that makes
# every native run fail (it must never turn the process-host opt-in into an unconfined
# run where bubblewrap works), and a directory named like the built-in policy entry.
# Host side asserted: the secret stays unread, the canary is never written.
source "$(dirname "$0")/lib.sh"
require_sandbox

# 1. A policy path entry that reaches outside through a link in the workspace: the command
# re-points the link at its own module between two execs of one sandbox object.
if command -v lua5.4 >/dev/null && [ -n "${LUA_CPATH:-}" ]; then
  ws=$(tmpdir) pol=$(tmpdir) priv=$(tmpdir)
  secret="host-secret-$RANDOM$RANDOM"
  echo "$secret" >"$priv/secret.txt"
  printf 'local plan = a3s.extend("baseline", "team")\nrequire("teamlib").apply(plan)\nreturn plan\n' >"$pol/team.lua"
  printf 'return { apply = function(plan) plan:limits{ timeout_ms = 60000 } end }\n' >"$pol/teamlib.lua"
  chmod -R a+rX "$pol"
  ln -s "$pol" "$ws/.policies"
  script=$(tmpdir)/relink.lua
  cat >"$script" <<'LUA'

local sb = assert(require("a3s_sandbox").new{ workspace = arg[1], policy = "team" })
local d1 = sb:digest()
local r = assert(sb:exec([[
  mkdir -p evil && cat > evil/teamlib.lua <<L
return { apply = function(plan) plan:read_only("]] .. arg[2] .. [[") plan:env_keep{ "SECRET_TOKEN" } end }
L
  rm .policies && ln -s evil .policies && echo planted]]))
io.write("run1:", r.stdout)
local r2, e2 = sb:exec("cat " .. arg[2] .. "/secret.txt 2>&1; echo token=$SECRET_TOKEN")
io.write("run2:", r2 and r2.stdout or tostring(e2), "\n")
io.write("same-digest:", tostring(d1 == sb:digest()), "\n")
LUA
  out=$(cd / && SECRET_TOKEN="$secret" A3S_SANDBOX_POLICY_PATH="$ws/.policies" lua5.4 "$script" "$ws" "$priv" 2>&1)
  check "a re-pointed policy link: the command planted its module" contains "$out" "run1:planted"
  check "... the next exec does not load it: no host secret, no host token" not_contains "$out" "$secret"
  check "... and the policy is the one approved" contains "$out" "same-digest:true"
fi

# 2. A workspace that makes every native run refuse (deeper than the scan limit): refused
# without the opt-in, and with it too, since bubblewrap works here. Never unconfined.
ws=$(tmpdir) out=$(tmpdir)
canary="$out/canary"
chmod 0777 "$out"
run_cli -w "$ws" -c 'p=.; for i in $(seq 70); do p=$p/d; done; mkdir -p $p; echo planted'
check "deep tree planted" eq "$OUT" planted
run_cli -w "$ws" -c "echo x > $canary"
check "without the opt-in: refused (125)" eq "$RC" 125
run_cli -w "$ws" --allow-process-host -c "echo x > $canary"
check "with --allow-process-host on a host where bubblewrap works: still refused (125)" eq "$RC" 125
check "... and nothing ran on the host" test ! -e "$canary"
check "... no fallback warning" not_contains "$ERR" "NO LOCAL SANDBOX BOUNDARY"

# 3. A directory named like the built-in policy entry, in the default workspace of a
# standalone copy of the program (no installed policy directory next to it).
lone=$(tmpdir)
cp "$A3S" "$lone/a3s-sandbox"
chmod -R a+rX "$lone"
ws=$(tmpdir)
out=$(cd "$ws" && "$lone/a3s-sandbox" -c 'mkdir "<builtin>" && echo made' 2>&1)
check "a standalone copy runs with the built-in policies" eq "$out" made
out=$(cd "$ws" && "$lone/a3s-sandbox" -- printf still 2>&1)
check "... and still does with a '<builtin>' directory in its workspace" eq "$out" still

# 4. process-host (opt-in, with a bubblewrap that fails): a concurrent sandboxed run that
# exchanges the working directory with a link out of the workspace (renameat2
# RENAME_EXCHANGE, so one of the two is always there) never takes the command there.
# Host side: the directory the link points at stays empty. The shell's own `pwd -P`
# resolves its remembered path string (which may by then be the link), so the check reads
# the kernel's answer through /bin/pwd instead.
if command -v lua5.4 >/dev/null && [ -n "${LUA_CPATH:-}" ]; then
  source "$(dirname "$0")/race_helpers.sh"
  trap 'race_cleanup; cleanup' EXIT
  ws=$(tmpdir) outside=$(tmpdir)
  chmod 0777 "$outside"
  mkdir -p "$ws/sub/dir"
  ln -s "$outside" "$ws/sub/lnk"
  build_swap "$ws"
  if start_attacker "$ws" sub/dir sub/lnk; then
    script=$(tmpdir)/cwdrace.lua
    cat >"$script" <<'LUA'
local sb = assert(require("a3s_sandbox").new{ workspace = arg[1], bwrap = "/bin/false",
                                              allow_process_host = true, allow_host_root = true })
local out, ran = 0, 0
for i = 1, 400 do
  local r = sb:exec("echo x > planted." .. i .. "; /bin/pwd -P", { cwd = "sub/dir" })
  if r then
    ran = ran + 1
    if not r.stdout:find(arg[1], 1, true) then out = out + 1 end
  end
end
io.write(("ran=%d out=%d\n"):format(ran, out))
LUA
    res=$(lua5.4 "$script" "$ws" 2>&1)
    stop_attacker
    check_attacker
    check "process-host cwd under an exchange race: some runs ran ($res)" not_contains "$res" "ran=0 "
    check "... and none started outside the workspace" contains "$res" " out=0"
    check "... the directory outside stays empty" eq "$(ls -A "$outside")" ""
  else
    check "the attacker run started" false
  fi
fi
finish
