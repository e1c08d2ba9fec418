# shellcheck shell=bash
# Helpers for the concurrent-run race specs (sourced after lib.sh; not a spec itself).
#
# The attacker is a second, concurrent sandboxed run whose command is a small C program
# (compiled into the attacker's workspace, since the host /tmp is hidden inside) that
# swaps two workspace entries with renameat2(RENAME_EXCHANGE) as fast as it can. It runs
# until its stdin (a FIFO the spec holds open) is closed, then makes the number of swaps
# even, so that the entries are back where they started, prints "swaps=N errors=E" and
# exits 0. A clean stop lets the CLI remove its placeholders itself.

# build_swap DIR: compile the swapper to DIR/swap (static when possible).
build_swap() {
  local dst=$1 srcdir
  srcdir=$(tmpdir) || return 1
  cat >"$srcdir/swap.c" <<'EOF'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
static int xchg(const char *a, const char *b)
{
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}
int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: swap A B [once | MAX_PAUSE_US]\n");
        return 2;
    }
    if (argc > 3 && strcmp(argv[3], "once") == 0) {
        if (xchg(argv[1], argv[2]) < 0) {
            perror("renameat2");
            return 1;
        }
        return 0;
    }
    /* One exchange before announcing: the attack really works here. */
    if (xchg(argv[1], argv[2]) < 0) {
        printf("swap-failed %s\n", strerror(errno));
        return 3;
    }
    /* MAX_PAUSE_US > 0: a random pause after each swap, so that some runs see a stable
     * state for a while and the swap lands later in their setup. 0: as fast as it can. */
    long pause = argc > 3 ? atol(argv[3]) : 0;
    unsigned long n = 1, errs = 0, i = 0;
    unsigned seed = (unsigned)getpid();
    printf("swapping %s %s\n", argv[1], argv[2]);
    fflush(stdout);
    for (;;) {
        if (xchg(argv[1], argv[2]) == 0)
            n++;
        else
            errs++;
        if (pause > 0)
            usleep((useconds_t)(rand_r(&seed) % pause));
        if ((++i & (pause > 0 ? 0x3 : 0xfff)) == 0) {
            struct pollfd p = {.fd = 0, .events = POLLIN};
            if (poll(&p, 1, 0) != 0) {
                char c;
                if (read(0, &c, 1) <= 0)
                    break; /* EOF or error: the spec wants us to stop */
            }
        }
    }
    /* Even number of successful swaps: everything is back in place. */
    for (int tries = 0; (n & 1) && tries < 1000; tries++)
        if (xchg(argv[1], argv[2]) == 0)
            n++;
    printf("swaps=%lu errors=%lu\n", n, errs);
    return (n & 1) ? 4 : 0;
}
EOF
  cc -O2 -static -o "$dst/swap" "$srcdir/swap.c" 2>/dev/null ||
    cc -O2 -o "$dst/swap" "$srcdir/swap.c"
}

ATT_PID='' ATT_OUT='' ATT_FD='' ATT_RC='' ATT_SWAPS=0

# start_attacker WS A B [MAX_PAUSE_US]: a concurrent sandboxed run (-w WS) swapping
# WS/A and WS/B (with random pauses up to MAX_PAUSE_US between swaps when given).
# Returns non-zero (with a message) when it did not start swapping.
start_attacker() {
  local ws=$1 a=$2 b=$3 pause=${4:-0} d
  d=$(tmpdir) || return 1
  ATT_OUT=$d/out
  mkfifo "$d/ctl" || return 1
  "$A3S" -w "$ws" -t 60 -- ./swap "$a" "$b" "$pause" <"$d/ctl" >"$ATT_OUT" 2>&1 &
  ATT_PID=$!
  exec {ATT_FD}>"$d/ctl"
  local _
  for _ in $(seq 1 300); do
    grep -q '^swapping' "$ATT_OUT" 2>/dev/null && return 0
    kill -0 "$ATT_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "# the attacker run did not start swapping; its output:"
  sed 's/^/#   /' "$ATT_OUT" | head -20
  return 1
}

attacker_alive() { [ -n "$ATT_PID" ] && kill -0 "$ATT_PID" 2>/dev/null; }

# stop_attacker: close its stdin, wait (then kill) it; sets ATT_RC and ATT_SWAPS.
stop_attacker() {
  [ -n "$ATT_PID" ] || return 0
  [ -n "$ATT_FD" ] && exec {ATT_FD}>&-
  ATT_FD=''
  local _
  for _ in $(seq 1 300); do
    kill -0 "$ATT_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$ATT_PID" 2>/dev/null; then
    echo "# the attacker run did not stop on EOF: killing it"
    kill -TERM "$ATT_PID" 2>/dev/null
    sleep 1
    kill -KILL "$ATT_PID" 2>/dev/null
  fi
  wait "$ATT_PID" 2>/dev/null
  ATT_RC=$?
  ATT_PID=''
  ATT_SWAPS=$(sed -n 's/^swaps=\([0-9]*\).*/\1/p' "$ATT_OUT" | tail -1)
  ATT_SWAPS=${ATT_SWAPS:-0}
}

# Checks on how the attacker ended: ran the whole time, stopped cleanly, really swapped.
check_attacker() {
  check "attacker run: exit 0 after a clean stop (rc $ATT_RC)" eq "$ATT_RC" 0
  check "attacker run: really swapped (swaps=$ATT_SWAPS)" test "$ATT_SWAPS" -gt 1
  if [ "$ATT_RC" != 0 ]; then
    echo "# attacker output:"
    sed 's/^/#   /' "$ATT_OUT" | head -20
  fi
}

# For the EXIT trap: never leave the attacker running.
race_cleanup() {
  if [ -n "$ATT_PID" ]; then
    [ -n "$ATT_FD" ] && exec {ATT_FD}>&-
    kill -TERM "$ATT_PID" 2>/dev/null
    sleep 0.5
    kill -KILL "$ATT_PID" 2>/dev/null
    wait "$ATT_PID" 2>/dev/null
    ATT_PID=''
  fi
}

# ---- victims: a phase's budget, outside targets, and the tally of their runs ----------
# A phase lasts A3S_RACE_SECONDS (default 12) and at least A3S_RACE_MIN_RUNS victim runs
# (default 250), at most A3S_RACE_RUNS (3000). The floor is what makes a phase able to
# lose: on the code before each fix these races were lost within 55 victim runs at worst
# (race_mask: runs 1 and 55 of its two phases; race_nested: 1 and 2; race_bindroot: 7
# and 14), and a slow or loaded machine (a session's commands are slower) gets more
# time, not fewer runs.
BUDGET=${A3S_RACE_SECONDS:-12}
MIN_RUNS=${A3S_RACE_MIN_RUNS:-250}
MAX_RUNS=${A3S_RACE_RUNS:-3000}
# race_more I START: another victim run in this phase?
race_more() {
  [ "$1" -lt "$MAX_RUNS" ] && { [ $((SECONDS - $2)) -lt "$BUDGET" ] || [ "$1" -lt "$MIN_RUNS" ]; }
}

# race_target NAME: a fresh host directory outside every workspace that victims must never
# write (0755), removed on exit with the spec's temp dirs (it is called in a subshell).
# Not under /tmp (hidden inside, so a hit is unmistakably the host's): the unprivileged
# user's HOME (hidden inside too), else /var/tmp.
race_target() {
  local base=/var/tmp t
  if [ "${A3S_UNPRIV:-0}" = 1 ] && [ -d "${HOME:-}" ] && [ -w "$HOME" ]; then base=$HOME; fi
  t=$(mktemp -d "$base/a3s-race-$1-XXXXXX") || return 1
  chmod 0755 "$t"
  echo "$t" >>"$_tmp_list"
  echo "$t"
}
race_on_exit() {
  race_cleanup
  cleanup
}

# tally_reset, then tally_run I after each victim run (RC, ERR from run_cli): counts
# exit 0 (their numbers in TALLY_OK), 125 and others, keeping the first messages.
tally_reset() { N0=0 N125=0 NOTHER=0 TALLY_MSGS='' TALLY_OK=(); }
tally_run() {
  case $RC in
    0) N0=$((N0 + 1)); TALLY_OK+=("$1") ;;
    125)
      N125=$((N125 + 1))
      [ "$N125" -le 2 ] && TALLY_MSGS+="run $1: refused: ${ERR:0:300}"$'\n'
      ;;
    *)
      NOTHER=$((NOTHER + 1))
      [ "$NOTHER" -le 3 ] && TALLY_MSGS+="run $1: rc $RC: ${ERR:0:300}"$'\n'
      ;;
  esac
}
# tally_report LABEL RUNS START
tally_report() {
  echo "# [$1] victim runs: $2 in $((SECONDS - $3))s: exit 0: $N0, exit 125: $N125, other: $NOTHER"
  [ -n "$TALLY_MSGS" ] && printf '%s' "$TALLY_MSGS" | sed 's/^/#   /'
  return 0
}
# end_race LABEL RUNS START DIED: the phase's tally, then stop the attacker and check that
# it ran throughout (DIED=0) and ended cleanly.
end_race() {
  tally_report "$1" "$2" "$3"
  check "[$1] the attacker run was still running during all victim runs" eq "$4" 0
  stop_attacker
  check_attacker
}
