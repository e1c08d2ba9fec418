#!/usr/bin/env bash
# A root outside the workspace, concurrent runs. The victim's policy names W/x/data (W/x a
# real directory, so the path is spelled without a symbolic link): writable in one part,
# read-only in the other. A concurrent run on W keeps exchanging W/x with W/y, a symlink
# to a host directory T outside W that holds a "data" directory too. T stands for what an
# attacker would aim at: for a writable root the sandbox's state directory (whose
# digests/ later runs trust), for a read-only one a directory the victim must not read
# (~/.ssh). Between the plan and the mount, W/x may be the symlink: the run must then be
# refused, never get T/data bound.
#
# Writable: the victim writes a canary into its root; no canary ever lands in T, and
# every run that exited 0 wrote into the real W/x/data. Read-only: the victim reads
# W/x/data/secret; it never shows T's secret, and every run that exited 0 read the real
# one. Every other run was refused (125). Each kind has two phases: exchanges as fast as
# possible, then with random pauses of up to 5 ms. A3S_RACE_SECONDS, A3S_RACE_MIN_RUNS
# and A3S_RACE_RUNS bound each phase (race_helpers.sh).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/race_helpers.sh"
require_sandbox

trap race_on_exit EXIT
trap 'exit 130' INT TERM

rnd() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# phase KIND(writable|read_only) LABEL MAX_PAUSE_US
phase() {
  local kind=$1 label="$1 $2" pause=$3 W V T P host_secret cmd
  W=$(tmpdir) || exit 1
  V=$(tmpdir) || exit 1
  P=$(tmpdir) || exit 1
  mkdir -p "$W/x/data"
  T=$(race_target bindroot) || exit 1
  mkdir "$T/data"
  host_secret="host-secret-$(rnd)"
  printf '%s' "$host_secret" >"$T/data/secret"
  printf 'workspace data' >"$W/x/data/secret"
  # Writable and readable by any uid: the command's (mapped or not) can use both, so
  # only where the root is mounted decides what it sees.
  chmod 0777 "$T/data" "$W/x/data"
  chmod 0644 "$T/data/secret" "$W/x/data/secret"
  ln -s "$T" "$W/y"
  local opts='{}'
  [ "$kind" = writable ] && opts='{ broaden = true }'
  printf 'local plan = a3s.extend("baseline", "bindroot")\nplan:%s("%s", %s)\nreturn plan\n' \
    "$kind" "$W/x/data" "$opts" >"$P/bindroot.lua"
  echo "# [$label] W=$W T=$T (W/y -> T), victim $kind root W/x/data"
  build_swap "$W"
  check "[$label] setup: the swapper is built" test -x "$W/swap"

  # Control, before any exchange: the root is the real W/x/data.
  if [ "$kind" = writable ]; then
    run_cli -w "$V" --policy "$P/bindroot.lua" -c "echo control > '$W/x/data/control'"
    check "[$label] control: the victim policy runs (rc $RC: ${ERR:0:200})" eq "$RC" 0
    check "[$label] control: its write lands in the real W/x/data" \
      eq "$(cat "$W/x/data/control" 2>/dev/null)" control
  else
    run_cli -w "$V" --policy "$P/bindroot.lua" -c "cat '$W/x/data/secret'"
    check "[$label] control: the victim policy runs (rc $RC: ${ERR:0:200})" eq "$RC" 0
    check "[$label] control: it reads the real W/x/data" eq "$OUT" "workspace data"
  fi

  if ! start_attacker "$W" x y "$pause"; then
    fail "[$label] the attacker run (-w W, exchanging x and y) failed to start"
    race_cleanup
    return
  fi
  pass "[$label] the attacker run started and is exchanging W/x and W/y"

  local escaped=0 i=0 died=0 start=$SECONDS wrong=0
  tally_reset
  while race_more "$i" "$start"; do
    i=$((i + 1))
    if [ "$kind" = writable ]; then
      cmd="echo pwned > '$W/x/data/canary-$i'"
    else
      cmd="cat '$W/x/data/secret'"
    fi
    run_cli -w "$V" --policy "$P/bindroot.lua" -t 30 -c "$cmd"
    tally_run "$i"
    if compgen -G "$T/data/canary-*" >/dev/null || [[ "$OUT" == *host-secret* ]]; then
      escaped=1
      echo "# [$label] escape at victim run $i (rc $RC): the root was T/data"
      break
    fi
    [ "$kind" = read_only ] && [ "$RC" = 0 ] && [ "$OUT" != "workspace data" ] &&
      wrong=$((wrong + 1))
    if ! attacker_alive; then
      died=1
      break
    fi
  done
  end_race "$label" "$i" "$start" "$died"

  check "[$label] T/data was never bound: no canary there, its secret never read" eq "$escaped" 0
  check "[$label] T holds what it held" \
    eq "$(cd "$T" && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' ')" "./data ./data/secret "
  check "[$label] every victim run exited 0 or was refused with 125 ($NOTHER did not)" \
    eq "$NOTHER" 0
  check "[$label] some victim runs were refused: the attack was really attempted ($N125)" \
    test "$N125" -gt 0
  check "[$label] after the race: W/x is the real directory" test -d "$W/x" -a ! -L "$W/x"
  if [ "$kind" = writable ]; then
    local missing=0 k
    for k in "${TALLY_OK[@]}"; do
      [ "$(cat "$W/x/data/canary-$k" 2>/dev/null)" = pwned ] || missing=$((missing + 1))
    done
    check "[$label] every successful victim run wrote into the real W/x/data ($N0 runs, $missing not there)" \
      eq "$missing" 0
  else
    check "[$label] every successful victim run read the real W/x/data ($N0 runs, $wrong did not)" \
      eq "$wrong" 0
  fi
}

phase writable fast 0
phase writable jitter 5000
phase read_only fast 0
phase read_only jitter 5000

finish
