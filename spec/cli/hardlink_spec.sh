#!/usr/bin/env bash
# Hard links (README "What baseline enforces"): a pre-planted hard link to an outside file
# is masked (no read, no write through it); new hard links cannot be made inside
# (seccomp denies link/linkat); hard links in node_modules/target that alias a workspace
# credential (.env) are masked too; an alias of an ordinary outside file in a package
# store stays readable (documented residual).
source "$(dirname "$0")/lib.sh"
require_sandbox

mkdir_tmp() { local d; d=$(tmpdir) || exit 1; _tmp_roots+=("$d"); printf -v "$1" '%s' "$d"; }
rnd() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
both() { printf '%s\n%s' "$OUT" "$ERR"; }
nlink() { stat -c %h "$1"; }

mkdir_tmp ws
mkdir_tmp outside
secret="outside-secret-$(rnd)"
# Re-seed in place (same inode) before every leak check, so that an escape which
# changed the outside file cannot make a later "no secret" check pass vacuously.
reseed() { printf '%s' "$secret" >"$outside/secret.txt" && chmod 0644 "$outside/secret.txt"; }
reseed

# --- a pre-planted hard link to an outside secret ---------------------------------------
if ! ln "$outside/secret.txt" "$ws/outside-hardlink" 2>/dev/null; then
  fail "setup: cannot hard-link $outside/secret.txt into the workspace (same filesystem expected)"
  finish
fi
check "setup: outside-hardlink shares the outside inode" test "$(nlink "$ws/outside-hardlink")" -eq 2
run_cli -w "$ws" -c 'cat outside-hardlink'
check "cat outside-hardlink: non-zero" test "$RC" -ne 0
check "cat outside-hardlink: no secret" not_contains "$(both)" "$secret"
run_cli -w "$ws" -c 'printf escaped > outside-hardlink'
check "write outside-hardlink: non-zero" test "$RC" -ne 0
check "write outside-hardlink: the outside file is unchanged" eq "$(cat "$outside/secret.txt")" "$secret"
reseed
run_cli -w "$ws" -c 'printf escaped >> outside-hardlink; truncate -s 0 outside-hardlink; chmod 777 outside-hardlink'
check "append/truncate/chmod outside-hardlink: non-zero" test "$RC" -ne 0
check "append/truncate/chmod outside-hardlink: outside file unchanged" \
  eq "$(cat "$outside/secret.txt")" "$secret"
check "append/truncate/chmod outside-hardlink: outside mode unchanged" \
  eq "$(stat -c %a "$outside/secret.txt")" "644"
reseed
run_cli -w "$ws" -c 'cp outside-hardlink copied.txt; cat copied.txt'
check "copying outside-hardlink: no secret in output" not_contains "$(both)" "$secret"
check "copying outside-hardlink: no secret in a host copy" \
  not_contains "$(cat "$ws/copied.txt" 2>/dev/null)" "$secret"

# A hard link nested in the source tree is found too.
mkdir -p "$ws/src/deep"
ln "$outside/secret.txt" "$ws/src/deep/alias.txt"
reseed
run_cli -w "$ws" -c 'cat src/deep/alias.txt'
check "nested source hard link: no secret" not_contains "$(both)" "$secret"

# --- new hard links cannot be made inside ------------------------------------------------
printf 'link-source-content' >"$ws/link-source"
run_cli -w "$ws" -c 'ln link-source new-hardlink'
check "ln inside: non-zero" test "$RC" -ne 0
check "ln inside: new-hardlink absent on the host" test ! -e "$ws/new-hardlink"
check "ln inside: link-source still has one link" eq "$(nlink "$ws/link-source")" "1"
run_cli -w "$ws" -c 'cat link-source'
check "link-source itself stays readable" eq "$OUT" "link-source-content"
if command -v python3 >/dev/null 2>&1; then
  run_cli -w "$ws" -- python3 -c 'import os; os.link("link-source", "py-hardlink")'
  check "os.link inside: non-zero" test "$RC" -ne 0
  check "os.link inside: py-hardlink absent on the host" test ! -e "$ws/py-hardlink"
fi

# --- credential aliases inside package/build stores --------------------------------------
mkdir_tmp pw
wsecret="workspace-secret-$(rnd)"
printf '%s' "$wsecret" >"$pw/.env"
mkdir -p "$pw/node_modules" "$pw/target"
ln "$pw/.env" "$pw/node_modules/linked-secret"
ln "$pw/.env" "$pw/target/linked-secret"
ordinary="ordinary-outside-$(rnd)"
printf '%s' "$ordinary" >"$outside/ordinary.txt"
chmod 0644 "$outside/ordinary.txt"
ln "$outside/ordinary.txt" "$pw/node_modules/ordinary"
check "setup: .env has three links" eq "$(nlink "$pw/.env")" "3"

run_cli -w "$pw" -c 'printf escaped > node_modules/linked-secret'
check "write node_modules/linked-secret: non-zero" test "$RC" -ne 0
run_cli -w "$pw" -c 'printf escaped > target/linked-secret'
check "write target/linked-secret: non-zero" test "$RC" -ne 0
check "writes through the aliases: .env unchanged" eq "$(cat "$pw/.env")" "$wsecret"
printf '%s' "$wsecret" >"$pw/.env"
run_cli -w "$pw" -c 'cat node_modules/linked-secret; cat target/linked-secret'
check "read node_modules/target aliases of .env: non-zero" test "$RC" -ne 0
check "read node_modules/target aliases of .env: no secret" not_contains "$(both)" "$wsecret"
run_cli -w "$pw" -c 'cat node_modules/ordinary'
check "node_modules/ordinary (alias of an ordinary outside file): exit 0" eq "$RC" 0
check "node_modules/ordinary: readable" eq "$OUT" "$ordinary"

# --- a hard-linked credential inside a protected directory (read-only is not unreadable) --
hw=$(tmpdir)
hsec="linked-in-vscode-$(rnd)"
mkdir -p "$hw/src" "$hw/.vscode"
printf '%s' "$hsec" >"$hw/src/creds"
ln "$hw/src/creds" "$hw/.vscode/alias"
run_cli -w "$hw" -c 'cat .vscode/alias; cat src/creds'
check "a hard link inside .vscode: not readable" not_contains "$(both)" "$hsec"

finish
