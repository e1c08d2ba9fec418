#!/usr/bin/env bash
# Option parsing (getopt_long): every option still works in the separate form (-p X,
# --policy X) and now also attached (-pX, --policy=X); `--` ends the options and what
# follows is the command's, untouched; an option's value is never an option (`-c --json`
# gives the command "--json", JSON mode stays off); long options must be spelled in full;
# each subcommand takes the options it took before; usage errors are 125 with the same
# messages (and one JSON error object under --json).
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed to read the JSON output"

SRC=${A3S_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
jv() { python3 -c 'import json,sys
d = json.loads(sys.stdin.read()); v = eval(sys.argv[1], {"d": d})
print(v if isinstance(v, str) else json.dumps(v))' "$1" <<<"$OUT"; }

ws=$(tmpdir)
real_ws=$(cd "$ws" && pwd -P)
cd "$ws" || exit 1
hint="(run 'a3s-sandbox --help' for usage)"

# A usage error: 125, exactly this message on stderr, nothing on stdout.
usage_error() {
  local what=$1 msg=$2
  check "$what: exit 125" eq "$RC" 125
  check "$what: message" eq "$ERR" "a3s-sandbox: $msg
$hint"
  check "$what: stdout empty" eq "$OUT" ""
}

# --- the same run in every spelling -------------------------------------------------------
for form in "-p baseline" "--policy baseline" "--policy=baseline" "-pbaseline"; do
  # shellcheck disable=SC2086 # split on purpose: the form is one or two words
  run_cli $form -w "$ws" -- printf %s policy-ok
  check "$form: runs" eq "$RC/$OUT" "0/policy-ok"
done
run_cli -w "$ws" -- pwd -P
check "-w DIR" eq "$OUT" "$real_ws"
run_cli --workspace "$ws" -- pwd -P
check "--workspace DIR" eq "$OUT" "$real_ws"
run_cli "--workspace=$ws" -- pwd -P
check "--workspace=DIR" eq "$OUT" "$real_ws"
run_cli "-w$ws" -- pwd -P
check "-wDIR" eq "$OUT" "$real_ws"

for form in "-t 2.5" "--timeout 2.5" "--timeout=2.5" "-t2.5"; do
  # shellcheck disable=SC2086
  run_cli -w "$ws" $form -- printf %s t-ok
  check "$form: runs" eq "$RC/$OUT" "0/t-ok"
done
run_cli -w "$ws" -t0.3 -- sleep 10
check "-t0.3: the deadline applies (124)" eq "$RC" 124
run_cli -w "$ws" --timeout=0.3 -- sleep 10
check "--timeout=0.3: the deadline applies (124)" eq "$RC" 124

for form in "-e A3S_OPT=v1" "--env A3S_OPT=v1" "--env=A3S_OPT=v1" "-eA3S_OPT=v1"; do
  # shellcheck disable=SC2086
  run_cli -w "$ws" $form -- printenv A3S_OPT
  check "$form: sets the entry" eq "$RC/$OUT" "0/v1"
done
run_cli -w "$ws" -e A=1 -eB=2 --env C=3 --env=D=4 -- sh -c 'printf %s "$A$B$C$D"'
check "-e repeated in mixed forms" eq "$OUT" 1234
run_cli -w "$ws" -e 'A3S_OPT=x=y z' -- printenv A3S_OPT
check "-e: only the first = splits name from value" eq "$OUT" "x=y z"

run_cli -w "$ws" -c 'printf %s c-ok'
check "-c COMMAND" eq "$RC/$OUT" "0/c-ok"
run_cli -w "$ws" '-cprintf %s c-attached'
check "-cCOMMAND" eq "$RC/$OUT" "0/c-attached"

run_cli digest -w "$ws" --grant example.com:443
d_sep=$OUT
check "digest --grant H:P: a digest" eq "${#d_sep}/$RC" "64/0"
run_cli digest -w "$ws" --grant=example.com:443
check "digest --grant=H:P: the same digest" eq "$OUT" "$d_sep"
run_cli digest -w "$ws"
check "the grant is part of the digest" not_contains "$OUT" "$d_sep"
run_cli --json -w "$ws" --grant=example.org:443 \
  --grant-digest=0000000000000000000000000000000000000000000000000000000000000000 \
  -c 'touch ran-grant'
check "--grant-digest=HEX: checked (a wrong one is refused, 125)" eq "$RC" 125
check "--grant-digest=HEX: refused as policy" eq "$(jv 'd["error"]["code"]')" policy
check "--grant-digest=HEX: nothing ran" test ! -e "$ws/ran-grant"

audit=$(tmpdir)/audit.jsonl
run_cli -w "$ws" "--audit=$audit" -- true
check "--audit=FILE: writes the audit lines" test -s "$audit"

run_cli -w "$ws" --json -- printf %s j
check "--json" eq "$(jv 'd["stdout"]')" j
run_cli --json=1 -w "$ws" -- true
usage_error "--json=1" "option --json takes no value"

# --- -- ends the options; the command's arguments are untouched ----------------------------
run_cli -w "$ws" -- printf '%s|' -la --json -c x -- -p -w --policy=x -t0
check "after --: every word is the command's" eq "$OUT" "-la|--json|-c|x|--|-p|-w|--policy=x|-t0|"
run_cli -w "$ws" -- ls -la /dev/null
check "-- ls -la: ls gets -la (a long listing)" contains "$OUT" "/dev/null"
check "-- ls -la: ls gets -la (mode column)" eq "${OUT:0:1}" c
POSIXLY_CORRECT=1 run_cli -w "$ws" -- printf '%s|' -a -- b
check "POSIXLY_CORRECT changes nothing" eq "$RC/$OUT" "0/-a|--|b|"
run_cli -- printf '%s|' -x
check "-- first: the default workspace, argv untouched" eq "$OUT" "-x|"
run_cli run -w "$ws" --
usage_error "nothing after --" "missing PROGRAM after --"
run_cli -w "$ws" -c 'touch ran-both' -- touch ran-both-argv
usage_error "-c and -- together" "give either -c COMMAND or -- PROGRAM, not both"
check "-c and -- together: nothing ran" test ! -e "$ws/ran-both" -a ! -e "$ws/ran-both-argv"
run_cli -w "$ws" touch ran-operand
usage_error "a command without --" "unexpected argument 'touch' (use -- before the command)"
check "a command without --: nothing ran" test ! -e "$ws/ran-operand"
run_cli -w "$ws" -- true --json -t
check "--json and -t after --: not options" eq "$RC/$OUT/$ERR" "0//"

# --- an option's value is never an option ----------------------------------------------------
# `-c --json` is the shell command "--json" (bash refuses it: a command line starting with
# '-' is read as bash options), never the --json flag: no JSON, and it ran (not 125).
run_cli -w "$ws" -c --json
check "-c --json: the command ran (bash's status, not 125)" test "$RC" -ne 125 -a "$RC" -ne 0
check "-c --json: not JSON mode (stdout empty)" eq "$OUT" ""
run_cli -w "$ws" -c --json --json
check "-c --json --json: the second is the flag: one result object" eq \
  "$(jv '"error" not in d and "exit_code" in d')" true
check "-c --json --json: the command (\"--json\") failed in bash" eq "$(jv 'd["exit_code"] not in (0, None)')" true
run_cli -w "$ws" -e --json -- true
check "-e --json: the entry \"--json\" is refused (125)" eq "$RC" 125
check "-e --json: no JSON error object (not JSON mode)" eq "$OUT" ""
check "-e --json: the entry is the one refused" contains "$ERR" "environment entry"
run_cli -w "$ws" -p --json -- true
check "-p --json: a policy named --json (125)" eq "$RC" 125
check "-p --json: names it" contains "$ERR" "'--json'"
check "-p --json: no JSON" eq "$OUT" ""
run_cli -w "$ws" -t --json -- true
usage_error "-t --json" "invalid timeout '--json' (seconds, decimal allowed)"
run_cli --json -w "$ws" -t --json -- true
check "--json -t --json: one usage error object" eq "$(jv 'd["error"]["code"]')" usage
run_cli --policy=baseline --json --no-such-option -- true
check "--policy=X --json: --json is read after an attached value" eq \
  "$(jv 'd["error"]["message"]')" "unknown option '--no-such-option'"
run_cli -pbaseline -w "$ws" --json -t0 -- true
check "-pX ... --json -t0: the timeout error as JSON" eq \
  "$(jv 'd["error"]["message"]')" "invalid timeout '0': the command timeout must be greater than zero"

# --- validation messages, in both spellings ---------------------------------------------------
for form in "-t 0" "-t0" "--timeout=0" "--timeout 0"; do
  # shellcheck disable=SC2086
  run_cli -w "$ws" $form -c 'touch ran-t0'
  usage_error "$form" "invalid timeout '0': the command timeout must be greater than zero"
done
check "timeout 0: nothing ran" test ! -e "$ws/ran-t0"
run_cli -w "$ws" -t86401 -- true
usage_error "-t86401" "invalid timeout '86401': at most 86400 seconds"
run_cli -w "$ws" --timeout=abc -- true
usage_error "--timeout=abc" "invalid timeout 'abc' (seconds, decimal allowed)"
run_cli -w "$ws" --timeout= -- true
usage_error "--timeout= (empty)" "invalid timeout '' (seconds, decimal allowed)"
for o in -w --workspace -p --policy -t --timeout -e --env -c --audit --grant --grant-digest; do
  run_cli "$o"
  usage_error "$o without a value" "option $o needs a value"
done
run_cli --json -w "$ws" --workspace
check "--json, --workspace without a value: one usage object" eq \
  "$(jv '[d["error"]["code"], d["error"]["message"]]')" '["usage", "option --workspace needs a value"]'

# --- long options are spelled in full (no getopt abbreviations) -------------------------------
run_cli --pol baseline -w "$ws" -- true
usage_error "--pol (abbreviated)" "unknown option '--pol'"
run_cli --allow-process -w "$ws" -- true
usage_error "--allow-process (abbreviated)" "unknown option '--allow-process'"
run_cli --work="$ws" -- true
usage_error "--work=DIR (abbreviated)" "unknown option '--work=$ws'"
run_cli -w "$ws" --bogus -- true
usage_error "an unknown long option" "unknown option '--bogus'"
run_cli -w "$ws" -xyz -- true
usage_error "an unknown short option" "unknown option '-xyz'"
run_cli -w "$ws" - -- true
usage_error "a lone -" "unknown option '-'"

# --- each subcommand takes the options it took ------------------------------------------------
run_cli probe -t 5
usage_error "probe -t 5" "unknown option '-t'"
run_cli probe -t5
usage_error "probe -t5" "unknown option '-t'"
run_cli probe --timeout=5
usage_error "probe --timeout=5" "unknown option '--timeout'"
run_cli probe -t
usage_error "probe -t (no value)" "unknown option '-t'"
run_cli digest -e A=1
usage_error "digest -e" "unknown option '-e'"
run_cli capabilities -c true
usage_error "capabilities -c" "unknown option '-c'"
run_cli plan --audit=x
usage_error "plan --audit=x" "unknown option '--audit'"
run_cli digest --explain
usage_error "digest --explain" "unknown option '--explain'"
run_cli probe -- true
usage_error "probe --" "'--' is only valid for run, not 'probe'"
run_cli probe "-w$ws" --policy=baseline
check "probe -wDIR --policy=X" eq "$RC" 0
run_cli plan --explain "--workspace=$ws"
check "plan --explain --workspace=DIR" contains "$OUT" "$real_ws"
run_cli plan --explain=yes
usage_error "plan --explain=yes" "option --explain takes no value"

# --- check POLICY, --help, --version -----------------------------------------------------------
run_cli check "$SRC/policies/baseline.lua" "-w$ws"
check "check POLICY -wDIR" eq "$RC" 0
run_cli check "--workspace=$ws" "$SRC/policies/baseline.lua"
check "check --workspace=DIR POLICY" eq "$RC" 0
run_cli check "$SRC/policies/baseline.lua" extra
usage_error "check POLICY extra" "unexpected argument 'extra' (use -- before the command)"
run_cli check
usage_error "check without POLICY" "check needs a POLICY"
run_cli -h
check "-h: usage" eq "$RC" 0
check "-h: prints the usage" contains "$OUT" "usage: a3s-sandbox"
run_cli --version
check "--version" eq "$RC" 0
run_cli run --help
usage_error "--help after a subcommand (as before)" "unknown option '--help'"

finish
