#!/usr/bin/env bash
# Exit codes and stream identity (README "CLI"): stdout and stderr stay
# separate and exact, the command's status comes back as the CLI's status (128+N for a
# signal, 126/127 for not executable / not found), the --json object is exact, paths
# with spaces work, argv is passed without re-quoting, and stdin is forwarded.
source "$(dirname "$0")/lib.sh"
require_sandbox

# lib.sh's tmpdir registers its dir for cleanup inside the $(...) subshell, which the
# EXIT trap never sees; register it in this shell instead.
mkdir_tmp() { local d; d=$(tmpdir) || exit 1; _tmp_roots+=("$d"); printf -v "$1" '%s' "$d"; }

# jq (or python3) reads the --json object; a missing reader is a failure, not a skip.
jget() { # JSON FILTER -> raw value ("null" for JSON null)
  if command -v jq >/dev/null 2>&1; then
    printf '%s' "$1" | jq -r "$2"
  else
    echo "# jq is not installed" >&2
    return 1
  fi
}

mkdir_tmp ws

# --- plain streams -------------------------------------------------------------------
run_cli -w "$ws" -c 'printf stdout; printf stderr >&2; exit 17'
check "stdout is exactly the command's stdout" eq "$OUT" "stdout"
check "stderr is exactly the command's stderr" eq "$ERR" "stderr"
check "exit status 17 is preserved" eq "$RC" 17

# --- the same through --json ---------------------------------------------------------
run_cli -w "$ws" --json -c 'printf stdout; printf stderr >&2; exit 17'
J=$OUT
check "--json: the CLI exits with the command's status" eq "$RC" 17
check "--json: stdout holds exactly one JSON object" eq "$(printf '%s' "$J" | jq -c 'type' 2>&1 | tr -d '\n')" '"object"'
check "--json: stdout field" eq "$(jget "$J" .stdout)" "stdout"
check "--json: stderr field" eq "$(jget "$J" .stderr)" "stderr"
check "--json: exit_code 17" eq "$(jget "$J" .exit_code)" "17"
check "--json: signal null" eq "$(jget "$J" .signal)" "null"
check "--json: timed_out false" eq "$(jget "$J" .timed_out)" "false"
check "--json: truncated false" eq "$(jget "$J" .truncated)" "false"
check "--json: total_bytes 12" eq "$(jget "$J" .total_bytes)" "12"
check "--json: captured_bytes 12" eq "$(jget "$J" .captured_bytes)" "12"
check "--json: backend linux-bwrap" eq "$(jget "$J" .backend)" "linux-bwrap"
check "--json: policy baseline" eq "$(jget "$J" .policy)" "baseline"
dig=$(jget "$J" .policy_digest)
check "--json: policy_digest is 64 lower-case hex" \
  bash -c '[[ $1 =~ ^[0-9a-f]{64}$ ]] || { echo "#   got: $1"; exit 1; }' _ "$dig"
run_cli digest -w "$ws"
check "--json: policy_digest equals 'a3s-sandbox digest'" eq "$dig" "$OUT"
check "--json: denials is an empty array" eq "$(jget "$J" '.denials|tojson')" "[]"
check "--json: network_grants is an empty array" eq "$(jget "$J" '.network_grants|tojson')" "[]"
check "--json: duration_ms is a non-negative integer" \
  eq "$(jget "$J" '(.duration_ms|type=="number") and .duration_ms>=0 and (.duration_ms|floor)==.duration_ms')" "true"
check "--json: the CLI itself wrote nothing to stderr" eq "$ERR" ""

# --- a workspace whose path has spaces -----------------------------------------------
mkdir_tmp base
sws="$base/workspace with spaces"
mkdir "$sws"
run_cli -w "$sws" -c "printf path-ok > 'space file.txt'"
check "workspace with spaces: exit 0" eq "$RC" 0
check "workspace with spaces: host file holds path-ok" \
  eq "$(cat "$sws/space file.txt" 2>&1)" "path-ok"
run_cli -w "$sws" -- pwd
check "workspace with spaces: the command starts in the workspace" eq "$OUT" "$(cd "$sws" && pwd -P)"

# --- argv form: no shell, no re-quoting ----------------------------------------------
run_cli -w "$ws" -- printf '%s|' 'a b' '$HOME' '*'
check "argv form keeps every argument exactly" eq "$OUT" 'a b|$HOME|*|'
check "argv form: exit 0" eq "$RC" 0
run_cli -w "$ws" -- printf '%s|' '' '$(touch injected)' ';' '`id`'
check "argv form: empty and shell-looking arguments stay literal" eq "$OUT" '|$(touch injected)|;|`id`|'
check "argv form: no shell ran the arguments" test ! -e "$ws/injected"

# --- stdin is forwarded (run_cli uses </dev/null, so call the CLI directly) ----------
o=$(mktemp) e=$(mktemp)
echo hi | "$A3S" -w "$ws" -- cat >"$o" 2>"$e"
rc=$?
check "stdin: the command reads the CLI's stdin" eq "$(cat "$o")" "hi"
check "stdin: exit 0" eq "$rc" 0
printf 'line1\nline2\n' | "$A3S" -w "$ws" -c 'wc -l' >"$o" 2>"$e"
check "stdin: -c form reads it too" eq "$(tr -d ' ' <"$o")" "2"
rm -f "$o" "$e"

# --- not found / not executable ------------------------------------------------------
run_cli -w "$ws" -- a3s-no-such-program-zz9
check "missing program: exit 127" eq "$RC" 127
run_cli -w "$ws" -c 'a3s-no-such-program-zz9'
check "missing program (-c): exit 127" eq "$RC" 127
printf '#!/bin/sh\necho should-not-run\n' >"$ws/not-exec.sh"
chmod 0644 "$ws/not-exec.sh"
run_cli -w "$ws" -- ./not-exec.sh
check "non-executable file: exit 126" eq "$RC" 126
check "non-executable file: it did not run" not_contains "$OUT" "should-not-run"
run_cli -w "$ws" -c './not-exec.sh'
check "non-executable file (-c): exit 126" eq "$RC" 126

# --- signals and plain statuses ------------------------------------------------------
run_cli -w "$ws" -c 'kill -TERM $$'
check "killed by SIGTERM: exit 143" eq "$RC" 143
run_cli -w "$ws" --json -c 'kill -TERM $$'
check "killed by SIGTERM (--json): signal 15" eq "$(jget "$OUT" .signal)" "15"
check "killed by SIGTERM (--json): exit_code null" eq "$(jget "$OUT" .exit_code)" "null"
check "killed by SIGTERM (--json): CLI exit 143" eq "$RC" 143
run_cli -w "$ws" -c 'exit 3'
check "-c 'exit 3': exit 3" eq "$RC" 3
run_cli -w "$ws" -c 'true'
check "-c 'true': exit 0" eq "$RC" 0

finish
