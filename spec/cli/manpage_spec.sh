#!/usr/bin/env bash
# The man pages cannot drift from the program and the docs: a3s-sandbox(1) names exactly
# the options and the environment variables of `a3s-sandbox --help` (each way), the
# README documents every one of those variables, --help lists every variable the code
# reads (when the sources are at hand), a3s-sandbox-policy(5) names exactly the policy
# API (a3s.*, plan:*, ctx.*) of policies/README.md, and `man -l` renders both pages
# without a warning.
source "$(dirname "$0")/lib.sh"
SRC=${A3S_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
man1="$SRC/bindings/cli/man/a3s-sandbox.1"
man5="$SRC/bindings/cli/man/a3s-sandbox-policy.5"
check "a3s-sandbox.1 exists" test -f "$man1"
check "a3s-sandbox-policy.5 exists" test -f "$man5"
[ -f "$man1" ] && [ -f "$man5" ] || finish

# Same sets, each way; the difference is printed.
same_set() { # what, set A (lines), set B (lines), name of A, name of B
  local only_a only_b
  only_a=$(comm -23 <(sort -u <<<"$2") <(sort -u <<<"$3") | tr '\n' ' ')
  only_b=$(comm -13 <(sort -u <<<"$2") <(sort -u <<<"$3") | tr '\n' ' ')
  [ -z "$only_a$only_b" ] && return 0
  [ -n "$only_a" ] && echo "#   only in $4: $only_a"
  [ -n "$only_b" ] && echo "#   only in $5: $only_b"
  return 1
}
# roff source as text: \- is -, font escapes and \& go.
plain() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g' "$1"; }
# The lines of one .SH section (to the next .SH).
section() { plain "$1" | awk -v s=".SH $2" '$0 == s || $0 == s" " { on = 1; next } /^\.SH/ { on = 0 } on'; }
# The heading lines of a section's items (the line after each .TP or .TQ).
tp_heads() { awk 'prev == ".TP" || prev == ".TQ" { print } { prev = $0 }'; }

help=$("$A3S" --help)
check "--help exits 0" eq "$?" 0

# --- options ----------------------------------------------------------------------------------
help_long=$(grep -oE -- '--[a-z][a-z-]*' <<<"$help")
man_long=$(plain "$man1" | grep -v '^\.\\"' | grep -oE -- '--[a-z][a-z-]*')
check "long options: --help and a3s-sandbox(1) name the same" \
  same_set x "$help_long" "$man_long" "--help" "a3s-sandbox.1"
help_short=$(grep -oE '^  -[a-z][, ]' <<<"$help" | grep -oE -- '-[a-z]')
man_short=$(section "$man1" OPTIONS | tp_heads | grep -oE '(^|[" ])-[a-z]([, "]|$)' | grep -oE -- '-[a-z]')
check "short options: --help and the OPTIONS of a3s-sandbox(1) name the same" \
  same_set x "$help_short" "$man_short" "--help" "a3s-sandbox.1"
check "there are options to compare ($(wc -w <<<"$help_long") long, $(wc -w <<<"$help_short") short)" \
  test "$(wc -w <<<"$help_short")" -ge 6

# --- environment ------------------------------------------------------------------------------
help_env=$(sed -n '/^Environment:/,/^$/p' <<<"$help" | grep -oE '^  [A-Z][A-Z0-9_]*(, [A-Z][A-Z0-9_]*)*' |
           grep -oE '[A-Z][A-Z0-9_]+')
man_env=$(section "$man1" ENVIRONMENT | tp_heads | grep -oE '[A-Z][A-Z0-9_]{2,}')
check "--help has an Environment section" test -n "$help_env"
check "environment: --help and the ENVIRONMENT of a3s-sandbox(1) name the same" \
  same_set x "$help_env" "$man_env" "--help" "a3s-sandbox.1"
readme_env=$(awk '/^Environment:/ { on = 1 } on && /^$/ { exit } on' "$SRC/README.md")
for v in $help_env; do
  check "README's Environment paragraph documents $v" grep -qw -- "$v" <<<"$readme_env"
done
# Every variable the code reads is in --help (the sources are not staged for the
# unprivileged run, which checks the rest).
if [ -f "$SRC/engine/run.c" ]; then
  read_env=$(grep -rhoE '(getenv|getenv_of|a3s_sandbox_getenv|a3s_linux_getenv|helper_override)\([^"()]*"[A-Z][A-Z0-9_]*"' \
               "$SRC/engine" "$SRC/backends" "$SRC/bindings" "$SRC/relay" --include='*.c' |
             grep -oE '"[A-Z][A-Z0-9_]*"' | tr -d '"' | sort -u)
  check "the code reads variables ($(wc -w <<<"$read_env"))" test "$(wc -w <<<"$read_env")" -ge 10
  for v in $read_env; do
    check "--help lists $v, which the code reads" grep -qx "$v" <<<"$help_env"
  done
fi

# --- the policy API -----------------------------------------------------------------------------
api_re='\b(a3s(\.[a-z_]+)+|plan:[a-z_]+|ctx\.[a-z_]+)'
readme_api=$(grep -oE "$api_re" "$SRC/policies/README.md" | sort -u)
man_api=$(plain "$man5" | grep -v '^\.\\"' | grep -oE "$api_re" | sort -u)
check "policies/README.md names the API ($(wc -w <<<"$readme_api") names)" \
  test "$(wc -w <<<"$readme_api")" -ge 30
check "policy API: policies/README.md and a3s-sandbox-policy(5) name the same" \
  same_set x "$readme_api" "$man_api" "policies/README.md" "a3s-sandbox-policy.5"

# --- rendering ----------------------------------------------------------------------------------
command -v man >/dev/null && command -v groff >/dev/null ||
  skip_all "man and groff are needed to render the pages (scripts/setup.sh installs man-db, groff-base)"
for page in "$man1" "$man5"; do
  n=$(basename "$page")
  out=$(MANPAGER=cat MANWIDTH=80 man -l "$page" 2>&1)
  check "man -l $n: exit 0" eq "$?" 0
  check "man -l $n: rendered" grep -q '^NAME' <<<"$out"
  warn=$(groff -man -ww -z "$page" 2>&1)
  check "$n: no roff warning" eq "$warn" ""
done
out=$(MANPAGER=cat MANWIDTH=80 man -l "$man1" 2>&1)
check "a3s-sandbox(1) renders its header" contains "$out" "A3S-SANDBOX(1)"
out=$(MANPAGER=cat MANWIDTH=80 man -l "$man5" 2>&1)
check "a3s-sandbox-policy(5) renders its header" contains "$out" "A3S-SANDBOX-POLICY(5)"

finish
