#!/usr/bin/env bash
# Nested workspaces, concurrent runs: a run on W keeps exchanging W/sub (a real
# directory) with W/sublink (a relative symlink to a host directory T outside W) while
# runs on W/sub start. Whatever the timing, a run on W/sub may write only into the real
# W/sub, or be refused (125); it must never get T (or anything else) bound read-write.
#
# Two phases with a fresh W and T each: the attacker exchanges as fast as it can (each
# path lookup of the setup sees either entry), then with random pauses of up to 5 ms
# (some runs see a stable W/sub through the checks and the exchange lands later, while
# the sandbox is being built). Victim runs stop at the first escape of a phase.
# A3S_RACE_SECONDS, A3S_RACE_MIN_RUNS and A3S_RACE_RUNS bound each phase (race_helpers.sh).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/race_helpers.sh"
require_sandbox

trap race_on_exit EXIT
trap 'exit 130' INT TERM

# phase LABEL MAX_PAUSE_US
phase() {
  local label=$1 pause=$2 W T rel
  W=$(tmpdir) || exit 1
  mkdir "$W/sub"
  T=$(race_target target) || exit 1
  rel=$(realpath --relative-to="$W" "$T")
  ln -s "$rel" "$W/sublink"
  echo "# [$label] W=$W T=$T sublink -> $rel"
  check "[$label] setup: W/sublink resolves to T" eq "$(realpath "$W/sublink")" "$(realpath "$T")"
  build_swap "$W"
  check "[$label] setup: the swapper is built" test -x "$W/swap"

  if ! start_attacker "$W" sub sublink "$pause"; then
    fail "[$label] the attacker run (-w W, exchanging sub and sublink) failed to start"
    race_cleanup
    return
  fi
  pass "[$label] the attacker run started and is exchanging W/sub and W/sublink"

  local escaped=0 i=0 died=0 start=$SECONDS ws
  tally_reset
  while race_more "$i" "$start"; do
    i=$((i + 1))
    # argv form: /proc/$$/environ shows the PWD the sandbox was given (diagnostics).
    run_cli -w "$W/sub" -t 30 -- /bin/sh -c \
      "tr '\\0' '\\n' </proc/\$\$/environ | grep '^PWD='; echo pwned > canary-$i"
    tally_run "$i"
    if compgen -G "$T/canary-*" >/dev/null; then
      escaped=1
      ws=$(sed -n 's/^PWD=//p' <<<"$OUT")
      echo "# [$label] escape at victim run $i (rc $RC): $(ls -A "$T" | head -5 | tr '\n' ' ')"
      if [ "$ws" = "$W/sub" ]; then
        echo "# [$label]   the run's workspace was W/sub itself: the setup followed the swapped-in symlink"
      else
        echo "# [$label]   the run's workspace was resolved to $ws"
      fi
      break
    fi
    if ! attacker_alive; then
      died=1
      break
    fi
  done
  end_race "$label" "$i" "$start" "$died"

  check "[$label] no canary-* ever written into the outside directory T" eq "$escaped" 0
  check "[$label] no canary-* in T after all runs" eq "$(find "$T" -name 'canary-*' | head -5)" ""
  check "[$label] T is still empty (nothing created there, not even a placeholder)" \
    eq "$(ls -A "$T" | head -5)" ""
  check "[$label] every victim run exited 0 or was refused with 125 ($NOTHER did not)" \
    eq "$NOTHER" 0

  # Back in place after an even number of exchanges: sub is the real directory again.
  check "[$label] after the race: W/sub is the real directory" test -d "$W/sub" -a ! -L "$W/sub"
  check "[$label] after the race: W/sublink is still the symlink" test -L "$W/sublink"
  local missing=0 k
  for k in "${TALLY_OK[@]}"; do
    [ "$(cat "$W/sub/canary-$k" 2>/dev/null)" = pwned ] || missing=$((missing + 1))
  done
  check "[$label] every successful victim run wrote into the real W/sub ($N0 runs, $missing not there)" \
    eq "$missing" 0
  check "[$label] the real W/sub holds exactly the successful runs' canaries" \
    eq "$(find "$W/sub" -mindepth 1 -name 'canary-*' | wc -l)" "$N0"
}

phase fast 0
phase jitter 5000

finish
