#!/usr/bin/env bash
# What the operator is told. --help lists the environment variables the program reads and
# the policy search path, in order; -v/--verbose says on stderr what was resolved (policy
# and file, digest, backend, workspace, timeout) and at which stage a refusal came, never
# on stdout and never a value of the environment; a -t above the policy's ceiling gets a
# note (it is capped); the timeout message names the deadline that fired and after how
# long; an option's value of exactly `--` is a usage error (125), not a value.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip_all "python3 is needed to read the JSON output"
hint="(run 'a3s-sandbox --help' for usage)"

usage_error() {
  local what=$1 msg=$2
  check "$what: exit 125" eq "$RC" 125
  check "$what: message" eq "$ERR" "a3s-sandbox: $msg
$hint"
}

# --- --help: the environment and the policy search path ------------------------------------
run_cli --help
check "--help: exit 0" eq "$RC" 0
for v in A3S_SANDBOX_BWRAP A3S_SANDBOX_LAUNCHER A3S_SANDBOX_RELAY A3S_SANDBOX_MEDIATOR \
         A3S_SANDBOX_POLICY_PATH A3S_SANDBOX_MAPPED_ID A3S_SANDBOX_CGROUP_ROOT \
         A3S_SANDBOX_ALLOW_PROCESS_HOST A3S_CODE_ALLOW_PROCESS_HOST_SANDBOX \
         A3S_SANDBOX_ALLOW_HOST_ROOT A3S_SANDBOX_AHEAD TMPDIR HOME; do
  check "--help: the Environment section lists $v" \
    grep -qE "^  ($v|.*, $v)( |,|$)" <<<"$(sed -n '/^Environment:/,/^$/p' <<<"$OUT")"
done
check "--help: -v, --verbose" contains "$OUT" "-v, --verbose"
check "--help: the policy search path" contains "$OUT" "Policy search path, in order"
pdir=$(tmpdir)
pdir2=$(tmpdir)
A3S_SANDBOX_POLICY_PATH="$pdir:relative/dir:$pdir2" run_cli --help
path_lines=$(sed -n '/^Policy search path/,$p' <<<"$OUT" | grep '^  /')
check "--help: the A3S_SANDBOX_POLICY_PATH directories, in order, last" \
  eq "$(tail -n 2 <<<"$path_lines")" "  $pdir  (A3S_SANDBOX_POLICY_PATH)
  $pdir2  (A3S_SANDBOX_POLICY_PATH)"
check "--help: relative entries are not listed (the engine ignores them)" \
  not_contains "$OUT" "relative/dir"

# --- an option's value of exactly `--` ------------------------------------------------------
for o in -p --policy -w --workspace -t --timeout -e --env -c --audit --grant --grant-digest; do
  run_cli "$o" -- true
  usage_error "$o -- true" "option $o needs a value, not '--' (which ends the options): give its value first, e.g. --policy NAME -- PROGRAM"
done
run_cli --policy=-- -- true
check "--policy=--: refused (125)" eq "$RC" 125
run_cli -p-- -- true
check "-p--: refused (125)" eq "$RC" 125
run_cli --json --policy -- true
check "--json --policy --: 125" eq "$RC" 125
check "--json --policy --: one JSON usage error" eq \
  "$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["error"]["code"])' <<<"$OUT")" usage
run_cli --policy -- --json true
check "--policy -- --json: 125, and --json after the refused value is not read" eq "$RC/$OUT" "125/"

# -v takes no value and does not group with other short options.
run_cli -vp baseline -- true
usage_error "-vp baseline" "option -v takes no value"
run_cli --verbose=1 -- true
usage_error "--verbose=1" "option --verbose takes no value"

require_sandbox
ws=$(tmpdir)
real_ws=$(cd "$ws" && pwd -P)
pol=$(tmpdir)
cat >"$pol/short.lua" <<'EOF'
local plan = a3s.extend("baseline", "short")
plan:limits{ timeout_ms = 1000 }
return plan
EOF
printf 'return 42\n' >"$pol/broken.lua"
chmod -R a+rX "$pol"

# --- -v ----------------------------------------------------------------------------------------
digest=$("$A3S" digest -w "$ws")
run_cli -v -w "$ws" -e SPEC_TOKEN=hunter2-secret-value -- printf %s out-ok
check "-v: the run works" eq "$RC" 0
check "-v: stdout is the command's only" eq "$OUT" "out-ok"
check "-v: the policy and its file" grep -qE '^a3s-sandbox: verbose: policy baseline \((/.*/|<builtin>/)baseline\.lua\)$' <<<"$ERR"
check "-v: the digest" contains "$ERR" "a3s-sandbox: verbose: policy digest $digest"
check "-v: the backend" contains "$ERR" "a3s-sandbox: verbose: backend linux-bwrap"
check "-v: the workspace" contains "$ERR" "a3s-sandbox: verbose: workspace $real_ws"
check "-v: the effective timeout" contains "$ERR" "a3s-sandbox: verbose: timeout 120 s (the policy's ceiling; no -t)"
check "-v: no value of the environment" not_contains "$ERR" "hunter2-secret-value"
run_cli --verbose -w "$ws" -t 2.5 -- true
check "--verbose -t 2.5: the timeout and the ceiling" contains "$ERR" "timeout 2.5 s (-t; the policy's ceiling is 120 s)"

run_cli -v --json -w "$ws" -- printf %s json-ok
check "-v --json: stdout is exactly the result object" eq \
  "$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["stdout"])' <<<"$OUT")" json-ok
check "-v --json: the details are on stderr" contains "$ERR" "a3s-sandbox: verbose: policy digest"

run_cli -w "$ws" -- true
check "without -v: nothing is said" eq "$ERR" ""

# The stage of a refusal (the message as always, then where it came from).
run_cli -v -w "$ws" -p "$pol/broken.lua" -- true
check "-v, broken policy: 125" eq "$RC" 125
check "-v, broken policy: the message" contains "$ERR" "a3s-sandbox: run: policy $pol/broken.lua"
check "-v, broken policy: the stage" contains "$ERR" \
  "a3s-sandbox: verbose: refused at stage 'run: evaluating and validating the policy' (error class policy)"
run_cli -v -w "$ws/missing" -- true
check "-v, missing workspace: the stage" contains "$ERR" \
  "a3s-sandbox: verbose: refused at stage 'opening the workspace and finding the policy' (error class invalid)"
run_cli -v -w "$ws" -p no-such-policy -- true
check "-v, unknown policy: the stage" contains "$ERR" \
  "refused at stage 'opening the workspace and finding the policy' (error class policy)"
run_cli plan -v -w "$ws"
check "-v plan: the details on stderr, the plan on stdout" eq \
  "$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["name"])' <<<"$OUT")" baseline
check "-v plan: the digest on stderr" contains "$ERR" "verbose: policy digest $digest"

# --- a -t above the ceiling: a note ----------------------------------------------------------
run_cli -w "$ws" -t 500 -- true
check "-t 500: runs" eq "$RC" 0
check "-t 500: a note that it is capped" eq "$ERR" \
  "a3s-sandbox: note: the requested timeout of 500 s is capped at 120 s, the deadline ceiling of policy baseline"
run_cli -w "$ws" -t 120 -- true
check "-t at the ceiling: no note" eq "$ERR" ""
run_cli -w "$ws" -t 5 -- true
check "-t below the ceiling: no note" eq "$ERR" ""

# --- the timeout message: which deadline, after how long -----------------------------------
run_cli -w "$ws" -p "$pol/short.lua" -t 30 -c 'sleep 5'
check "ceiling fired: exit 124" eq "$RC" 124
check "ceiling fired: the note" contains "$ERR" \
  "a3s-sandbox: note: the requested timeout of 30 s is capped at 1 s, the deadline ceiling of policy short"
check "ceiling fired: names the policy's ceiling and how long" grep -qE \
  "^a3s-sandbox: command timed out after [0-9.]+ s: the deadline ceiling of policy short \(1 s\) was reached; the process tree was killed$" <<<"$ERR"
run_cli -w "$ws" -p "$pol/short.lua" -c 'sleep 5'
check "ceiling fired (no -t): names the policy's ceiling" contains "$ERR" \
  "the deadline ceiling of policy short (1 s) was reached"
run_cli -w "$ws" -t 0.2 -c 'sleep 5'
check "-t fired: exit 124" eq "$RC" 124
check "-t fired: names -t" grep -qE \
  "^a3s-sandbox: command timed out after [0-9.]+ s: the -t deadline of 0.2 s was reached; the process tree was killed$" <<<"$ERR"
after=$(sed -nE 's/.*timed out after ([0-9.]+) s.*/\1/p' <<<"$ERR")
check "-t fired: after at least 0.2 s ($after)" python3 -c "import sys; sys.exit(0 if 0.2 <= float('$after') < 5 else 1)"

finish
