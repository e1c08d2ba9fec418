#!/usr/bin/env bash
# The platforms (README "Platforms", THREAT_MODEL.md "Platforms", backends/macos/README.md):
# `plan --backend macos-seatbelt` prints the Seatbelt profile of a hostile workspace, and
# the SBPL checker (spec/sbpl/sbpl_check.py) finds every hostile name denied exactly; the
# macOS backend runs nothing here and says why; an unknown platform is refused by name;
# the build stops for a platform without a backend; and the capability matrix of
# THREAT_MODEL.md matches what `capabilities` reports.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip_all "python3 is needed for the SBPL checker"
src=${A3S_SOURCE_DIR:?A3S_SOURCE_DIR must point at the source tree}
checker=$src/spec/sbpl/sbpl_check.py

jv() { python3 -c 'import json,sys
d = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    d = d[k]
print(json.dumps(d) if isinstance(d, (dict, list, bool)) else d)' "$1"; }

# --- the profile of a hostile workspace ------------------------------------------------------
ws=$(tmpdir)
ws=$(cd "$ws" && pwd -P)
mkdir "$ws/.git" "$ws/src"
hostile=('.env"q' '.env\b' $'.env\n(allow default)' '.env[x]*(|).+' 'src/.Env.local'
         '.ENV") (allow default) (allow network*) ;')
for n in "${hostile[@]}"; do printf 'secret\n' >"$ws/$n"; done
out=$(tmpdir)
"$A3S" plan --backend macos-seatbelt -w "$ws" >"$out/profile.sb" 2>"$out/err"
rc=$?
check "plan --backend macos-seatbelt exits 0" eq "$rc" 0
check "the profile starts with (version 1)" eq "$(head -n1 "$out/profile.sb")" "(version 1)"
run_cli plan --json --backend macos-seatbelt -w "$ws"
check "plan --json --backend macos-seatbelt: the backend" eq "$(jv backend <<<"$OUT")" macos-seatbelt
scratch=$(jv roots.scratch <<<"$OUT")
printf '%s' "$OUT" | python3 -c 'import json,sys
sys.stdout.buffer.write(json.load(sys.stdin)["sbpl_profile"].encode("utf-8", "surrogateescape"))' \
  >"$out/member.sb"
check "plan --json carries the same profile as sbpl_profile" cmp -s "$out/profile.sb" "$out/member.sb"
args=(--workspace "$ws" --scratch "$scratch" --writable "$ws/src/main.c" --writable "$scratch/x"
      --protected "$ws/.git" --protected "$ws/.GIT/hooks/pre-commit" --protected "$ws/.Idea")
for n in "${hostile[@]}"; do args+=(--secret "$ws/$n"); done
args+=(--secret "$ws/src/made-later/.env.local")
res=$(python3 "$checker" "$out/profile.sb" "${args[@]}" 2>&1)
check "the SBPL checker passes the profile: every hostile name denied, writes only in the workspace and scratch" \
  eq "$res" "ok: $out/profile.sb"
# The checker is not vacuous here: the same names unguarded fail it.
sed '/^; Secrets and masks/,$d' "$out/profile.sb" >"$out/unmasked.sb"
res=$(python3 "$checker" "$out/unmasked.sb" "${args[@]}" 2>&1)
check "without its secrets section the profile fails the checker" contains "$res" "allowed on secret"

# --- nothing runs elsewhere than macOS; refusals name the reason ----------------------------
run_cli plan --backend macos-seatbelt -w "$ws" --grant example.com:443
check "a grant is refused for macos-seatbelt (125)" eq "$RC" 125
check "  and the refusal says why" contains "$ERR" "network grants are not supported by macos-seatbelt"
run_cli capabilities --backend macos-seatbelt -w "$ws"
check "capabilities --backend macos-seatbelt exits 0" eq "$RC" 0
check "  not usable here" eq "$(jv boundary_usable <<<"$OUT")" false
check "  because it is macOS only" contains "$(jv reason <<<"$OUT")" "macOS only"
run_cli --backend macos-seatbelt -w "$ws" -c 'touch ran'
check "run takes no --backend (125)" eq "$RC" 125
check "  and nothing ran" test ! -e "$ws/ran"
run_cli plan --backend windows -w "$ws"
check "plan --backend windows is refused (125)" eq "$RC" 125
check "  as an unsupported platform, naming the backends this build knows" \
  contains "$ERR" "unsupported platform or unknown backend 'windows': this build knows"
known=$(sed -n "s/.*this build knows \([^(]*\) (.*/\1/p" <<<"$ERR" | tr -d ',')
check "  the known backends are linux-bwrap, macos-seatbelt, process-host" \
  eq "$known" "linux-bwrap macos-seatbelt process-host"
run_cli capabilities --backend process-host -w "$ws"
check "process-host by name without the opt-in is refused (125)" eq "$RC" 125
check "  naming the opt-in" contains "$ERR" "--allow-process-host"

# --- the build refuses other platforms before it looks for a compiler -------------------------
# (A source tree only: the unprivileged mode stages the docs and specs, not the build.)
if command -v cmake >/dev/null && [ -f "$src/CMakeLists.txt" ]; then
  b=$(tmpdir)
  res=$(cmake -S "$src" -B "$b/build" -DCMAKE_SYSTEM_NAME=Windows 2>&1)
  rc=$?
  check "configuring for Windows fails" test "$rc" -ne 0
  check "  naming the unsupported platform" contains "$(tr -s ' \n' '  ' <<<"$res")" \
    "unsupported platform 'Windows': it builds on Linux"
fi

# --- the capability matrix of THREAT_MODEL.md ------------------------------------------------
run_cli capabilities -w "$ws"
linux=$OUT
check "capabilities (the host's own backend) exits 0" eq "$RC" 0
run_cli capabilities --backend process-host --allow-process-host -w "$ws"
hostrep=$OUT
check "capabilities --backend process-host --allow-process-host exits 0" eq "$RC" 0
check "  and warns that no boundary is in force" contains "$ERR" "NO LOCAL SANDBOX BOUNDARY"
run_cli capabilities --backend macos-seatbelt -w "$ws"
macrep=$OUT
res=$(python3 - "$src/THREAT_MODEL.md" "$known" "$linux" "$hostrep" "$macrep" <<'EOF'
import json, re, sys
doc, known, reports = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
lines = open(doc, encoding="utf-8").read().split("\n")
start = lines.index("## Platforms: what each backend enforces")
rows, header = {}, None
for line in lines[start:]:
    if line.startswith("## ") and line != lines[start]:
        break
    if not line.startswith("|") or set(line) <= set("|-"):
        continue
    cells = [c.strip() for c in line.strip("|").split("|")]
    if header is None:
        header = cells
        continue
    rows[cells[0].strip("`")] = dict(zip(header[1:], cells[1:]))
problems = []
if header is None:
    sys.exit("no table in the Platforms section")
if header[0] != "capability" or header[1:] != known + ["windows"]:
    problems.append("columns %s, not the known backends %s and windows" % (header[1:], known))
lin, host, mac = (json.loads(r) for r in reports)
keys = set(lin["capabilities"])
if set(rows) != keys:
    problems.append("rows %s differ from the capability keys %s" % (sorted(rows), sorted(keys)))
allowed = {"linux-bwrap": {"yes", "no", "host"}, "process-host": {"yes", "no", "host"},
           "macos-seatbelt": {"profile", "no", "unverified"}, "windows": {"unsupported"}}
for k, r in rows.items():
    for col, v in r.items():
        if v not in allowed.get(col, ()):
            problems.append("%s / %s: value %r is not one of %s" % (k, col, v, sorted(allowed.get(col, ()))))

def against(col, rep):
    for k, r in rows.items():
        v, got = r.get(col), rep["capabilities"].get(k)
        if v == "yes" and got is not True or v == "no" and got is not False:
            problems.append("%s / %s: the table says %s, capabilities says %s" % (k, col, v, got))

if lin["backend"] != "linux-bwrap":
    problems.append("the host's own backend is %s" % lin["backend"])
elif lin["boundary_usable"]:
    against("linux-bwrap", lin)
else:
    print("# SKIP linux-bwrap column: the boundary is not usable here: %s" % lin.get("reason"))
against("process-host", host)
for k, r in rows.items():  # macOS: what it never provides is reported false
    if r.get("macos-seatbelt") == "no" and mac["capabilities"].get(k) is not False:
        problems.append("%s / macos-seatbelt: the table says no, its report says %s" % (k, mac["capabilities"].get(k)))
    if r.get("macos-seatbelt") == "profile" and k not in ("network_deny_all", "readonly_host_root"):
        problems.append("%s / macos-seatbelt: no profile check stands behind it" % k)
print("\n".join(problems) if problems else "ok")
EOF
)
check "the THREAT_MODEL.md matrix matches the backends and their capabilities" eq "$(grep -v '^# SKIP' <<<"$res")" ok
grep '^# SKIP' <<<"$res"

finish
