#!/usr/bin/env bash
# The docs' command examples run. In the docs below, a fenced code block whose info
# string is `sh run` (or `bash run`) is a command example: each one runs with
# `bash -e -o pipefail`, stdin /dev/null, from a fresh temporary directory (the default
# workspace), with the build's a3s-sandbox first on PATH and nothing else set up (no
# A3S_SANDBOX_POLICY_PATH: the shipped policies are built in). A block whose info string
# has `file=PATH` (```lua file=policies/my-project.lua) is not run: it is written to PATH
# in the directory of every `run` block after it in the same document. A block fails
# with its file:line; an empty marked block, an unknown marker word or a document with
# fewer marked blocks than it is known to have fails too (a lost marker is noticed).
# README's blocks also run from a source tree holding the program (tree/build/a3s-sandbox);
# from the build directory itself runs are refused with a clear message (the command
# could replace what lies beside the program) while policy questions answer.
# Blocks without a marker (installing packages, `cmake --install`, servers, grants to
# the internet) are not run.
. "$(dirname "$0")/lib.sh"

src=${A3S_SOURCE_DIR:?A3S_SOURCE_DIR must point at the source tree}
bindir=$(cd "$(dirname "$A3S")" && pwd)

# Each document with the least number of `run` blocks it must have.
docs=(
  "README.md 4"
  "policies/README.md 1"
  "SECURITY.md 0"
  "THREAT_MODEL.md 0"
  "relay/README.md 1"
  "engine/README.md 0"
  "bindings/README.md 0"
  "bindings/lua/README.md 0"
  "backends/linux/README.md 0"
  "backends/host/README.md 0"
  "backends/macos/README.md 0"
  "docs/PROTOCOL.md 1"
)

# Writes each marked block of $1 to $2/N and prints "N KIND LINE ARG" per block (KIND
# run or file, LINE the fence's line, ARG the file path), or "error LINE WHAT".
extract() {
  awk -v out="$2" '
    function flush() { close(out "/" n) }
    !infence && match($0, /^ *(```+|~~~+)/) {
      fence = substr($0, RSTART, RLENGTH); sub(/^ */, "", fence)
      info = substr($0, RSTART + RLENGTH)
      if (fence ~ /^`/ && index(info, "`")) next   # `inline` code, not a fence
      infence = 1; kind = ""; arg = ""; start = NR
      k = split(info, w, /[ \t]+/); j = 0
      for (i = 1; i <= k; i++) if (w[i] != "") v[++j] = w[i]
      for (i = 2; i <= j; i++) {
        if (v[i] == "run" && (v[1] == "sh" || v[1] == "bash") && kind == "") kind = "run"
        else if (v[i] ~ /^file=[^\/]/ && v[i] !~ /\.\./ && kind == "") { kind = "file"; arg = substr(v[i], 6) }
        else { print "error", NR, "unknown marker word \"" v[i] "\" in \"" info "\""; kind = "" ; break }
      }
      if (kind != "") { n++; printf "" > (out "/" n); print n, kind, NR, arg }
      next
    }
    infence {
      line = $0; sub(/^ */, "", line); sub(/[ \t]*$/, "", line)
      rest = line; gsub(substr(fence, 1, 1), "", rest)
      if (rest == "" && length(line) >= length(fence)) {
        if (kind != "") flush()
        infence = 0; next
      }
      if (kind != "") print $0 >> (out "/" n)
    }
    END { if (infence) print "error", start, "unclosed fence" }
  ' "$1"
}

total=0
for entry in "${docs[@]}"; do
  read -r doc least <<<"$entry"
  path="$src/$doc"
  if [ ! -f "$path" ]; then fail "$doc exists"; continue; fi
  blocks=$(tmpdir)
  meta=$(extract "$path" "$blocks")
  files=() ran=0
  while read -r n kind line arg; do
    [ -n "$n" ] || continue
    if [ "$n" = error ]; then fail "$doc:$kind: $line $arg"; continue; fi
    if ! grep -q '[^[:space:]]' "$blocks/$n"; then
      fail "$doc:$line: the marked block is empty"; continue
    fi
    if [ "$kind" = file ]; then files+=("$n:$arg"); continue; fi
    # README's blocks run two ways, as a newcomer would: from a fresh directory, and from
    # a source tree that holds the programs (tree/build/a3s-sandbox and a3s-sandbox-exec, as
    # after building).
    places=(fresh)
    [ "$doc" = README.md ] && places+=(tree)
    for place in "${places[@]}"; do
      d=$(tmpdir)
      chmod 0755 "$d"
      pathdir=$bindir
      if [ "$place" != fresh ]; then
        mkdir -p "$d/tree/build" && cp "$A3S" "$d/tree/build/a3s-sandbox"
        cp "$bindir/a3s-sandbox-exec" "$d/tree/build/a3s-sandbox-exec"
        chmod -R a+rX "$d"
        pathdir=$d/tree/build d=$d/$place
      fi
      for f in "${files[@]}"; do
        mkdir -p "$d/$(dirname "${f#*:}")"
        cp "$blocks/${f%%:*}" "$d/${f#*:}"
      done
      log=$(mktemp)
      (cd "$d" && env -u A3S_SANDBOX_POLICY_PATH PATH="$pathdir:$PATH" \
         timeout 120 bash -e -o pipefail "$blocks/$n") >"$log" 2>&1 </dev/null
      rc=$?
      [ "$place" = fresh ] && ran=$((ran + 1))
      where=""
      [ "$place" = fresh ] || where=" from $place (the program in the workspace)"
      if [ "$rc" -eq 0 ]; then
        pass "$doc:$line: the block runs$where"
      else
        fail "$doc:$line: the block failed$where (exit $rc)"
        sed 's/^/#   /' "$blocks/$n" | head -40
        echo "#   --- its output:"
        sed 's/^/#   /' "$log" | tail -40
      fi
      rm -f "$log"
    done
  done <<<"$meta"
  echo "# $doc: $ran blocks ran (at least $least expected)"
  total=$((total + ran))
  check "$doc: at least $least marked blocks ($ran)" test "$ran" -ge "$least"
done
echo "# $total blocks ran in all"

d=$(tmpdir)
mkdir -p "$d/tree/build" && cp "$A3S" "$d/tree/build/a3s-sandbox" && chmod -R a+rX "$d"
out=$(cd "$d/tree/build" && ./a3s-sandbox -- true 2>&1 </dev/null)
check "from the program's own directory: a run is refused (125)" eq "$?" 125
check "... saying why and what to do" contains "$out" "is the directory of the running program"
for q in digest plan capabilities probe "check baseline"; do
  # shellcheck disable=SC2086 # the words of $q are the arguments
  out=$(cd "$d/tree/build" && ./a3s-sandbox $q 2>&1 </dev/null)
  check "from the program's own directory: '$q' answers" eq "$?" 0
done
finish
