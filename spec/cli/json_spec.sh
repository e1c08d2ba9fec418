#!/usr/bin/env bash
# --json prints exactly one JSON object on stdout, whatever happens: a refused run (usage
# error, bad policy, missing workspace, refused grant digest, interrupted) prints
# {"error": {"code", "message"}} with the usual exit status and stderr message. And JSON
# never drops or corrupts bytes that are not UTF-8: a workspace whose name has 0xff bytes
# shows up in `plan` and in the audit lines as {"base64": ...} of the exact path.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed to read the JSON output"

# Evaluate a Python expression over the single JSON object on $OUT (d); b(v) is the bytes
# of a string or of a {"base64": ...} object. Fails unless stdout is exactly one object.
jv() {
  python3 -c 'import base64, json, os, sys
s = sys.stdin.read()
d, end = json.JSONDecoder().raw_decode(s.lstrip())
if not isinstance(d, dict) or s.lstrip()[end:].strip():
    sys.exit("not exactly one JSON object on stdout: %r" % s[:300])
def b(v):
    if isinstance(v, str):
        return os.fsencode(v)
    assert isinstance(v, dict) and list(v) == ["base64"], v
    return base64.b64decode(v["base64"], validate=True)
v = eval(sys.argv[1], {"d": d, "b": b, "fs": os.fsencode, "arg": sys.argv[2:]})
print(v if isinstance(v, str) else json.dumps(v))' "$@" <<<"$OUT"
}

# A refusal: exit 125, one error object with this code and a message, and the message on
# stderr as without --json.
refused() {
  local what=$1 code=$2
  check "$what: exit 125" eq "$RC" 125
  check "$what: one object with error.code $code" eq "$(jv 'd["error"]["code"]')" "$code"
  check "$what: error.message is the stderr message" eq \
    "$(jv '"a3s-sandbox: " + d["error"]["message"] in arg[0]' "$ERR")" true
  check "$what: nothing but the error object" eq "$(jv 'sorted(d) + sorted(d["error"])')" \
    '["error", "code", "message"]'
}

ws=$(tmpdir)

# --- refusals -----------------------------------------------------------------------
run_cli --json -w "$ws" -p a3s-no-such-policy -- true
refused "unknown policy" policy

bad=$(tmpdir)
printf 'this is not lua (\n' >"$bad/broken.lua"
run_cli --json -w "$ws" -p "$bad/broken.lua" -- true
refused "a policy that does not load" policy

run_cli --json -w "$ws/does-not-exist" -- true
refused "a workspace that does not exist" invalid

run_cli --json -w "$ws" --grant example.org:443 \
  --grant-digest 0000000000000000000000000000000000000000000000000000000000000000 \
  -c "touch $ws/ran"
refused "a refused --grant-digest" policy
check "a refused --grant-digest: nothing ran" test ! -e "$ws/ran"

run_cli --json --no-such-option -- true
refused "an unknown option after --json" usage
run_cli -w "$ws" -t 5 --json --no-such-option -- true
refused "an unknown option after run options and --json" usage
run_cli run --json -w "$ws"
refused "no command" usage
run_cli --json --grant-digest abc -- true
refused "--grant-digest without --grant" usage
run_cli --json -t 0 -- true
refused "an invalid timeout" usage

run_cli --json -w "$ws" --audit "$ws" -- true
refused "an audit file that is a directory" invalid

run_cli plan --json -w "$ws/does-not-exist"
refused "plan --json with a missing workspace" invalid
run_cli capabilities --json -p a3s-no-such-policy
refused "capabilities --json with an unknown policy" policy

# Without --json (or after --): nothing on stdout, as before.
run_cli -w "$ws" -p a3s-no-such-policy -- true
check "no --json: exit 125" eq "$RC" 125
check "no --json: stdout stays empty" eq "$OUT" ""
run_cli -w "$ws" -- --json
check "--json after --: a command argument, not the option" eq "$OUT" ""

# --- an interrupted run: SIGTERM to the CLI while the command sleeps ------------------
"$A3S" --json -w "$ws" -c 'touch started; sleep 30' </dev/null >"$ws.out" 2>"$ws.err" &
pid=$!
for _ in $(seq 250); do [ -e "$ws/started" ] && break; sleep 0.02; done
kill -TERM "$pid"
wait "$pid"
RC=$? OUT=$(cat "$ws.out") ERR=$(cat "$ws.err")
rm -f "$ws.out" "$ws.err" "$ws/started"
check "SIGTERM: exit 143" eq "$RC" 143
check "SIGTERM: one object with error.code aborted" eq "$(jv 'd["error"]["code"]')" aborted
check "SIGTERM: the message says interrupted" contains "$(jv 'd["error"]["message"]')" \
  "interrupted"
check "SIGTERM: the message is on stderr too" contains "$ERR" "interrupted"

# --- a run that works: still exactly one object ---------------------------------------
run_cli --json -w "$ws" -- printf ok
check "a run: exit 0" eq "$RC" 0
check "a run: one result object" eq "$(jv 'd["stdout"]')" ok

# --- paths that are not UTF-8 ---------------------------------------------------------
parent=$(tmpdir)
plain="$parent/wsab"
odd="$parent/ws$(printf '\xff\xfe')"
mkdir "$plain" "$odd"

run_cli plan -w "$plain"
n_plain=$(jv 'len(d["bwrap_argv"])')
n_plain_mounts=$(jv 'len(d["setup_mounts"])')
run_cli plan -w "$odd"
check "plan, 0xff workspace: exit 0" eq "$RC" 0
check "plan, 0xff workspace: as many bwrap_argv entries as a plain name" eq \
  "$(jv 'len(d["bwrap_argv"])')" "$n_plain"
check "plan, 0xff workspace: as many setup_mounts entries as a plain name" eq \
  "$(jv 'len(d["setup_mounts"])')" "$n_plain_mounts"
check "plan, 0xff workspace: roots.workspace decodes to the exact path" eq \
  "$(jv 'b(d["roots"]["workspace"]) == fs(arg[0])' "$odd")" true
check "plan, 0xff workspace: it is a base64 object" eq \
  "$(jv 'list(d["roots"]["workspace"])')" '["base64"]'
check "plan, 0xff workspace: setup_mounts holds the exact path (bind or mount point)" eq \
  "$(jv '[b(a) for a in d["setup_mounts"]].count(fs(arg[0])) >= 1' "$odd")" true
check "plan, 0xff workspace: the writable rule keeps its path" eq \
  "$(jv 'any(b(r["path"]) == fs(arg[0]) for r in d["fs"])' "$odd")" true
run_cli plan --explain -w "$odd"
check "plan --explain, 0xff workspace: the path is shown as its bytes" contains "$OUT" \
  "workspace  $odd"

audit="$(tmpdir)/audit.jsonl"
run_cli --json --audit "$audit" -w "$odd" -- true
check "run, 0xff workspace: exit 0" eq "$RC" 0
check "run, 0xff workspace: one result object" eq "$(jv 'd["exit_code"]')" 0
check "audit, 0xff workspace: every line is a JSON object whose workspace is the exact path" \
  python3 - "$audit" "$odd" <<'EOF'
import base64, json, os, sys
lines = open(sys.argv[1], "rb").read().splitlines()
want = os.fsencode(sys.argv[2])
assert len(lines) >= 2, lines
for l in lines:
    d = json.loads(l.decode("utf-8"))
    w = d["workspace"]
    assert list(w) == ["base64"] and base64.b64decode(w["base64"]) == want, l
EOF
finish
