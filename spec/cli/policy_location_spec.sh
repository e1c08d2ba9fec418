#!/usr/bin/env bash
# A policy the command could rewrite is never enforced: a policy file inside the
# workspace is refused, and a policy directory inside it is not searched (a run could
# otherwise change what the next run enforces).
. "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
mkdir -p "$ws/tools"
cat >"$ws/tools/project.lua" <<'LUA'
local plan = a3s.extend("baseline", "project")
return plan
LUA
run_cli -w "$ws" -p "$ws/tools/project.lua" -- true
check "a policy file inside the workspace: refused (125)" eq "$RC" 125
check "the message says why" contains "$ERR" "inside the workspace"

# The same file outside the workspace is fine.
out=$(tmpdir)
cp "$ws/tools/project.lua" "$out/project.lua"
run_cli -w "$ws" -p "$out/project.lua" -- true
check "the same policy outside the workspace runs" eq "$RC" 0

# A search-path directory inside the workspace is not searched: a policy only it holds is
# not found (and never loaded).
mkdir -p "$ws/pol"
printf 'error("loaded from the workspace")\n' >"$ws/pol/wsonly.lua"
A3S_SANDBOX_POLICY_PATH="$ws/pol" run_cli -w "$ws" -p wsonly -- true
check "a policy dir inside the workspace: its policy is not found (125)" eq "$RC" 125
check "its file was never loaded" not_contains "$ERR" "loaded from the workspace"
check "the message says why it was not searched" contains "$ERR" "inside the workspace, or missing, are not searched"

# Created by the command itself, for a later run: same outcome.
run_cli -w "$ws" -c 'mkdir -p evil && printf "error(\"planted\")\n" > evil/planted.lua'
A3S_SANDBOX_POLICY_PATH="$ws/evil" run_cli -w "$ws" -p planted -- true
check "a policy dir the command planted is not searched" not_contains "$ERR" "planted\")"
check "(and its policy is not found)" contains "$ERR" "not found"
finish
