#!/usr/bin/env bash
# Run one CLI spec as the caller ("caller") or as the unprivileged user a3s-test
# ("unpriv"). Exit 77 means skipped; with A3S_MUST_WORK=1 a skip is a failure.
set -uo pipefail
mode=$1 spec=$2
# session, session-unpriv: the spec's runs go through a session (session_wrap.sh).
session=0
case "$mode" in
  session) mode=caller session=1 ;;
  session-unpriv) mode=unpriv session=1 ;;
esac
skip() {
  echo "SKIP: $*"
  if [ "${A3S_MUST_WORK:-0}" = 1 ]; then
    echo "A3S_MUST_WORK=1: a skip is a failure here"
    exit 1
  fi
  exit 77
}

# The session mode's stand-in CLI: session_wrap.sh with the real CLI's path written in.
wrap_for() { # REAL_CLI DIR -> DIR/a3s-sandbox
  mkdir -p "$2"
  sed "s|@A3S_REAL_CLI@|$1|" "$A3S_SOURCE_DIR/spec/cli/session_wrap.sh" >"$2/a3s-sandbox"
  chmod 0755 "$2/a3s-sandbox"
}
if [ "$mode" = caller ]; then
  if [ "$session" = 1 ]; then
    wdir=$(mktemp -d /tmp/a3s-session-cli-XXXXXX)
    trap 'rm -rf "$wdir"' EXIT
    wrap_for "$A3S_CLI" "$wdir"
    A3S_SESSION_REAL_CLI="$A3S_CLI" A3S_CLI="$wdir/a3s-sandbox" bash "$spec"
    exit
  fi
  exec bash "$spec"
fi

[ "$(id -u)" -eq 0 ] || skip "unprivileged mode needs root to switch user"
id a3s-test >/dev/null 2>&1 || skip "user a3s-test is missing (scripts/test.sh creates it)"

# The unprivileged user may not be able to reach the build tree (e.g. under /root):
# stage the CLI, the policies and the specs in a world-readable directory.
stage=$(mktemp -d /tmp/a3s-unpriv-XXXXXX)
trap 'rm -rf "$stage"' EXIT
# The CLI carries its helper programs embedded; their files are copied only for the
# specs about programs given by path (A3S_SANDBOX_MEDIATOR, ...), which name them; and
# the session client a3s-sandbox-exec, which the session modes run.
cp "$A3S_CLI" "$stage/a3s-sandbox"
for h in launch relay mediator exec; do
  f="$(dirname "$A3S_CLI")/a3s-sandbox-$h"
  [ -f "$f" ] && cp "$f" "$stage/a3s-sandbox-$h"
done
cp -r "$A3S_SOURCE_DIR/policies" "$stage/policies"
cp -r "$A3S_SOURCE_DIR/spec" "$stage/spec"
# The man pages, the bash completion and the README that the documentation specs compare.
mkdir -p "$stage/bindings/cli"
cp -r "$A3S_SOURCE_DIR/bindings/cli/man" "$A3S_SOURCE_DIR/bindings/cli/completion" \
  "$stage/bindings/cli/"
cp "$A3S_SOURCE_DIR/README.md" "$stage/README.md"
# The docs (docs_spec runs their examples), at their places in the tree.
(cd "$A3S_SOURCE_DIR" && for f in *.md */README.md */*/README.md docs/*.md; do
  [ -f "$f" ] && mkdir -p "$stage/$(dirname "$f")" && cp "$f" "$stage/$f"
done)
[ "$session" = 1 ] && wrap_for "$stage/a3s-sandbox" "$stage/session-cli"
chmod -R a+rX "$stage"
chmod 0755 "$stage"
spec_copy="$stage/spec/cli/$(basename "$spec")"
# -l so HOME and the rest are the user's own; only what the specs need is passed on.
# Not exec: the staging dir must be removed when the spec ends (the EXIT trap).
runuser -u a3s-test -- env -i PATH=/usr/local/bin:/usr/bin:/bin \
  HOME="$(getent passwd a3s-test | cut -d: -f6)" USER=a3s-test LOGNAME=a3s-test \
  A3S_CLI="$([ "$session" = 1 ] && echo "$stage/session-cli/a3s-sandbox" || echo "$stage/a3s-sandbox")" \
  A3S_SESSION_REAL_CLI="$stage/a3s-sandbox" A3S_SOURCE_DIR="$stage" A3S_SANDBOX_POLICY_PATH="$stage/policies" \
  A3S_MUST_WORK="${A3S_MUST_WORK:-0}" A3S_RACE_SECONDS="${A3S_RACE_SECONDS:-}" \
  A3S_RACE_MIN_RUNS="${A3S_RACE_MIN_RUNS:-}" A3S_RACE_RUNS="${A3S_RACE_RUNS:-}" A3S_UNPRIV=1 \
  bash "$spec_copy"
