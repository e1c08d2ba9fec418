#!/usr/bin/env bash
# The shared library's ABI is exactly the public header: the functions that
# liba3s_sandbox.so exports (nm -D --defined-only) are the functions declared in
# include/a3s_sandbox.h, no more and no fewer, and it exports no data. The header is read
# through the C preprocessor (comments, #ifdef __cplusplus and the export macro are gone)
# and only the lines that come from the header itself are parsed.
#
# Usage: abi_spec.sh LIBRARY HEADER LUA_MODULE   (ctest passes the built files;
# $A3S_NM and $A3S_CC name the tools, default nm and cc).
set -uo pipefail
source "$A3S_SOURCE_DIR/spec/cli/lib.sh"

lib=${1:?library} header=${2:?header} luamod=${3:?Lua module}
nm=${A3S_NM:-nm} cc=${A3S_CC:-cc}
work=$(tmpdir)

# The function names the header declares: drop brace bodies (structs, enums), split the
# rest into declarations, leave out typedefs, and take the identifier before the first
# "(" of each. __attribute__(...) (the export macro's expansion) is expanded away.
"$cc" -E -x c -D'__attribute__(x)=' "$header" >"$work/header.i"
check "the header is preprocessed" eq "$?" 0
declared() {
  awk -v h="$header" '
    /^# [0-9]+ "/ { f = $0; sub(/^# [0-9]+ "/, "", f); sub(/".*$/, "", f); inh = (f == h); next }
    /^#/ { next }
    inh { text = text " " $0 }
    END {
      depth = 0; out = ""
      for (i = 1; i <= length(text); i++) {
        c = substr(text, i, 1)
        if (c == "{") { depth++; continue }
        if (c == "}") { depth--; continue }
        if (depth == 0) out = out c
      }
      n = split(out, decl, ";")
      for (i = 1; i <= n; i++) {
        d = decl[i]
        gsub(/[ \t]+/, " ", d); sub(/^ /, "", d)
        if (d ~ /^typedef[ (]/ || d !~ /\(/) continue
        if (match(d, /[A-Za-z_][A-Za-z0-9_]*[ ]*\(/)) {
          name = substr(d, RSTART, RLENGTH); sub(/[ ]*\($/, "", name); print name
        }
      }
    }' "$work/header.i" | LC_ALL=C sort -u
}

declared >"$work/declared"
check "the header declares functions" test -s "$work/declared"

"$nm" -D --defined-only "$lib" >"$work/nm"
check "nm reads the library" eq "$?" 0
# T/W/i: functions (i: ifunc); A: absolute symbols (version nodes), not code or data.
awk '$2 ~ /^[TWi]$/ { print $3 }' "$work/nm" | LC_ALL=C sort -u >"$work/functions"
awk '$2 !~ /^[TWiA]$/ { print $2, $3 }' "$work/nm" >"$work/data"

extra=$(LC_ALL=C comm -13 "$work/declared" "$work/functions")
missing=$(LC_ALL=C comm -23 "$work/declared" "$work/functions")
echo "# header: $(wc -l <"$work/declared") functions; library: $(wc -l <"$work/functions") exported"
if [ -n "$extra" ]; then
  echo "# exported but not declared in $(basename "$header") ($(echo "$extra" | wc -l)):"
  echo "$extra" | sed 's/^/#   + /'
fi
if [ -n "$missing" ]; then
  echo "# declared in $(basename "$header") but not exported ($(echo "$missing" | wc -l)):"
  echo "$missing" | sed 's/^/#   - /'
fi
check "the library exports no function the header does not declare" test -z "$extra"
check "the library exports every function the header declares" test -z "$missing"
if [ -s "$work/data" ]; then sed 's/^/#   data: /' "$work/data"; fi
check "the library exports no data symbols" test ! -s "$work/data"

# The Lua module (the same engine objects) still exports its entry point.
check "the Lua module exports luaopen_a3s_sandbox" \
  contains "$("$nm" -D --defined-only "$luamod")" " T luaopen_a3s_sandbox"

# Only the opt-in tracing build (cmake -DA3S_TRACE=ON) prints phase times: the library
# and the module of a normal build hold no trace at all.
for f in "$lib" "$luamod"; do
  check "$(basename "$f"): no phase tracing in a normal build" \
    eq "$(grep -c 'a3s-trace' "$f")" 0
done
finish
