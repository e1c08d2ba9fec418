#!/usr/bin/env bash
# `plan --explain`: the readable plan names every section and the policy file:line of
# each rule, including the lines a derived policy changed.
source "$(dirname "$0")/lib.sh"

ws=$(tmpdir)
pol=$(tmpdir)
cat >"$pol/narrow.lua" <<'LUA'
local plan = a3s.extend("baseline", "narrow")
plan:limits{ timeout_ms = 5000 }
plan:protect_names{ dirs = { "ci" } }
return plan
LUA

run_cli plan --explain -w "$ws"
check "explain exits 0" eq "$RC" 0
for section in "Policy baseline" "Network" "Filesystem" "Workspace rules" "Environment" \
               "Seccomp" "Limits" "bubblewrap"; do
  check "explain has section: $section" contains "$OUT" "$section"
done
check "a filesystem rule with its provenance" contains "$OUT" "hide      /home"
check "provenance names baseline.lua with a line" test -n "$(echo "$OUT" | grep -E '\^ (policies|<builtin>)/baseline\.lua:[0-9]+' | head -1)"
check "seccomp rule listed with errno" test -n "$(echo "$OUT" | grep -E 'deny keyctl +-> EPERM')"
check "the digest is the one of 'digest'" contains "$OUT" "$("$A3S" digest -w "$ws")"

A3S_SANDBOX_POLICY_PATH="$pol" run_cli plan --explain -p narrow -w "$ws"
check "derived: exits 0" eq "$RC" 0
check "derived: the new limit" contains "$OUT" "deadline ceiling 5000 ms"
limits_from=$(echo "$OUT" | sed -n '/^Limits/,/^$/p' | grep -o '\^ .*')
check "derived: the limit comes from the derived file, line 2" contains "$limits_from" "narrow.lua:2"
check "derived: the extra protected name, from line 3" contains "$(echo "$OUT" | sed -n '/^Workspace rules/,/^Environment/p')" "ci 
                  ^ $(basename "$pol")/narrow.lua:3"
check "derived: inherited rules keep baseline provenance" contains "$OUT" "baseline.lua:"
finish
