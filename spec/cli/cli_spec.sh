#!/usr/bin/env bash
# The CLI surface (README "CLI"): digest, capabilities, plan, run (argv and
# -c forms), --version/--help, check, exit statuses, and refusals where nothing runs.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed to read the JSON output"

SRC=${A3S_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
jv() { python3 -c 'import json,sys
d = json.loads(sys.stdin.read()); v = eval(sys.argv[1], {"d": d})
print(v if isinstance(v, str) else json.dumps(v))' "$1" <<<"$OUT"; }
matches() { [[ $1 =~ $2 ]] || { echo "#   '${1:0:200}' does not match /$2/"; return 1; }; }

ws=$(tmpdir)
ws2=$(tmpdir)

# --- digest -------------------------------------------------------------------------------
run_cli digest -w "$ws"
check "digest: exit 0" eq "$RC" 0
check "digest: 64 lower-case hex" matches "$OUT" '^[0-9a-f]{64}$'
d1=$OUT
run_cli digest -w "$ws"
check "digest: identical across two runs" eq "$OUT" "$d1"
run_cli digest -w "$ws2"
check "digest: identical across two workspaces" eq "$OUT" "$d1"
run_cli digest -p baseline -w "$ws"
check "digest: -p baseline is the default" eq "$OUT" "$d1"

# --- capabilities --------------------------------------------------------------------------
run_cli capabilities -w "$ws"
check "capabilities: exit 0" eq "$RC" 0
check "capabilities: is JSON with a string backend" eq "$(jv 'type(d["backend"]).__name__')" str
check "capabilities: backend is linux-bwrap" eq "$(jv 'd["backend"]')" linux-bwrap
check "capabilities: network_deny_all true" eq "$(jv 'd["capabilities"]["network_deny_all"]')" true
check "capabilities: unavailable is an array" eq "$(jv 'type(d["unavailable"]).__name__')" list
check "capabilities: unavailable lists every false capability" eq \
  "$(jv 'sorted(k for k, v in d["capabilities"].items() if v is False) == sorted(d["unavailable"])')" true
check "capabilities: policy_digest equals digest" eq "$(jv 'd.get("policy_digest")')" "$d1"
# Mediation is claimed only after a live proof through the relay and the mediator.
check "capabilities: mediated_http proven live" eq "$(jv 'd["capabilities"]["mediated_http"]')" true
check "capabilities: mediated_socks proven live" eq "$(jv 'd["capabilities"]["mediated_socks"]')" true
check "capabilities: identity reported" \
  eq "$(jv 'd["identity"]')" "$([ "$(id -u)" -eq 0 ] && echo mapped || echo caller)"
A3S_SANDBOX_RELAY=/nonexistent run_cli capabilities -w "$ws"
check "capabilities without a relay: mediated_http false" \
  eq "$(jv 'd["capabilities"]["mediated_http"]')" false

# --- plan -------------------------------------------------------------------------------------
run_cli plan -w "$ws"
check "plan: exit 0" eq "$RC" 0
check "plan: bwrap_argv is an array" eq "$(jv 'type(d["bwrap_argv"]).__name__')" list
check "plan: bwrap_argv starts with a path ending in bwrap" matches "$(jv 'd["bwrap_argv"][0]')" '^/.*bwrap$'
check "plan: policy_digest equals digest" eq "$(jv 'd["policy_digest"]')" "$d1"
check "plan: the argv unshares the network" eq "$(jv '"--unshare-net" in d["bwrap_argv"]')" true
check "plan: names the workspace" eq "$(jv 'd["roots"]["workspace"]')" "$(cd "$ws" && pwd -P)"

# --- run ----------------------------------------------------------------------------------------
run_cli -w "$ws" -- printf %s cli-ok
check "run argv: exit 0" eq "$RC" 0
check "run argv: prints cli-ok" eq "$OUT" cli-ok
run_cli run -w "$ws" -- printf %s cli-ok-run
check "explicit 'run' subcommand works" eq "$OUT" cli-ok-run
run_cli -w "$ws" -- printf '%s|%s' '$HOME;echo x' 'a  b'
check "argv is not re-quoted or shell-expanded" eq "$OUT" '$HOME;echo x|a  b'
run_cli -w "$ws" -c 'printf %s "$0"; exit 17'
check "-c: exit status passed through (17)" eq "$RC" 17
run_cli -w "$ws" -c 'kill -9 $$'
check "signal N gives 128+N (137)" eq "$RC" 137
run_cli -w "$ws" --json -c 'kill -9 $$'
# bwrap's init reports a child killed by signal N as exit status 128+N, so the JSON may
# carry either form; it must carry one of them.
check "signal: --json reports signal 9 or exit status 137" eq \
  "$(jv '[d["signal"], d["exit_code"]] in ([9, None], [None, 137])')" true
run_cli -w "$ws" -- /nonexistent/a3s-no-such-program
check "program not found: 127" eq "$RC" 127
printf 'data' >"$ws/not-exec"
chmod 0644 "$ws/not-exec"
run_cli -w "$ws" -- "$(cd "$ws" && pwd -P)/not-exec"
check "program not executable: 126" eq "$RC" 126
# The command is found and started as GNU libc's execvp does it, whatever C library the
# launcher is linked with: a file without a "#!" line runs with /bin/sh, by path and found
# in PATH; a match that may not be executed is passed over for a later one, and is 126
# when there is none.
printf 'echo "no-shebang $1"\n' >"$ws/plain-script"
chmod 0755 "$ws/plain-script"
wsr=$(cd "$ws" && pwd -P)
run_cli -w "$ws" -- "$wsr/plain-script" one
check "a script without #! runs with /bin/sh (by path)" eq "$OUT" "no-shebang one"
run_cli -w "$ws" -e "PATH=/nonexistent:$wsr:/usr/bin:/bin" -- plain-script two
check "... and found in PATH ($OUT)" eq "$OUT" "no-shebang two"
mkdir -p "$ws/denied"
printf '#!/bin/sh\necho wrong\n' >"$ws/denied/echo"
chmod 0644 "$ws/denied/echo"
run_cli -w "$ws" -e "PATH=$wsr/denied:/usr/bin:/bin" -- echo right
check "a PATH match that may not run is passed over ($OUT)" eq "$OUT" right
run_cli -w "$ws" -e "PATH=$wsr/denied" -- echo right
check "... and is 126 when nothing else matches" eq "$RC" 126
run_cli -w "$ws" -e "PATH=$wsr/denied" -- a3s-no-such-program
check "nothing in PATH: 127" eq "$RC" 127
check "the CLI forwards its stdin" eq "$(printf fwd-in | "$A3S" -w "$ws" -- cat 2>/dev/null)" fwd-in
check "default workspace is the current directory" eq \
  "$(cd "$ws" && "$A3S" -c 'pwd -P; touch made-in-cwd' 2>/dev/null </dev/null)" "$(cd "$ws" && pwd -P)"
check "default workspace is writable" test -e "$ws/made-in-cwd"

run_cli -w "$ws" --json -- printf %s json-ok
check "--json: one object, nothing else on stdout" eq "$(jv 'd["stdout"]')" json-ok
check "--json: result fields present" eq "$(jv 'sorted(d)')" \
  '["backend", "captured_bytes", "denials", "duration_ms", "execution_id", "exit_code", "identity", "network_grants", "output_closed", "policy", "policy_digest", "signal", "stderr", "stdout", "timed_out", "total_bytes", "truncated"]'
check "--json: policy baseline, digest, backend" eq "$(jv '[d["policy"], d["policy_digest"], d["backend"], d["network_grants"]]')" \
  "[\"baseline\", \"$d1\", \"linux-bwrap\", []]"

# --- --version, --help ----------------------------------------------------------------------
run_cli --version
check "--version: exit 0" eq "$RC" 0
check "--version: prints a version" matches "$OUT" '^a3s-sandbox [0-9]+\.[0-9]+\.[0-9]+'
run_cli --help
check "--help: exit 0" eq "$RC" 0
check "--help: usage" contains "$OUT" "usage: a3s-sandbox"

# --- check ----------------------------------------------------------------------------------
run_cli check "$SRC/policies/baseline.lua"
check "check baseline.lua: exit 0" eq "$RC" 0
check "check baseline.lua: ok" contains "$OUT" "ok"
pol=$(tmpdir)
printf 'return {\n  this is not lua\n' >"$pol/broken-syntax.lua"
run_cli check "$pol/broken-syntax.lua"
check "check broken policy: exit 125" eq "$RC" 125
check "check broken policy: names the file" contains "$ERR" "broken-syntax.lua"
printf 'error("policy blew up on purpose")\n' >"$pol/broken-runtime.lua"
run_cli check "$pol/broken-runtime.lua"
check "check failing policy: exit 125" eq "$RC" 125
check "check failing policy: names the file" contains "$ERR" "broken-runtime.lua"
run_cli check "$pol/missing-policy.lua"
check "check missing policy: exit 125" eq "$RC" 125
check "check missing policy: names the file" contains "$ERR" "missing-policy.lua"
run_cli -p "$pol/broken-runtime.lua" -w "$ws" -c 'touch ran-broken-policy'
check "run with a failing policy: 125" eq "$RC" 125
check "run with a failing policy: nothing ran" test ! -e "$ws/ran-broken-policy"

# --- refusals: 125, nothing ran ---------------------------------------------------------------
# A wildcard grant is refused before anything runs (grants themselves: grants_spec.sh).
run_cli --grant '*.example.com' -w "$ws" -c 'touch ran-grant'
check "--grant wildcard: refused with 125" eq "$RC" 125
check "--grant wildcard: error message" contains "$ERR" "a3s-sandbox: "
check "--grant wildcard: nothing ran" test ! -e "$ws/ran-grant"
run_cli -w "$ws" -t 0 -c 'touch ran-t0'
check "-t 0: 125" eq "$RC" 125
check "-t 0: nothing ran" test ! -e "$ws/ran-t0"
run_cli -w "$ws" --bogus-option -c 'touch ran-bogus'
check "unknown option: 125" eq "$RC" 125
check "unknown option: nothing ran" test ! -e "$ws/ran-bogus"
run_cli -w "$ws/not-exec" -c 'true'
check "workspace not a directory: 125" eq "$RC" 125
check "workspace not a directory: says so" contains "$ERR" "not a directory"
run_cli -w "$ws/does-not-exist" -c 'true'
check "missing workspace: 125" eq "$RC" 125
run_cli -w "$ws" -p no-such-policy-a3s -c 'touch ran-nopolicy'
check "unknown policy name: 125" eq "$RC" 125
check "unknown policy name: nothing ran" test ! -e "$ws/ran-nopolicy"
run_cli -w "$ws" -c ''
check "empty command: 125" eq "$RC" 125
env A3S_SANDBOX_BWRAP=/nonexistent/bwrap "$A3S" -w "$ws" -c 'touch ran-nobwrap' >/dev/null 2>&1 </dev/null
RC=$?
check "unusable bwrap: 125 (fail closed)" eq "$RC" 125
check "unusable bwrap: nothing ran on the host" test ! -e "$ws/ran-nobwrap"

# A -c command that starts with '-' is the command, never an option of the shell.
run_cli -w "$ws" -c '--version'
check "-c '--version' runs the command '--version' (127), not bash --version" eq "$RC" 127
check "-c '--version': bash did not print its version" not_contains "$OUT" "GNU bash"
finish
