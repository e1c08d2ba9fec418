#!/usr/bin/env bash
# Symlinks (README "What baseline enforces": a symlink at a protected or secret path
# fails closed): a workspace symlink to an outside dir is not a way out; a symlink to an
# outside secret in a hidden place leaks nothing, whether planted before a run, between
# runs or during one; a symlink at a protected or secret path refuses the run (125).
source "$(dirname "$0")/lib.sh"
require_sandbox

# lib.sh's tmpdir registers its dir for cleanup inside the $(...) subshell, which the
# EXIT trap never sees; register it in this shell instead.
mkdir_tmp() { local d; d=$(tmpdir) || exit 1; _tmp_roots+=("$d"); printf -v "$1" '%s' "$d"; }
rnd() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
both() { printf '%s\n%s' "$OUT" "$ERR"; }

mkdir_tmp ws
mkdir_tmp outside
secret="outside-secret-$(rnd)"
# Re-seed the outside secret before every leak check, so that an escape which deleted
# or changed it cannot make a later "no secret in the output" check pass vacuously.
reseed() { printf '%s' "$secret" >"$outside/secret.txt" && chmod 0644 "$outside/secret.txt"; }
reseed

# --- a symlink to an outside directory ------------------------------------------------
ln -s "$outside" "$ws/outside-link"
run_cli -w "$ws" -c 'printf escaped > outside-link/symlink-escape'
check "write through outside-link: non-zero" test "$RC" -ne 0
check "write through outside-link: the outside file was not created" \
  test ! -e "$outside/symlink-escape"
reseed
run_cli -w "$ws" -c 'cat outside-link/secret.txt; ls -A outside-link/'
check "read through outside-link: no secret" not_contains "$(both)" "$secret"
run_cli -w "$ws" -c 'rm -f outside-link/secret.txt'
check "rm through outside-link: the outside file survives" eq "$(cat "$outside/secret.txt")" "$secret"

# --- a symlink to an outside secret file in a hidden place -----------------------------
# (a) under the host temp dir (/tmp), (b) under the caller's HOME (a fake one we pass).
ln -s "$outside/secret.txt" "$ws/alias"
reseed
run_cli -w "$ws" -c 'cat alias'
check "cat alias (-> /tmp secret): non-zero" test "$RC" -ne 0
check "cat alias (-> /tmp secret): no secret" not_contains "$(both)" "$secret"
run_cli -w "$ws" -c 'printf overwritten > alias'
check "write alias (-> /tmp secret): non-zero" test "$RC" -ne 0
check "write alias (-> /tmp secret): outside secret unchanged" \
  eq "$(cat "$outside/secret.txt")" "$secret"
mkdir_tmp fh
hsecret="home-secret-$(rnd)"
mkdir "$fh/.ssh"
printf '%s' "$hsecret" >"$fh/.ssh/id_ed25519"
printf '%s' "$hsecret" >"$fh/plain-notes.txt"
ln -s "$fh/.ssh/id_ed25519" "$ws/key-alias"
ln -s "$fh/plain-notes.txt" "$ws/notes-alias"
ln -s "$fh" "$ws/home-alias"
HOME=$fh run_cli -w "$ws" -c 'cat key-alias; cat notes-alias; ls -A home-alias/; cat home-alias/.ssh/id_ed25519'
check "symlinks into the caller's HOME: non-zero" test "$RC" -ne 0
check "symlinks into the caller's HOME: no secret" not_contains "$(both)" "$hsecret"

# --- TOCTOU: symlink planted by the host between two runs -------------------------------
reseed
printf 'ordinary' >"$ws/decoy.txt"
run_cli -w "$ws" -c 'cat decoy.txt'
check "decoy before the swap: prints ordinary" eq "$OUT" "ordinary"
rm "$ws/decoy.txt"
ln -s "$outside/secret.txt" "$ws/decoy.txt"
run_cli -w "$ws" -c 'cat decoy.txt'
check "decoy after the swap: non-zero" test "$RC" -ne 0
check "decoy after the swap: no secret" not_contains "$(both)" "$secret"
check "decoy after the swap: the secret is unchanged" eq "$(cat "$outside/secret.txt")" "$secret"

# --- symlink swapped in by the host while the command runs ------------------------------
reseed
printf 'ordinary-race' >"$ws/race.txt"
o=$(mktemp) e=$(mktemp)
"$A3S" -w "$ws" -t 10 -c 'sleep 0.4; cat race.txt' >"$o" 2>"$e" </dev/null &
cp=$!
sleep 0.08
ln -s "$outside/secret.txt" "$ws/race.tmp" && mv -fT "$ws/race.tmp" "$ws/race.txt"
wait "$cp"
RC=$? OUT=$(cat "$o") ERR=$(cat "$e")
rm -f "$o" "$e"
check "in-command swap: the host really swapped race.txt" test -L "$ws/race.txt"
check "in-command swap: no secret in the output" not_contains "$(both)" "$secret"
if [ "$RC" -eq 0 ]; then
  check "in-command swap: exit 0 means the ordinary content" contains "$OUT" "ordinary-race"
else
  check "in-command swap: a failure is a read failure, not a setup refusal" test "$RC" -ne 125
fi

# --- symlinks the guest plants itself ---------------------------------------------------
reseed
run_cli -w "$ws" -c "ln -s '$outside/secret.txt' guest-link && cat guest-link"
check "guest-planted symlink to the outside secret: no secret" not_contains "$(both)" "$secret"
run_cli -w "$ws" -c "ln -sfn '$outside' guest-dir && printf escaped > guest-dir/guest-escape"
check "guest-planted symlink to an outside dir: write fails" test "$RC" -ne 0
check "guest-planted symlink to an outside dir: nothing created outside" \
  test ! -e "$outside/guest-escape"

# --- symlinks at protected or secret workspace paths: refused, nothing runs --------------
mkdir_tmp ws2
mkdir_tmp gitdir
printf 'outside-git-config' >"$gitdir/config"
ln -s "$gitdir" "$ws2/.git"
run_cli -w "$ws2" -c "touch '$ws2/ran'; printf changed > .git/config"
check "symlinked .git: exit 125" eq "$RC" 125
check "symlinked .git: error mentions the symbolic link" contains "$ERR" "symbolic link"
check "symlinked .git: nothing ran" test ! -e "$ws2/ran"
check "symlinked .git: outside dir untouched" eq "$(cat "$gitdir/config")" "outside-git-config"
check "symlinked .git: the link is still there" test -L "$ws2/.git"

reseed
mkdir_tmp ws3
ln -s "$outside/secret.txt" "$ws3/.env"
run_cli -w "$ws3" -c "touch '$ws3/ran'; cat .env"
check "symlinked .env: exit 125" eq "$RC" 125
check "symlinked .env: error mentions the symbolic link" contains "$ERR" "symbolic link"
check "symlinked .env: nothing ran" test ! -e "$ws3/ran"
check "symlinked .env: no secret" not_contains "$(both)" "$secret"

mkdir_tmp ws4
mkdir -p "$ws4/src/config"
ln -s "$outside/secret.txt" "$ws4/src/config/.env.local"
run_cli -w "$ws4" -c "touch '$ws4/ran'"
check "nested symlinked .env.local: exit 125" eq "$RC" 125
check "nested symlinked .env.local: error mentions the symbolic link" contains "$ERR" "symbolic link"
check "nested symlinked .env.local: nothing ran" test ! -e "$ws4/ran"

mkdir_tmp ws5
ln -s "$outside/secret.txt" "$ws5/.mcp.json"
run_cli -w "$ws5" -c "touch '$ws5/ran'"
check "symlinked .mcp.json: exit 125" eq "$RC" 125
check "symlinked .mcp.json: error mentions the symbolic link" contains "$ERR" "symbolic link"
check "symlinked .mcp.json: nothing ran" test ! -e "$ws5/ran"
check "symlinked .mcp.json: outside target unchanged" eq "$(cat "$outside/secret.txt")" "$secret"

finish
