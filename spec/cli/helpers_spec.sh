#!/usr/bin/env bash
# The helper programs (launcher, relay, mediator) and the shipped policies are built into
# the CLI and the library (the helpers handed over as sealed memfds): an installed CLI
# runs from the source checkout, from the build dir and from any directory; the program
# itself inside the workspace is protected (every entry on the way to it, links
# included, and where it looks for policies, is read-only and cannot be renamed, so the
# command cannot replace what runs next); its own directory, or HOME, as the workspace
# refuses runs but answers policy questions; a command that overwrites the helper programs' files in its
# workspace changes nothing that a later run executes; the memfds never reach the
# command. A program given by path (A3S_SANDBOX_LAUNCHER, ...) is still refused inside
# the workspace.
source "$(dirname "$0")/lib.sh"
require_sandbox

src=$(cd "$A3S_SOURCE_DIR" && pwd -P) bin=$(cd "$(dirname "$A3S")" && pwd -P)
home=$(tmpdir)
chmod 0755 "$home"
unset A3S_SANDBOX_LAUNCHER A3S_SANDBOX_RELAY A3S_SANDBOX_MEDIATOR A3S_SANDBOX_POLICY_PATH
# One file is the whole program (helpers and shipped policies built in): a copy outside
# the checkout stands for an installed one.
inst=$(tmpdir)
cp "$A3S" "$inst/a3s-sandbox"
chmod -R a+rX "$inst"
A3SI=$inst/a3s-sandbox

# Where the checkout or the build dir is not writable (an unprivileged user's staged
# copy), placeholders cannot be made in it: only a plain directory is tried there.
plain=$(tmpdir)
places=("$plain")
for d in "$src" "$bin"; do [ -w "$d" ] && places+=("$d"); done

for d in "${places[@]}"; do
  at() { (cd "$d" && HOME="$home" "$A3SI" "$@") </dev/null 2>&1; }
  out=$(at -- true)
  check "from $d: -- true exits 0" eq "$?:$out" "0:"
  out=$(at --json -c 'echo json-ok')
  check "from $d: --json -c" contains "$out" '"stdout":"json-ok\n"'
  out=$(at digest)
  check "from $d: digest is 64 hex" eq "$(printf '%s' "$out" | grep -cE '^[0-9a-f]{64}$')" 1
  out=$(at probe)
  check "from $d: probe exits 0" eq "$?" 0
  out=$(at capabilities)
  check "from $d: capabilities, mediated HTTP usable" contains "$out" '"mediated_http":true'
  out=$(cd "$d" && echo data | HOME="$home" "$A3SI" -- wc -c 2>&1)
  check "from $d: stdin is forwarded" eq "$out" 5
done

# The program itself inside the workspace (the build's CLI run from the checkout, the Lua
# module from the checkout): it runs, and the command can neither rewrite, remove nor
# rename away what runs next. Host side: the program is unchanged. The program's own
# directory as the workspace refuses runs (its siblings would be the command's).
a3s_real=$(readlink -f "$A3S")
sum_before=$(sha256sum <"$a3s_real")
case $a3s_real in
"$src"/*/*)
  if [ -w "$src" ]; then
    rel=${a3s_real#"$src"/} top=${rel%%/*}
    out=$(cd "$src" && HOME="$home" "$A3S" -- printf here 2>&1 </dev/null)
    check "the build's CLI with the checkout as the workspace: runs" eq "$?:$out" "0:here"
    out=$(cd "$src" && HOME="$home" "$A3S" -c "
      { printf evil > '$rel'; } 2>/dev/null && echo wrote
      rm -f '$rel' 2>/dev/null && echo removed
      mv '$top' '$top.away' 2>/dev/null && echo renamed
      true" 2>&1 </dev/null)
    check "... the command cannot write, remove or rename the program's entry ($top)" eq "$out" ""
    check "... the program is unchanged" eq "$(sha256sum <"$a3s_real")" "$sum_before"
    check "... and nothing renamed is left" test ! -e "$src/$top.away"
    out=$(cd "$src" && HOME="$home" "$A3S" plan --explain 2>&1 </dev/null)
    check "... plan shows the entry protected" contains "$out" "protect   $src/$top "
  fi ;;
esac
ws=$(tmpdir)
mkdir -p "$ws/tools/bin" "$ws/pfx/bin"
cp "$A3S" "$ws/tools/bin/a3s-sandbox"
cp "$A3S" "$ws/a3s-sandbox"
chmod -R a+rX "$ws"
sum=$(sha256sum <"$A3S")
out=$(cd "$ws" && HOME="$home" ./a3s-sandbox -c 'echo ran > ran.txt' 2>&1 </dev/null)
check "the program's own directory as the workspace: refused (125)" eq "$?" 125
check "... saying why" contains "$out" "is the directory of the running program"
check "... nothing ran" test ! -e "$ws/ran.txt"
out=$(cd "$ws" && HOME="$home" ./a3s-sandbox digest 2>&1 </dev/null)
check "... a policy question still answers" eq "$?" 0
out=$(cd "$ws" && HOME="$home" ./tools/bin/a3s-sandbox -c '
  mv tools t2 2>/dev/null && echo renamed
  mkdir -p tools/bin 2>/dev/null; { printf evil > tools/bin/a3s-sandbox; } 2>/dev/null && echo wrote
  printf ok' 2>&1 </dev/null)
check "a nested program: its top-level directory is neither renamed nor written" \
  eq "$out" ok
check "... host side: the nested copy is unchanged" eq "$(sha256sum <"$ws/tools/bin/a3s-sandbox")" "$sum"
# A link to the program inside the workspace is the path the caller runs next: the entry
# holding the link is protected as well as the one holding the program.
mkdir -p "$ws/links"
ln -s ../tools/bin/a3s-sandbox "$ws/links/a3s"
out=$(cd "$ws" && HOME="$home" ./links/a3s -c '
  rm -f links/a3s 2>/dev/null && echo removed
  mv links l2 2>/dev/null && echo renamed
  printf ok' 2>&1 </dev/null)
check "run through a link in the workspace: the link's entry is protected too" eq "$out" ok
check "... host side: the link still leads to the program" eq "$(readlink "$ws/links/a3s")" ../tools/bin/a3s-sandbox
# Run by a relative spelling from below the workspace root, through a link in a
# subdirectory: the walk starts at / and passes through the workspace, so "sub" is
# protected though the program lies outside.
ext=$(tmpdir)
cp "$A3S" "$ext/a3s-sandbox" && chmod -R a+rX "$ext"
mkdir -p "$ws/sub"
ln -s "$ext" "$ws/sub/x"
out=$(cd "$ws/sub" && HOME="$home" ./x/a3s-sandbox -w "$ws" -c '
  rm -f sub/x 2>/dev/null && echo removed
  mv sub s2 2>/dev/null && echo renamed
  printf ok' 2>&1 </dev/null)
check "run as ./x/a3s-sandbox from a subdirectory: the link's entry is protected" eq "$out" ok
check "... host side: the link is in place" eq "$(readlink "$ws/sub/x")" "$ext"
# Found in PATH after an entry inside the workspace: that earlier candidate is what runs
# next if the command creates it, so it is pinned.
out=$(cd "$ws" && HOME="$home" PATH="$ws/pathdir:$ext:$PATH" a3s-sandbox -c '
  mkdir -p pathdir 2>/dev/null && { printf "#!/bin/sh\necho evil\n" > pathdir/a3s-sandbox; } 2>/dev/null && echo planted
  printf ok' 2>&1 </dev/null)
check "an earlier PATH entry in the workspace cannot be planted" eq "$out" ok
check "... host side: nothing there" test ! -e "$ws/pathdir"
# A path the walk cannot follow (a link target longer than it handles) refuses runs
# rather than protecting nothing.
long=$ws/$(printf './%.0s' $(seq 2030))sub
ln -s "$long" "$ext/L"
out=$(cd "$ws" && HOME="$home" "$ext/L/x/a3s-sandbox" -w "$ws" -- true 2>&1 </dev/null)
check "a path the guard cannot walk: runs refused (125)" eq "$?" 125
check "... saying why" contains "$out" "cannot tell whether the workspace"
# A prefix as the workspace: the policy directory looked for next to the program
# (PREFIX/share/a3s-sandbox/policies) cannot be created by the command for a later run
# from another workspace.
cp "$A3S" "$ws/pfx/bin/a3s-sandbox"
out=$(cd "$ws/pfx" && HOME="$home" ./bin/a3s-sandbox -c '
  mkdir -p share/a3s-sandbox/policies 2>/dev/null && echo made
  printf ok' 2>&1 </dev/null)
check "an install prefix as the workspace: its share/ cannot be planted" eq "$out" ok
check "... host side: no share/ left" test ! -e "$ws/pfx/share"
# The program's directory exchanged with a decoy (renameat2 RENAME_EXCHANGE) from inside
# a run: refused, since in every run that entry is a mount point.
source "$(dirname "$0")/race_helpers.sh"
mkdir -p "$ws/decoy/bin"
printf '#!/bin/sh\necho evil\n' >"$ws/decoy/bin/a3s-sandbox"
build_swap "$ws"
out=$(cd "$ws" && HOME="$home" "$ws/tools/bin/a3s-sandbox" -t 30 -- ./swap tools decoy once 2>&1 </dev/null)
check "an exchange of the program's directory from inside: refused (busy)" contains "$out" "renameat2: Device or resource busy"
check "... host side: the program is in place and unchanged" eq "$(sha256sum <"$ws/tools/bin/a3s-sandbox")" "$sum"
check "... and the decoy still holds the decoy" contains "$(cat "$ws/decoy/bin/a3s-sandbox")" "echo evil"

# HOME as the workspace: runs are refused (the command could plant what the caller's
# shell runs next and read every credential there); questions about the policy, and the
# probe's fixed command, still work.
out=$(cd "$home" && HOME="$home" "$A3SI" -- true 2>&1 </dev/null)
check "HOME as the workspace: a run is refused (125)" eq "$?" 125
check "... saying why and what to do" contains "$out" "is your home directory"
check "... naming -w" contains "$out" "-w DIR"
for q in digest "check baseline" plan "plan --explain" capabilities probe; do
  # shellcheck disable=SC2086 # the words of $q are the arguments
  out=$(cd "$home" && HOME="$home" "$A3SI" $q 2>&1 </dev/null)
  check "HOME as the workspace: '$q' answers (exit 0)" eq "$?" 0
done
mod="$bin/a3s_sandbox.so"
if [ -f "$mod" ] && [ -w "$src" ] && command -v lua5.4 >/dev/null; then
  out=$(cd "$src" && HOME="$home" LUA_CPATH="$bin/?.so;;" lua5.4 -e '
    local sb = assert(require("a3s_sandbox").new{})
    local r = assert(sb:exec({ "printf", "lua-in-tree" }))
    io.write(r.stdout, " ", r.exit_code)' 2>&1)
  case $bin in
  "$src"/*) check "the build's Lua module in its default workspace (the checkout): runs" eq "$out" "lua-in-tree 0" ;;
  esac
  # `require "a3s_sandbox"` tries ./a3s_sandbox.lua first (Debian's package.path): a
  # script whose workspace is its working directory cannot be made to load a planted
  # module next time.
  lws=$(tmpdir)
  out=$(cd "$lws" && HOME="$home" LUA_CPATH="$bin/?.so;;" lua5.4 -e '
    local sb = assert(require("a3s_sandbox").new{})
    local r = assert(sb:exec("{ echo \"os.exit(66)\" > a3s_sandbox.lua; } 2>/dev/null && echo planted; mkdir a3s_sandbox 2>/dev/null && echo dir; printf ok"))
    io.write(r.stdout)' 2>&1)
  check "Lua: the module's search templates in the workspace cannot be planted" eq "$out" ok
  check "... host side: no a3s_sandbox.lua, no a3s_sandbox/" eq "$(ls -A "$lws")" ""
  lmod=$(tmpdir)
  cp "$mod" "$lmod/"
  chmod -R a+rX "$lmod"
  out=$(cd "$src" && HOME="$home" LUA_CPATH="$lmod/?.so;;" lua5.4 -e '
    local sb = assert(require("a3s_sandbox").new{})
    local r = assert(sb:exec({ "printf", "lua-ok" }))
    io.write(r.stdout, " ", r.exit_code)' 2>&1)
  check "a Lua module outside the checkout, from the checkout: new{} and exec" eq "$out" "lua-ok 0"
fi

# The memfds never reach the command, with or without the relay.
ws=$(tmpdir)
run_cli -w "$ws" -c 'for f in /proc/self/fd/*; do echo "$f $(readlink "$f")"; done'
check "the command holds no helper image (plain run)" not_contains "$OUT" "memfd:a3s-sandbox"
check "... and no fd 13 or 14" eq "$(printf '%s\n' "$OUT" | grep -cE '^/proc/self/fd/1[34] ')" 0
run_cli -w "$ws" --grant a3s-probe.invalid:1 -c 'for f in /proc/self/fd/*; do echo "$f $(readlink "$f")"; done'
check "mediated run exits 0" eq "$RC" 0
check "the command holds no helper image (mediated run)" not_contains "$OUT" "memfd:a3s-sandbox"
check "... and no fd 13 or 14" eq "$(printf '%s\n' "$OUT" | grep -cE '^/proc/self/fd/1[34] ')" 0
run_cli -w "$ws" -c 'head -c 4 /proc/1/exe 2>&1; ls -l /proc/*/fd 2>/dev/null | grep -c memfd:a3s'
check "nothing inside can reach a helper image through /proc" contains "$OUT" $'\n0'

# A workspace holding the helper programs' files: the command overwrites them all; the
# next run still runs the embedded ones and behaves.
ws=$(tmpdir)
for h in launch relay mediator; do
  [ -f "$bin/a3s-sandbox-$h" ] && cp "$bin/a3s-sandbox-$h" "$ws/a3s-sandbox-$h"
done
tamper='for f in a3s-sandbox-launch a3s-sandbox-relay a3s-sandbox-mediator; do
  printf "#!/bin/sh\ntouch %s/tampered-\$\$; exit 0\n" "$PWD" >"$f" && chmod 0755 "$f"; done; echo tampered'
out=$(cd "$ws" && HOME="$home" "$A3SI" -c "$tamper" 2>&1)
check "the command overwrote the helper files in its workspace" eq "$out" tampered
check "... which now are its scripts" contains "$(head -c 40 "$ws/a3s-sandbox-launch")" "touch"
out=$(cd "$ws" && HOME="$home" "$A3SI" -- printf still-ok 2>&1)
check "the next run still behaves (embedded launcher)" eq "$out" still-ok
out=$(cd "$ws" && HOME="$home" "$A3SI" --json --grant a3s-probe.invalid:1 -c \
  'exec 3<>/dev/tcp/127.0.0.1/24731 && printf "CONNECT other.invalid:1 HTTP/1.1\r\n\r\n" >&3 && head -c 12 <&3' 2>&1)
check "a mediated run still behaves (embedded relay and mediator)" contains "$out" '"stdout":"HTTP/1.1 403"'
check "none of the overwritten files ran" eq "$(ls "$ws" | grep -c '^tampered-')" 0
# Given by path, a program inside the workspace is refused as before.
for v in A3S_SANDBOX_LAUNCHER:a3s-sandbox-launch A3S_SANDBOX_RELAY:a3s-sandbox-relay \
         A3S_SANDBOX_MEDIATOR:a3s-sandbox-mediator; do
  out=$(cd "$ws" && env "${v%%:*}=$ws/${v#*:}" HOME="$home" "$A3SI" --grant a3s-probe.invalid:1 -- true 2>&1)
  check "${v%%:*} inside the workspace: refused (125)" eq "$?" 125
  check "... naming the program inside the workspace" contains "$out" "from inside the active workspace"
done
check "still none of the overwritten files ran" eq "$(ls "$ws" | grep -c '^tampered-')" 0
finish
