#!/usr/bin/env bash
# Install the Debian packages the build and the tests need, only when missing.
set -euo pipefail

# clang and its runtime libraries (libFuzzer) build the parser fuzzer (scripts/test.sh);
# strace kills the CLI at chosen syscalls in the fault-injection spec and shows that every
# child of the CLI execs (mediator_process spec); procps' pgrep finds the mediator;
# man-db and groff-base render the man pages (manpage spec); minisign signs and verifies
# the release checksums (scripts/sign-release.sh, release spec); python3 and nodejs run
# the clients of `a3s-sandbox serve` and their tests; musl-tools links the helpers that
# run inside the sandbox small (CMakeLists.txt, A3S_MUSL_HELPERS).
PKGS=(build-essential cmake pkg-config bubblewrap libseccomp-dev liblua5.4-dev lua5.4 musl-tools
      lua-unit libjansson-dev nettle-dev python3 util-linux passwd time acl clang
      libclang-rt-dev strace procps man-db groff-base minisign nodejs)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing missing Debian packages (usually 1 to 3 minutes): ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
