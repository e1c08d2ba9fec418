#!/usr/bin/env bash
# One workspace, concurrent runs: a run on W keeps exchanging W/sub (which holds a .env
# secret) with W/sub2 (a decoy directory without one) while other runs on W start and
# read both. Whatever the timing, the secret is never readable, and the setup never
# creates anything on the host: no new .env (a mask mount point) appears in W, and W is
# unchanged once the runs are over.
#
# A run holds the directories of every secret its scan saw (they are mount points in
# it): an attacker run started while sub/.env exists cannot move sub at all ("held").
# So for the race itself the secret is written by the host only once the attacker runs
# (its scan did not see it, so it may move sub): then every other run must still mask
# the right inode or refuse. Two race phases with a fresh W each: exchanges as fast as
# possible, then with random pauses of up to 5 ms (the exchange lands later in the
# setup). Victim runs stop at the first leak or new .env of a phase. A3S_RACE_SECONDS,
# A3S_RACE_MIN_RUNS and A3S_RACE_RUNS bound each phase (race_helpers.sh).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/race_helpers.sh"
require_sandbox

trap 'race_cleanup; cleanup' EXIT
trap 'exit 130' INT TERM

rnd() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# Every entry of W with its type, mode, size and content digest (swap-invariant once the
# attacker stopped after an even number of exchanges).
snapshot() {
  (cd "$1" && find . -mindepth 1 \( -type d -printf '%p %y %m\n' \) -o -printf '%p %y %m %s\n' |
    LC_ALL=C sort &&
    find . -type f -exec md5sum {} + | LC_ALL=C sort -k2)
}
# The .env files in W, named by the identity of their directory ("who" marker file).
env_files() {
  local f
  find "$1" -name .env | while IFS= read -r f; do
    printf '%s/.env\n' "$(cat "$(dirname "$f")/who" 2>/dev/null || echo "?$(dirname "$f")")"
  done | LC_ALL=C sort
}

phase() {
  local label=$1 pause=$2 W secret
  W=$(tmpdir) || exit 1
  secret="workspace-secret-$(rnd)"
  mkdir "$W/sub" "$W/sub2"
  printf sub >"$W/sub/who"
  printf sub2 >"$W/sub2/who"
  printf 'decoy data' >"$W/sub2/data.txt"
  build_swap "$W"
  check "[$label] setup: the swapper is built" test -x "$W/swap"
  echo "# [$label] W=$W"

  # The decoy directory by identity (an fd opened before any exchange), for spotting a
  # new .env in it early, whatever name it has at that moment.
  local decoy_fd
  exec {decoy_fd}<"$W/sub2"
  if ! start_attacker "$W" sub sub2 "$pause"; then
    exec {decoy_fd}<&-
    fail "[$label] the attacker run (-w W, exchanging sub and sub2) failed to start"
    race_cleanup
    return
  fi
  pass "[$label] the attacker run started and is exchanging W/sub and W/sub2"
  # Now the secret, from the host, in the directory marked "sub" (whatever its name is
  # at this moment); written under another name and renamed, so it appears whole.
  # (cd first: the working directory then stays that directory through every exchange)
  (for d in $(seq 1 200); do
    cd "$W/sub" 2>/dev/null || continue
    if [ "$(cat who)" = sub ]; then
      printf '%s' "$secret" >.env.tmp && mv .env.tmp .env && exit 0
    fi
  done; exit 1)
  check "[$label] setup: the host wrote the secret into the directory marked sub" eq "$?" 0

  local leaks=0 newenv=0 n0=0 n125=0 nother=0 i=0 died=0 start=$SECONDS msgs=''
  while race_more "$i" "$start"; do
    i=$((i + 1))
    run_cli -w "$W" -t 30 -c 'cat sub/.env sub2/.env'
    case $RC in
      0) n0=$((n0 + 1)) ;;
      125)
        n125=$((n125 + 1))
        [ "$n125" -le 2 ] && msgs+="run $i: refused: ${ERR:0:300}"$'\n'
        ;;
      *) nother=$((nother + 1)) ;;
    esac
    case "$OUT$ERR" in
      *"$secret"*)
        leaks=$((leaks + 1))
        echo "# [$label] the secret leaked at victim run $i (rc $RC)"
        ;;
    esac
    if [ -e "/proc/$$/fd/$decoy_fd/.env" ] || [ -L "/proc/$$/fd/$decoy_fd/.env" ]; then
      newenv=1
      echo "# [$label] a .env appeared in the decoy directory at victim run $i (rc $RC)"
    fi
    [ "$leaks" -gt 0 ] || [ "$newenv" -gt 0 ] && break
    if ! attacker_alive; then
      died=1
      break
    fi
  done
  echo "# [$label] victim runs: $i in $((SECONDS - start))s: exit 0: $n0, exit 125: $n125, other (cat refused): $nother"
  [ -n "$msgs" ] && printf '%s' "$msgs" | sed 's/^/#   /'

  exec {decoy_fd}<&-
  check "[$label] the attacker run was still running during all victim runs" eq "$died" 0
  stop_attacker
  check_attacker

  check "[$label] the secret never appeared in a victim's output ($leaks leaks)" eq "$leaks" 0
  check "[$label] no new .env was created in W: the .env files are as before" \
    eq "$(env_files "$W")" "sub/.env"
  check "[$label] W/sub/.env still holds the secret" eq "$(cat "$W/sub/.env")" "$secret"
  check "[$label] nothing else appeared in W" \
    eq "$(cd "$W" && find . -mindepth 1 -not -name swap | LC_ALL=C sort | tr '\n' ' ')" \
    "./sub ./sub/.env ./sub/who ./sub2 ./sub2/data.txt ./sub2/who "
}

# A run that scanned the secret holds its directory: the exchange itself is refused.
held() {
  local W secret
  W=$(tmpdir) || exit 1
  secret="workspace-secret-$(rnd)"
  mkdir "$W/sub" "$W/sub2"
  printf '%s' "$secret" >"$W/sub/.env"
  build_swap "$W"
  if start_attacker "$W" sub sub2 0; then
    fail "[held] an attacker run could exchange the directory holding a secret it scanned"
    stop_attacker
  else
    check "[held] the exchange is refused: the secret's directory is a mount point (EBUSY)" \
      grep -q 'swap-failed Device or resource busy' "$ATT_OUT"
  fi
  race_cleanup
  run_cli -w "$W" -c 'cat sub/.env; mv sub elsewhere; mv sub/.env x; rm -rf sub'
  check "[held] inside: the secret stays unreadable and its directory immovable" \
    not_contains "$OUT$ERR" "$secret"
  check "[held] on the host: sub/.env is untouched" eq "$(cat "$W/sub/.env")" "$secret"
}

held
phase fast 0
phase jitter 5000

finish
