#!/usr/bin/env bash
# The house's include rules (each folder's README says them in words), checked:
#   engine/          include/ and engine/ only; no Lua, no Linux-only system headers
#   backends/linux/  include/, engine/, itself, and relay/protocol.h
#   backends/host/   include/, engine/, itself, and backends/linux/ (process-host on
#                    Linux reuses the Linux run resources and supervisor)
#   backends/macos/  include/, engine/, itself (it builds on macOS, without backends/linux)
#   relay/           include/, engine/, itself
#   bindings/lua/    include/, engine/, itself (and the Lua headers)
#   bindings/cli/    include/, engine/ (its JSON helpers), bindings/ (where policies are
#                    found, for --help) and itself: a client of the public API
#   bindings/*.c     the composition root: everything it wires
# A quoted include is found by its name in the folders that hold headers; every header
# name is unique in the tree, so the name says the folder. Exits 1 on any violation.
set -euo pipefail
# The tree to check: $1, or the one this script is in.
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$root"
# Its files: git's list in a checkout, else every file (a copy, as the spec makes).
files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files "$@" | sort -u
  else
    local p
    for p in "$@"; do find . -path "./$p" -type f | sed 's|^\./||'; done | sort -u
  fi
}

# name -> folder, and no name twice.
declare -A where=()
bad=0
while IFS= read -r h; do
  n=${h##*/}
  d=${h%/*}
  if [[ -n ${where[$n]:-} ]]; then
    echo "include rules: header name $n is in both ${where[$n]} and $d" >&2
    bad=1
  fi
  where[$n]=$d
done < <(files 'include/*.h' 'engine/*.h' 'backends/*.h' 'relay/*.h' 'bindings/*.h')

allowed_for() {
  case $1 in
    engine/*) echo "include engine" ;;
    backends/linux/*) echo "include engine backends/linux relay:protocol.h" ;;
    backends/host/*) echo "include engine backends/host backends/linux" ;;
    backends/macos/*) echo "include engine backends/macos" ;;
    relay/*) echo "include engine relay" ;;
    bindings/lua/*) echo "include engine bindings/lua" ;;
    bindings/cli/*) echo "include engine bindings bindings/cli" ;;
    bindings/*) echo "include engine backends/linux backends/host backends/macos relay bindings bindings/lua" ;;
    *) echo "" ;;
  esac
}

# System headers that tie a file to Linux or to Lua: never in engine/.
engine_forbidden='^(lua|lauxlib|lualib|seccomp)\.h$|^linux/|^sys/(syscall|prctl|mount|timerfd|signalfd|pidfd|xattr|fsuid|capability|personality|random|sysmacros|epoll|inotify|eventfd|vfs|statfs)\.h$'

while IFS= read -r f; do
  allow=$(allowed_for "$f")
  [[ -n $allow ]] || continue
  while IFS= read -r line; do
    if [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
      inc=${BASH_REMATCH[1]}
      n=${inc##*/}
      d=${where[$n]:-}
      if [[ -z $d ]]; then
        echo "include rules: $f includes \"$inc\", which is no header of the tree" >&2
        bad=1
        continue
      fi
      ok=0
      for a in $allow; do
        if [[ $a == *:* ]]; then
          [[ $d == "${a%%:*}" && $n == "${a#*:}" ]] && ok=1
        elif [[ $d == "$a" ]]; then
          ok=1
        fi
      done
      if ((!ok)); then
        echo "include rules: $f includes \"$inc\" from $d/, which $(dirname "$f")/ may not include" >&2
        bad=1
      fi
    elif [[ $f == engine/* && $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<([^\>]+)\> ]]; then
      inc=${BASH_REMATCH[1]}
      if [[ $inc =~ $engine_forbidden ]]; then
        echo "include rules: $f includes <$inc>: engine/ is platform-neutral (no Lua, no Linux-only headers)" >&2
        bad=1
      fi
    fi
  done < "$f"
done < <(files 'engine/*.[ch]' 'backends/*.[ch]' 'relay/*.[ch]' 'bindings/*.[ch]')

if ((bad)); then
  exit 1
fi
echo "include rules: ok"
