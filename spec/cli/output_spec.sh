#!/usr/bin/env bash
# Output bounding : one global 100 KiB head+tail budget shared by
# both streams, the truncation marker and its accounting, stream identity kept, lossy UTF-8
# per stream, and the live (non --json) CLI output equal to the rendered capture.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed to read the JSON result"

# Evaluate a Python expression over the JSON in $OUT (d); strip(s) removes the truncation
# markers, marks(s) lists them as (stream, head, tail, total).
jv() { python3 -c 'import json, re, sys
M = r"\n\n\[command (std\w+) truncated by the global output limit: retained the first (\d+) and last (\d+) of (\d+) bytes\]\n\n"
strip = lambda s: re.sub(M, "", s)
marks = lambda s: [(a, int(b), int(c), int(e)) for a, b, c, e in re.findall(M, s)]
d = json.loads(sys.stdin.read()); v = eval(sys.argv[1], {"d": d, "strip": strip, "marks": marks})
print(v if isinstance(v, str) else json.dumps(v))' "$1" <<<"$OUT"; }
# Run the CLI keeping stdout/stderr byte-exact in files: run_raw OUTFILE ERRFILE ARGS...
run_raw() { local o=$1 e=$2; shift 2; "$A3S" "$@" >"$o" 2>"$e" </dev/null; RC=$?; }
# The JSON field (UTF-8 encoded) equals a file's bytes exactly.
field_equals_file() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1], "rb"))
want = d[sys.argv[2]].encode("utf-8")
got = open(sys.argv[3], "rb").read()
if want != got:
    print("#   %s: JSON has %d bytes, CLI printed %d; first difference at %s" % (
        sys.argv[2], len(want), len(got),
        next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))))
    sys.exit(1)
EOF
}

ws=$(tmpdir)
raw=$(tmpdir)

# --- 110000 bytes on stdout: head 51200 + marker + tail 51200 ------------------------
big='dd if=/dev/zero bs=110000 count=1 2>/dev/null | tr "\0" x'
run_cli -w "$ws" --json -c "$big"
check "110000: exit 0" eq "$RC" 0
check "110000: total_bytes 110000" eq "$(jv 'd["total_bytes"]')" 110000
check "110000: captured_bytes 102400" eq "$(jv 'd["captured_bytes"]')" 102400
check "110000: truncated true" eq "$(jv 'd["truncated"]')" true
check "110000: marker with the original's text and accounting" contains "$OUT" \
  "truncated by the global output limit: retained the first 51200 and last 51200 of 110000 bytes"
check "110000: stdout is exactly head + marker + tail" eq "$(jv 'd["stdout"] == "x" * 51200 + "\n\n[command stdout truncated by the global output limit: retained the first 51200 and last 51200 of 110000 bytes]\n\n" + "x" * 51200')" true
check "110000: stderr empty" eq "$(jv 'd["stderr"]')" ""
check "110000: exactly one JSON object on stdout" eq "$(jv 'type(d).__name__')" dict

# Live mode: the CLI's own stdout carries the same bytes as the JSON's stdout field.
run_raw "$raw/json.out" "$raw/json.err" -w "$ws" --json -c "$big"
run_raw "$raw/live.out" "$raw/live.err" -w "$ws" -c "$big"
check "110000 live: exit 0" eq "$RC" 0
check "110000 live: CLI stdout is byte-identical to the JSON stdout" \
  field_equals_file "$raw/json.out" stdout "$raw/live.out"
check "110000 live: CLI stderr is empty like the JSON stderr" \
  field_equals_file "$raw/json.out" stderr "$raw/live.err"

# Same on stderr.
bigerr='dd if=/dev/zero bs=110000 count=1 2>/dev/null | tr "\0" y >&2'
run_raw "$raw/ejson.out" "$raw/ejson.err" -w "$ws" --json -c "$bigerr"
run_raw "$raw/elive.out" "$raw/elive.err" -w "$ws" -c "$bigerr"
OUT=$(cat "$raw/ejson.out")
check "110000 on stderr: marker names stderr" contains "$(jv 'd["stderr"]')" \
  "[command stderr truncated by the global output limit: retained the first 51200 and last 51200 of 110000 bytes]"
check "110000 on stderr live: CLI stderr is byte-identical to the JSON stderr" \
  field_equals_file "$raw/ejson.out" stderr "$raw/elive.err"
check "110000 on stderr live: CLI stdout empty" eq "$(wc -c <"$raw/elive.out")" 0

# --- exactly at the limit: not truncated ------------------------------------------------
run_cli -w "$ws" --json -c 'dd if=/dev/zero bs=102400 count=1 2>/dev/null | tr "\0" x'
check "102400: exit 0" eq "$RC" 0
check "102400: total_bytes 102400" eq "$(jv 'd["total_bytes"]')" 102400
check "102400: captured_bytes 102400" eq "$(jv 'd["captured_bytes"]')" 102400
check "102400: truncated false" eq "$(jv 'd["truncated"]')" false
check "102400: no marker" not_contains "$OUT" "truncated by the global output limit"
check "102400: stdout is the 102400 bytes" eq "$(jv 'd["stdout"] == "x" * 102400')" true

run_cli -w "$ws" --json -c 'dd if=/dev/zero bs=102401 count=1 2>/dev/null | tr "\0" x'
check "102401: truncated true" eq "$(jv 'd["truncated"]')" true
check "102401: marker accounts for 102401 bytes" contains "$OUT" "of 102401 bytes]"

# --- both streams over budget: stream identity kept ------------------------------------
run_cli -w "$ws" --json -c 'head -c 71680 /dev/zero | tr "\0" o; head -c 71680 /dev/zero | tr "\0" e >&2'
check "70K+70K: exit 0" eq "$RC" 0
check "70K+70K: total_bytes 143360" eq "$(jv 'd["total_bytes"]')" 143360
check "70K+70K: captured_bytes 102400" eq "$(jv 'd["captured_bytes"]')" 102400
check "70K+70K: truncated" eq "$(jv 'd["truncated"]')" true
check "70K+70K: stdout marked" contains "$(jv 'd["stdout"]')" "[command stdout truncated by the global output limit: retained the first "
check "70K+70K: stderr marked" contains "$(jv 'd["stderr"]')" "[command stderr truncated by the global output limit: retained the first "
check "70K+70K: stdout holds only stdout bytes" eq "$(jv 'sorted(set(strip(d["stdout"])))')" '["o"]'
check "70K+70K: stderr holds only stderr bytes" eq "$(jv 'sorted(set(strip(d["stderr"])))')" '["e"]'
check "70K+70K: one marker per stream, each naming its own stream" eq \
  "$(jv '[m[0] for m in marks(d["stdout"])] + [m[0] for m in marks(d["stderr"])]')" '["stdout", "stderr"]'
check "70K+70K: each stream's total is 71680" eq \
  "$(jv '[m[3] for m in marks(d["stdout"]) + marks(d["stderr"])]')" '[71680, 71680]'
check "70K+70K: retained head+tail adds up to the budget" eq \
  "$(jv 'sum(m[1] + m[2] for m in marks(d["stdout"]) + marks(d["stderr"]))')" 102400
check "70K+70K: the retained counts match the rendered bytes" eq \
  "$(jv '[len(strip(d[k])) == sum(m[1] + m[2] for m in marks(d[k])) for k in ("stdout", "stderr")]')" '[true, true]'

# --- a policy's output ceiling --------------------------------------------------------------
pol=$(tmpdir)
printf 'local plan = a3s.extend("baseline", "small-output")\nplan:limits{ output_bytes = 4096 }\nreturn plan\n' >"$pol/small.lua"
run_cli -w "$ws" -p "$pol/small.lua" --json -c 'dd if=/dev/zero bs=20000 count=1 2>/dev/null | tr "\0" x'
check "policy ceiling 4096: exit 0" eq "$RC" 0
check "policy ceiling 4096: total 20000, captured 4096, truncated" eq \
  "$(jv '[d["total_bytes"], d["captured_bytes"], d["truncated"]]')" '[20000, 4096, true]'
check "policy ceiling 4096: head 2048 + marker + tail 2048" eq "$(jv 'd["stdout"] == "x" * 2048 + "\n\n[command stdout truncated by the global output limit: retained the first 2048 and last 2048 of 20000 bytes]\n\n" + "x" * 2048')" true

# --- invalid UTF-8 is replaced per stream ----------------------------------------------
run_cli -w "$ws" --json -c "printf '\377o\376'; printf '\200e' >&2"
check "invalid UTF-8: exit 0" eq "$RC" 0
check "invalid UTF-8: stdout is U+FFFD o U+FFFD" eq "$(jv 'd["stdout"] == "\ufffdo\ufffd"')" true
check "invalid UTF-8: stderr is U+FFFD e" eq "$(jv 'd["stderr"] == "\ufffde"')" true
check "invalid UTF-8: total_bytes counts raw bytes (5)" eq "$(jv 'd["total_bytes"]')" 5
check "invalid UTF-8: the JSON text itself is valid UTF-8" python3 -c 'import sys; sys.stdin.buffer.read().decode("utf-8")' <<<"$OUT"

finish
