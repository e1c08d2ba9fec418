#!/usr/bin/env bash
# A writable root outside the workspace, concurrent runs: the victim's policy makes
# W/x/digests writable (W/x a real directory: the plan check passes it, since it is spelled
# without a symbolic link). A concurrent run on W keeps exchanging W/x with W/y, a symlink
# to a host directory T outside W that holds a "digests" directory too (T stands for what
# an attacker would aim at: the sandbox's state directory, whose digests/ later runs
# trust). Between the victim's check and its mount, W/x may be the symlink: the mount
# must then be refused, never made on T/digests.
#
# The victim writes a canary into its writable root. Whatever the timing: no canary ever
# lands in T; every run that exited 0 wrote into the real W/x/digests; every other run was
# refused (125). Two phases: exchanges as fast as possible, then with random pauses of up
# to 5 ms. A3S_RACE_SECONDS bounds each phase (default 35), A3S_RACE_RUNS its runs.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/race_helpers.sh"
require_sandbox

trap race_on_exit EXIT
trap 'exit 130' INT TERM

# phase LABEL MAX_PAUSE_US
phase() {
  local label=$1 pause=$2 W V T P
  W=$(tmpdir) || exit 1
  V=$(tmpdir) || exit 1
  P=$(tmpdir) || exit 1
  mkdir -p "$W/x/digests"
  T=$(race_target rwroot) || exit 1
  mkdir "$T/digests"
  # Writable by any uid: the command's (mapped or not) can write both, so only where the
  # root is mounted decides where a canary lands.
  chmod 0777 "$T/digests" "$W/x/digests"
  ln -s "$T" "$W/y"
  printf 'local plan = a3s.extend("baseline", "rwroot")\nplan:writable("%s", { broaden = true })\nreturn plan\n' \
    "$W/x/digests" >"$P/rwroot.lua"
  echo "# [$label] W=$W T=$T (W/y -> T), victim writable root W/x/digests"
  build_swap "$W"
  check "[$label] setup: the swapper is built" test -x "$W/swap"

  # Control, before any exchange: the root is writable and lands in the real W/x.
  run_cli -w "$V" --policy "$P/rwroot.lua" -c "echo control > '$W/x/digests/control'"
  check "[$label] control: the victim policy runs (rc $RC: ${ERR:0:200})" eq "$RC" 0
  check "[$label] control: its write lands in the real W/x/digests" \
    eq "$(cat "$W/x/digests/control" 2>/dev/null)" control

  if ! start_attacker "$W" x y "$pause"; then
    fail "[$label] the attacker run (-w W, exchanging x and y) failed to start"
    race_cleanup
    return
  fi
  pass "[$label] the attacker run started and is exchanging W/x and W/y"

  local escaped=0 i=0 died=0 start=$SECONDS
  tally_reset
  while [ "$i" -lt "$MAX_RUNS" ] && [ $((SECONDS - start)) -lt "$BUDGET" ]; do
    i=$((i + 1))
    run_cli -w "$V" --policy "$P/rwroot.lua" -t 30 -c "echo pwned > '$W/x/digests/canary-$i'"
    tally_run "$i"
    if compgen -G "$T/digests/canary-*" >/dev/null; then
      escaped=1
      echo "# [$label] escape at victim run $i (rc $RC): the writable root was T/digests"
      break
    fi
    if ! attacker_alive; then
      died=1
      break
    fi
  done
  end_race "$label" "$i" "$start" "$died"

  check "[$label] no canary-* ever written into T/digests" eq "$escaped" 0
  check "[$label] T holds only its digests directory, and that is empty" \
    eq "$(cd "$T" && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' ')" "./digests "
  check "[$label] every victim run exited 0 or was refused with 125 ($NOTHER did not)" \
    eq "$NOTHER" 0
  check "[$label] some victim runs were refused: the attack was really attempted ($N125)" \
    test "$N125" -gt 0
  check "[$label] after the race: W/x is the real directory" test -d "$W/x" -a ! -L "$W/x"
  local missing=0 k
  for k in "${TALLY_OK[@]}"; do
    [ "$(cat "$W/x/digests/canary-$k" 2>/dev/null)" = pwned ] || missing=$((missing + 1))
  done
  check "[$label] every successful victim run wrote into the real W/x/digests ($N0 runs, $missing not there)" \
    eq "$missing" 0
}

phase fast 0
phase jitter 5000

finish
