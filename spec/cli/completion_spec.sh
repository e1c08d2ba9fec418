#!/usr/bin/env bash
# The bash completion (bindings/cli/completion/a3s-sandbox), sourced in a fresh bash and
# asked as bash asks it: `a3s-sandbox <TAB>` offers the subcommands, `--po<TAB>` the
# option, `-p <TAB>` the policy names of the search path in force (read from --help:
# the installed/source policies and $A3S_SANDBOX_POLICY_PATH), and the options offered
# are the subcommand's.
source "$(dirname "$0")/lib.sh"
SRC=${A3S_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
script="$SRC/bindings/cli/completion/a3s-sandbox"
check "the completion script exists" test -f "$script"
[ -f "$script" ] || finish

pol=$(tmpdir)
printf 'return a3s.extend("baseline", "spec-extra")\n' >"$pol/spec-extra.lua"
mkdir "$pol/lib" && printf 'return {}\n' >"$pol/lib/notapolicy.lua"
chmod -R a+rX "$pol"

# The completions offered for the words given (the last is the one being completed), one
# a line, sorted. COMP_WORDS[0] is this build's CLI, whose --help gives the search path.
complete_words() {
  A3S_SANDBOX_POLICY_PATH="${A3S_SANDBOX_POLICY_PATH:+$A3S_SANDBOX_POLICY_PATH:}$pol" \
    bash --norc --noprofile -c '
    source "$1" || exit 9
    shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _a3s_sandbox
    printf "%s\n" "${COMPREPLY[@]}"' _ "$script" "$A3S" "$@" | sort
}

out=$(bash --norc --noprofile -c 'source "$1" && complete -p a3s-sandbox' _ "$script")
check "sourcing registers the completion for a3s-sandbox" contains "$out" "-F _a3s_sandbox a3s-sandbox"

check "a3s-sandbox <TAB>: the subcommands" eq "$(complete_words '')" \
  "$(printf '%s\n' capabilities check digest plan probe run serve session)"
check "a3s-sandbox session <TAB>: its subcommands" eq "$(complete_words session '')" \
  "$(printf '%s\n' exec list start stop)"
check "a3s-sandbox session exec --js<TAB>: --json" eq "$(complete_words session exec x --js)" "--json"
check "a3s-sandbox serve --<TAB>: its options only" eq "$(complete_words serve --)" \
  "$(printf '%s\n' --allow-host-root --allow-process-host --audit --policy --verbose --workspace)"
check "a3s-sandbox p<TAB>: plan, probe" eq "$(complete_words p)" "$(printf '%s\n' plan probe)"
check "a3s-sandbox --po<TAB>: --policy" eq "$(complete_words --po)" "--policy"
check "a3s-sandbox --allow-h<TAB>: --allow-host-root" eq "$(complete_words --allow-h)" "--allow-host-root"
check "a3s-sandbox --ver<TAB>: --verbose, --version" eq "$(complete_words --ver)" \
  "$(printf '%s\n' --verbose --version)"

out=$(complete_words -p '')
check "a3s-sandbox -p <TAB>: baseline" grep -qx baseline <<<"$out"
check "a3s-sandbox -p <TAB>: the shipped derived policies" test "$(ls "$SRC"/policies/*.lua | wc -l)" -le "$(wc -l <<<"$out")"
check "a3s-sandbox -p <TAB>: a policy of A3S_SANDBOX_POLICY_PATH" grep -qx spec-extra <<<"$out"
check "a3s-sandbox -p <TAB>: no module of lib/" not_contains "$out" notapolicy
check "a3s-sandbox --policy spec<TAB>" eq "$(complete_words --policy spec)" spec-extra
check "a3s-sandbox run --policy=spec<TAB>" eq "$(complete_words run --policy = spec)" spec-extra
check "a3s-sandbox -p ./x<TAB>: files, not names" eq "$(cd "$pol" && complete_words -p ./spec)" ./spec-extra.lua

check "a3s-sandbox plan --ex<TAB>: --explain" eq "$(complete_words plan --ex)" --explain
check "a3s-sandbox digest -<TAB>: no run-only option" not_contains "$(complete_words digest -)" --timeout
check "a3s-sandbox capabilities --back<TAB>: --backend" eq "$(complete_words capabilities --back)" --backend
check "a3s-sandbox digest -<TAB>: no --backend" not_contains "$(complete_words digest -)" --backend
check "a3s-sandbox plan --backend m<TAB>: macos-seatbelt" eq "$(complete_words plan --backend m)" macos-seatbelt
check "a3s-sandbox -t <TAB>: nothing (a number)" eq "$(complete_words -t '')" ""
check "a3s-sandbox -- <TAB>: commands" grep -qx bash <<<"$(complete_words -- ba)"

finish
