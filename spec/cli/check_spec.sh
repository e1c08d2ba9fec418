#!/usr/bin/env bash
# `check` catches what a run would refuse (README "CLI", policies/README.md): a syscall
# name libseccomp does not know and a missing non-optional path are refused by check
# (125, naming the rule and its policy file:line) exactly as every run refuses them;
# `check --neutral` checks only what does not depend on this host; a valid policy is 0.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
pd=$(tmpdir)
missing=/nonexistent-a3s-check-$$/sdk

cat >"$pd/bad-syscall.lua" <<'EOF'
local plan = a3s.extend("baseline", "bad-syscall")
plan:seccomp_deny{ "ptrce" }
return plan
EOF
cat >"$pd/missing-ro.lua" <<EOF
local plan = a3s.extend("baseline", "missing-ro")
plan:read_only("$missing")
return plan
EOF
cat >"$pd/optional-ro.lua" <<EOF
local plan = a3s.extend("baseline", "optional-ro")
plan:read_only("$missing", { optional = true })
return plan
EOF
cat >"$pd/valid.lua" <<'EOF'
local plan = a3s.extend("baseline", "valid")
plan:seccomp_deny{ "keyctl", "ptrace" }
plan:read_only("/usr")
return plan
EOF

# --- an unknown syscall name: every operation refuses it ------------------------------------
run_cli check "$pd/bad-syscall.lua" -w "$ws"
check "unknown syscall: check exits 125" eq "$RC" 125
check "unknown syscall: check names the syscall" contains "$ERR" "ptrce"
check "unknown syscall: check names the policy line" contains "$ERR" "bad-syscall.lua:2"
check "unknown syscall: check prints no ok" not_contains "$OUT" "ok"
run_cli check "$pd/bad-syscall.lua" --neutral -w "$ws"
check "unknown syscall: check --neutral exits 125" eq "$RC" 125
check "unknown syscall: check --neutral names the policy line" contains "$ERR" "bad-syscall.lua:2"
run_cli plan -p "$pd/bad-syscall.lua" -w "$ws"
check "unknown syscall: plan exits 125" eq "$RC" 125
check "unknown syscall: plan names the syscall" contains "$ERR" "ptrce"
check "unknown syscall: plan names the policy line" contains "$ERR" "bad-syscall.lua:2"
run_cli digest -p "$pd/bad-syscall.lua" -w "$ws"
check "unknown syscall: digest exits 125" eq "$RC" 125
check "unknown syscall: digest prints no digest" eq "$OUT" ""
check "unknown syscall: digest names the syscall" contains "$ERR" "ptrce"
run_cli -p "$pd/bad-syscall.lua" -w "$ws" -c 'touch ran'
check "unknown syscall: run exits 125" eq "$RC" 125
check "unknown syscall: run names the syscall and the policy line" contains "$ERR" "bad-syscall.lua:2"
check "unknown syscall: nothing ran" test ! -e "$ws/ran"

# --- a missing non-optional read_only path ----------------------------------------------------
run_cli check "$pd/missing-ro.lua" -w "$ws"
check "missing read_only path: check exits 125" eq "$RC" 125
check "missing read_only path: check names the path" contains "$ERR" "$missing"
check "missing read_only path: check names the policy line" contains "$ERR" "missing-ro.lua:2"
run_cli -p "$pd/missing-ro.lua" -w "$ws" -c 'touch ran'
check "missing read_only path: run exits 125" eq "$RC" 125
check "missing read_only path: run names the path" contains "$ERR" "$missing"
check "missing read_only path: run names the policy line" contains "$ERR" "missing-ro.lua:2"
check "missing read_only path: nothing ran" test ! -e "$ws/ran"
run_cli check "$pd/missing-ro.lua" --neutral -w "$ws"
check "missing read_only path: check --neutral passes (host-dependent) ($ERR)" eq "$RC" 0
run_cli digest -p "$pd/missing-ro.lua" -w "$ws"
check "missing read_only path: digest is host-independent, still printed ($ERR)" eq "$RC" 0

# --- optional: a missing path is fine -------------------------------------------------------
run_cli check "$pd/optional-ro.lua" -w "$ws"
check "optional missing path: check exits 0 ($ERR)" eq "$RC" 0
run_cli -p "$pd/optional-ro.lua" -w "$ws" -c 'echo fine'
check "optional missing path: run exits 0 ($ERR)" eq "$RC" 0
check "optional missing path: the command ran" eq "$OUT" "fine"

# --- a valid policy ---------------------------------------------------------------------------
run_cli check "$pd/valid.lua" -w "$ws"
check "valid policy: check exits 0 ($ERR)" eq "$RC" 0
check "valid policy: check says ok" contains "$OUT" "ok: policy valid is valid"
run_cli check "$pd/valid.lua" --neutral -w "$ws"
check "valid policy: check --neutral exits 0 ($ERR)" eq "$RC" 0
check "valid policy: check --neutral says ok" contains "$OUT" "ok: policy valid is valid"

# --- a broken policy: 125 like every other refusal --------------------------------------------
printf 'error("broken on purpose")\n' >"$pd/broken.lua"
run_cli check "$pd/broken.lua" -w "$ws"
check "broken policy: check exits 125" eq "$RC" 125
check "broken policy: the policy's own error" contains "$ERR" "broken on purpose"

# --- an error inside a policy module: named by the file it was read from and its line -------
# (a shipped module's text is loaded as the chunk the build compiled from it; the messages
# are those of the text compiled here, whichever file held it, and another text is compiled)
line=$(grep -n 'return base \.\. "/" \.\. rel' "$A3S_SOURCE_DIR/policies/lib/path.lua" | cut -d: -f1)
msg="attempt to concatenate a table value (local 'base')"
printf 'require("lib.path").join({}, "x")\nreturn a3s.extend("baseline", "x")\n' >"$pd/inlib.lua"
run_cli check "$pd/inlib.lua" -w "$ws"
check "error in a shipped module: check exits 125" eq "$RC" 125
check "error in a shipped module: its file and line" contains "$ERR" "/lib/path.lua:$line: $msg"
mkdir -p "$pd/mine"
cp "$A3S_SOURCE_DIR/policies/lib/path.lua" "$pd/mine/same.lua"
{ cat "$A3S_SOURCE_DIR/policies/lib/path.lua"; printf -- '-- changed\n'; } >"$pd/mine/changed.lua"
for m in same changed; do
  printf 'require("mine.%s").join({}, "x")\nreturn a3s.extend("baseline", "x")\n' "$m" >"$pd/use-$m.lua"
  A3S_SANDBOX_POLICY_PATH=$pd run_cli check "$pd/use-$m.lua" -w "$ws"
  check "error in a module ($m text): its own file and line" contains "$ERR" \
    "$pd/mine/$m.lua:$line: $msg"
done

finish
