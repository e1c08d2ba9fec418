#!/usr/bin/env bash
# The same files under another name, and credential variables that name no one path.
#
# The host root is visible read-only in the sandbox, so what the policy hides or masks by
# path must not be readable through another mount of it: a bind mount of the workspace
# (its .env), of a directory inside it, of a hidden home; and a credential variable that
# names the workspace's files through such a mount is refused (its mask would cover the
# other name only). These checks need mounts: as root they run in a private mount
# namespace of their own (nothing is left on the host), with the CLI run as root and as
# a3s-test. In the unprivileged mode only the checks without mounts run:
#   - a relative credential variable (CARGO_HOME=rel: tools resolve it against their own
#     directory, the workspace inside) is refused, not silently left unmasked;
#   - a credential spelled with ".." through the workspace whose resolution the host's
#     realpath cannot finish (a chain of links longer than PATH_MAX, which the kernel
#     follows) is refused, not silently left unmasked.
source "$(dirname "$0")/lib.sh"
require_sandbox

rnd() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
both() { printf '%s\n%s' "$OUT" "$ERR"; }

# --- a relative credential variable ---------------------------------------------------
ws=$(tmpdir)
tok="relative-token-$(rnd)"
mkdir -p "$ws/rel"
printf 'token = "%s"\n' "$tok" >"$ws/rel/credentials.toml"
cd "$ws" || exit 1
CARGO_HOME=rel run_cli -c 'cat "$CARGO_HOME/credentials.toml" rel/credentials.toml'
cd / || exit 1
check "CARGO_HOME=rel (relative): refused (125)" eq "$RC" 125
check "... saying why" contains "$ERR" "relative path"
check "... nothing read" not_contains "$(both)" "$tok"
CARGO_HOME="" run_cli -w "$ws" -- true
check "an empty CARGO_HOME is no credential path: the run runs" eq "$RC" 0

# --- ".." through the workspace that realpath cannot resolve --------------------------
# sub -> d/d/.../d (14 names of 200 characters), whose last holds l -> e/e/.../e (14
# more): sub/l/.. is e x 13 deep, a path of about 5600 characters that the kernel reaches
# through two short links, and realpath(3) gives up on (ENAMETOOLONG).
name() { printf "$1%.0s" $(seq 200); }
D=$(name d) E=$(name e)
chain_d=$D chain_e=$E
for _ in $(seq 13); do chain_d+="/$D" chain_e+="/$E"; done
(cd "$ws" && for _ in $(seq 14); do mkdir "$D" && cd "$D" || exit 1; done &&
 for _ in $(seq 14); do mkdir "$E" && cd "$E" || exit 1; done && cd .. && mkdir codex &&
 printf '{"token":"deep-%s"}' "$tok" >codex/auth.json) || fail "setup: the deep chain"
(cd "$ws" && ln -s "$chain_d" sub && cd "$chain_d" && ln -s "$chain_e" l)
deep="$ws/sub/l/../codex"
check "setup: the kernel reaches the deep credential" contains "$(cat "$deep/auth.json")" "deep-$tok"
CODEX_HOME="$deep" run_cli -w "$ws" -c 'cat "$CODEX_HOME/auth.json"'
check "CODEX_HOME=WS/sub/l/../codex (unresolvable by realpath): refused (125)" eq "$RC" 125
check "... saying why" contains "$ERR" "leads through the workspace"
check "... nothing read" not_contains "$(both)" "deep-$tok"

if [ "${A3S_UNPRIV:-0}" = 1 ] || [ "$(id -u)" -ne 0 ]; then
  finish
  exit
fi

# --- mounts: in a private mount namespace, as root and as a3s-test ---------------------
id a3s-test >/dev/null 2>&1 || fail "user a3s-test is missing (scripts/test.sh creates it)"
command -v unshare >/dev/null || fail "unshare is missing"
secret="alias-secret-$(rnd)"
tests=$(tmpdir)
chmod 0755 "$tests"
# The other names must be outside /tmp (a private tmpfs in the sandbox) and the hidden
# roots, where the read-only host root shows them.
mnt=$(mktemp -d /mnt/a3s-spec-aliases-XXXXXX) || exit 1
echo "$mnt" >>"$_tmp_list"
mkdir "$mnt/alias" "$mnt/alias-sub"
chmod -R 0755 "$mnt"
# One scenario per call, in a fresh mount namespace; prints "rc<TAB>stdout<TAB>stderr".
# $1: root|a3s-test; $2: a shell script run there with $A3S, $T (the spec's temp dir) and
# $M (where the other names are mounted) set.
in_ns() {
  local who=$1 script=$2
  unshare --mount --propagation private bash -c "$script" _ "$who" "$A3S" "$tests" "$mnt" 2>&1
}
# In each script: as WHO, run the CLI ("cli ARGS...": prints its rc on the last line).
prelude='who=$1 A3S=$2 T=$3 M=$4 RU=$(command -v runuser)
cli() { if [ "$who" = root ]; then "$A3S" "$@"; else "$RU" -u a3s-test -- "$A3S" "$@"; fi
        echo "rc=$?"; }'

for who in root a3s-test; do
  W=$tests/$who-ws
  mkdir -p "$W/sub" "$W/codex"
  printf '%s' "$secret" >"$W/.env"
  printf '%s' "$secret" >"$W/sub/.env.local"
  printf '{"token":"%s"}' "$secret" >"$W/codex/auth.json"
  [ "$who" = root ] || chown -R a3s-test: "$W"
  cd /
  # The workspace mounted again elsewhere: its .env is not readable there.
  out=$(in_ns "$who" "$prelude
    mount --bind \"\$T/$who-ws\" \"\$M/alias\" || exit 9
    cli -w \"\$T/$who-ws\" -c \"cat .env; ls -A \$M/alias; cat \$M/alias/.env; true\"")
  check "[$who] a bind mount of the workspace: the run runs" contains "$out" "rc=0"
  check "[$who] ... its .env is read neither in the workspace nor under the other name" \
    not_contains "$out" "$secret"
  check "[$who] ... the other name shows nothing" not_contains "$out" "codex"
  # A directory inside the workspace mounted elsewhere.
  out=$(in_ns "$who" "$prelude
    mount --bind \"\$T/$who-ws/sub\" \"\$M/alias-sub\" || exit 9
    cli -w \"\$T/$who-ws\" -c \"ls -A \$M/alias-sub; cat \$M/alias-sub/.env.local; true\"")
  check "[$who] a bind mount of a directory inside the workspace: the run runs" contains "$out" "rc=0"
  check "[$who] ... its secret is not read under the other name" not_contains "$out" "$secret"
  # A credential variable naming the workspace's files through the other name, either
  # way round: refused (its mask would cover the other name only).
  out=$(in_ns "$who" "$prelude
    mount --bind \"\$T/$who-ws\" \"\$M/alias\" || exit 9
    CODEX_HOME=\"\$M/alias/codex\" cli -w \"\$T/$who-ws\" -c 'cat codex/auth.json'
    CODEX_HOME=\"\$T/$who-ws/codex\" cli -w \"\$M/alias\" -c 'cat codex/auth.json'")
  check "[$who] CODEX_HOME under a mount of the workspace: refused (125)" \
    eq "$(grep -c '^rc=125$' <<<"$out")" 2
  check "[$who] ... both ways round, saying why" \
    eq "$(grep -c 'the workspace under another name' <<<"$out")" 2
  check "[$who] ... nothing read" not_contains "$out" "$secret"
  out=$(in_ns "$who" "$prelude
    mount --bind \"\$T/$who-ws/codex\" \"\$M/alias-sub\" || exit 9
    CODEX_HOME=\"\$M/alias-sub\" cli -w \"\$T/$who-ws\" -c 'cat codex/auth.json'")
  check "[$who] CODEX_HOME a mount of a directory inside the workspace: refused (125)" \
    contains "$out" "rc=125"
  check "[$who] ... nothing read" not_contains "$out" "$secret"
  rm -rf "$W"
done

# A hidden home mounted elsewhere: a3s-test's home, under a bind mount of /home.
home=$(getent passwd a3s-test | cut -d: -f6)
canary="$home/.a3s-alias-canary-$(rnd)"
printf '%s' "$secret" >"$canary"
chown a3s-test: "$canary"
chmod 0600 "$canary"
W=$tests/home-ws
mkdir -p "$W" && chown a3s-test: "$W"
out=$(in_ns a3s-test "$prelude
  mount --bind \"\$(dirname \"$home\")\" \"\$M/alias\" || exit 9
  cli -w \"\$T/home-ws\" -c \"cat \$M/alias/*/.a3s-alias-canary-*; ls -A \$M/alias\"")
rm -f "$canary"
check "[a3s-test] a bind mount of /home: the run runs" contains "$out" "rc=0"
check "[a3s-test] ... the home's files are not read under the other name" not_contains "$out" "$secret"

# A namespace file bound somewhere (ip netns, container runtimes) is in the mount table
# too, and shows no directory: runs go on.
W=$tests/plain-ws
mkdir -p "$W"
out=$(in_ns root "$prelude
  touch \"\$M/nsfile\" && mount --bind /proc/self/ns/net \"\$M/nsfile\" || exit 9
  cli -w \"\$T/plain-ws\" -c 'echo ran'")
check "a namespace file mounted on the host: runs go on" contains "$out" "rc=0"
rm -f "$mnt/nsfile"

# The workspace's directory holds a mount that another one covers: the workspace is on
# the mount on top, and its other names are found on that one's filesystem.
out=$(in_ns root "$prelude
  mkdir -p \"\$M/a/b\" && mount -t tmpfs lower \"\$M/a/b\" && mount -t tmpfs upper \"\$M/a\" &&
  mkdir \"\$M/a/b\" && printf %s $secret >\"\$M/a/b/.env\" &&
  mount --bind \"\$M/a\" \"\$M/alias\" || exit 9
  cli -w \"\$M/a/b\" -c \"cat \$M/alias/b/.env; true\"")
check "a workspace on a mount covering another: the run runs" contains "$out" "rc=0"
check "... its .env is not read under the other name" not_contains "$out" "$secret"
rm -rf "$mnt/a"

# A credential variable spelled through another name of a workspace directory, to a link
# there that points out: refused (a command could re-point the link for the next run).
W=$tests/link-ws
mkdir -p "$W/sub" "$mnt/creds"
printf '%s' "$secret" >"$mnt/creds/kubeconfig"
ln -s "$mnt/creds/kubeconfig" "$W/sub/kube"
out=$(in_ns root "$prelude
  mount --bind \"\$T/link-ws/sub\" \"\$M/alias-sub\" || exit 9
  KUBECONFIG=\"\$M/alias-sub/kube\" cli -w \"\$T/link-ws\" -c 'cat sub/kube'")
check "KUBECONFIG through a mount of a workspace directory to a link out: refused (125)" \
  contains "$out" "rc=125"
check "... saying why" contains "$out" "under another name"
check "... nothing read" not_contains "$out" "$secret"

# A home credential that is a link to a directory mounted again elsewhere: that name is
# hidden too (a3s-test's ~/.a3s-spec-aws, standing for ~/.aws, is not in the lists: the
# link is ~/.aws itself when the home has none).
if [ ! -e "$home/.aws" ] && [ ! -L "$home/.aws" ]; then
  mkdir -p "$mnt/creds/aws"
  printf '%s' "$secret" >"$mnt/creds/aws/credentials"
  chmod -R a+rX "$mnt/creds"
  ln -s "$mnt/creds/aws" "$home/.aws"
  out=$(in_ns a3s-test "$prelude
    mount --bind \"\$M/creds\" \"\$M/alias\" || exit 9
    cli -w \"\$T/home-ws\" -c \"cat \$M/alias/aws/credentials; true\"")
  rm -f "$home/.aws"
  check "[a3s-test] ~/.aws a link to a directory mounted elsewhere: the run runs" \
    contains "$out" "rc=0"
  check "... the credentials are not read under the other name" not_contains "$out" "$secret"
else
  fail "a3s-test's home has a .aws of its own: this check cannot run"
fi

# Other names of hidden directories that are also what the policy re-exposes: a PATH
# directory bound from the home stays usable; a credential variable naming another name
# of a directory in the home is no conflict (it is hidden already).
tools=$(mktemp -d "$home/.a3s-spec-tools-XXXXXX") || exit 1
echo "$tools" >>"$_tmp_list"
mkdir -p "$tools/bin" "$tools/gpg" "$mnt/bin" "$mnt/gpg"
printf '#!/bin/sh\necho TOOL-OK\n' >"$tools/bin/a3s-spec-tool"
printf '%s' "$secret" >"$tools/gpg/secring"
chmod -R a+rX "$tools" && chmod 0755 "$tools/bin/a3s-spec-tool" && chown -R a3s-test: "$tools"
out=$(in_ns a3s-test "$prelude
  mount --bind \"$tools/bin\" \"\$M/bin\" && mount --bind \"$tools/gpg\" \"\$M/gpg\" || exit 9
  PATH=\"\$M/bin:/usr/bin:/bin\" GNUPGHOME=\"\$M/gpg\" cli -w \"\$T/home-ws\" \\
    -c \"a3s-spec-tool; cat \$M/gpg/secring; true\"")
check "[a3s-test] a PATH directory that is a mount of one in the home: still runs" \
  contains "$out" "TOOL-OK"
check "... GNUPGHOME another name of a directory in the home: no conflict" contains "$out" "rc=0"
check "... and not read" not_contains "$out" "$secret"

# A PATH entry that is the home itself under another name: hidden, not re-exposed whole.
out=$(in_ns a3s-test "$prelude
  mount --bind \"$home\" \"\$M/alias\" || exit 9
  PATH=\"\$M/alias:/usr/bin:/bin\" cli -w \"\$T/home-ws\" -c \"ls -A \$M/alias; echo ran\"")
check "[a3s-test] PATH naming the home under another name: the run runs" contains "$out" "ran"
check "... and shows nothing of the home there" not_contains "$out" ".profile"

# A mount inside the workspace (here a bind of a hidden home, under node_modules, which
# the scan does not walk): refused, since the command gets it writable and could make its
# way unsearchable or move it, so that no hide finds it.
W=$tests/inner-ws
mkdir -p "$W/node_modules/x/hv"
chown -R a3s-test: "$W"
out=$(in_ns a3s-test "$prelude
  mount --bind \"$home\" \"\$T/inner-ws/node_modules/x/hv\" || exit 9
  cli -w \"\$T/inner-ws\" -c 'ls -A node_modules/x/hv; echo w > node_modules/x/hv/planted'")
check "[a3s-test] a mount inside the workspace: refused (125)" contains "$out" "rc=125"
check "... saying why" contains "$out" "holds a mount point"
check "... nothing written through it" test ! -e "$home/planted"
rm -f "$home/planted"

# A toolchain found through another name of the home (PATH=<bind of home>/.cargo/bin):
# the home's credentials are masked under that name too.
if [ ! -e "$home/.cargo" ]; then
  mkdir -p "$home/.cargo/bin"
  printf 'token = "%s"\n' "$secret" >"$home/.cargo/credentials.toml"
  chown -R a3s-test: "$home/.cargo"
  chmod -R a+rX "$home/.cargo"
  out=$(in_ns a3s-test "$prelude
    mount --bind \"$home\" \"\$M/alias\" || exit 9
    PATH=\"\$M/alias/.cargo/bin:/usr/bin:/bin\" cli -w \"\$T/home-ws\" \\
      -c \"ls \$M/alias/.cargo; cat \$M/alias/.cargo/credentials.toml; true\"")
  rm -rf "$home/.cargo"
  check "[a3s-test] PATH through a mount of the home: the toolchain root is there" \
    contains "$out" "bin"
  check "... its credentials are not read" not_contains "$out" "$secret"
else
  fail "a3s-test's home has a .cargo of its own: this check cannot run"
fi

# A mount the host makes while a command runs, or after a session started, never
# arrives in the sandbox (the host's mounts shared, as on most hosts): the command
# signals it runs, the host mounts the workspace elsewhere and a tmpfs, then lets it go on.
W=$tests/prop-ws
mkdir -p "$W" "$mnt/new" "$mnt/new2"
printf '%s' "$secret" >"$W/.env"
script=$(cat <<'EOS'
mount --make-rshared / || exit 9
cmd="touch started; while [ ! -e go ]; do sleep 0.05; done; cat $M/new/.env; echo w > $M/new2/written"
cli -w "$T/prop-ws" -c "$cmd" >"$T/prop.out" 2>&1 &
while [ ! -e "$T/prop-ws/started" ]; do sleep 0.05; done
mount --bind "$T/prop-ws" "$M/new" && mount -t tmpfs t "$M/new2" || exit 9
touch "$T/prop-ws/go"; wait; cat "$T/prop.out"; echo "LS:[$(ls -A "$M/new2")]"
EOS
)
out=$(in_ns root "$prelude
$script")
check "a host mount made while a command runs does not arrive: nothing read" \
  not_contains "$out" "$secret"
check "... nothing written" contains "$out" "LS:[]"
check "... (the command ran to its end)" contains "$out" "rc="
rm -f "$W/started" "$W/go"
script=$(cat <<'EOS'
mount --make-rshared / || exit 9
cd "$T/prop-ws" || exit 9
id=$("$A3S" session start --owner $$) || exit 9
mount -t tmpfs t "$M/new2" || exit 9
"$A3S" session exec "$id" -c "echo w > $M/new2/written"; echo "rc=$?"
"$A3S" session stop "$id"; echo "LS:[$(ls -A "$M/new2")]"
EOS
)
out=$(in_ns root "$prelude
$script")
check "a host mount made after a session started does not arrive in its commands" \
  contains "$out" "LS:[]"
check "... (the command ran)" contains "$out" "rc="

# Where the host's mounts are shared (as under systemd), nothing mounted inside the
# sandbox may appear on the host: a root caller's workspace is an idmapped mount taken
# from the host, which would be a peer of the host's own. After a run: no mount in the
# workspace and no placeholder left there.
W=$tests/shared-ws
mkdir -p "$W"
printf 'x' >"$W/.env"
script=$(cat <<'EOS'
mount --make-rshared / || exit 9
"$A3S" -w "$T/shared-ws" -c 'cat .env; sleep 0.5' &
sleep 0.3
echo "DURING:$(grep -c " $T/shared-ws/" /proc/self/mountinfo)"
wait
echo "AFTER:$(grep -c " $T/shared-ws/" /proc/self/mountinfo)"
echo "LEFT:[$(ls -A "$T/shared-ws" | grep -v '^.env$' | tr '\n' ' ')]"
EOS
)
out=$(in_ns root "$prelude
$script")
check "shared host mounts: the sandbox's mounts never appear on the host" contains "$out" "DURING:0"
check "... nor after the run" contains "$out" "AFTER:0"
check "... and no placeholder is left in the workspace" contains "$out" "LEFT:[]"

# A session: its mounts are the host's as they were when it started (none propagates
# in), so a change of what its evaluation read of the mount table refuses the next
# command (start a new session): a new other name of the workspace, and one removed
# (whose hide a new evaluation would drop while the session still holds the mount).
W=$tests/sess-ws
mkdir -p "$W"
printf '%s' "$secret" >"$W/.env"
out=$(in_ns root "$prelude
  cd \"\$T/sess-ws\" || exit 9
  id=\$(\"\$A3S\" session start --owner \$\$) || exit 9
  mount --bind \"\$T/sess-ws\" \"\$M/alias\" || exit 9
  \"\$A3S\" session exec \"\$id\" -- cat \"\$M/alias/.env\"; echo rc=\$?
  \"\$A3S\" session stop \"\$id\"")
check "a session: a mount of its workspace made between commands: the next is refused" \
  contains "$out" "rc=125"
check "... saying why" contains "$out" "the host's mounts changed"
check "... nothing read" not_contains "$out" "$secret"

W=$tests/sess2-ws
mkdir -p "$W" "$mnt/h"
printf '%s' "$secret" >"$mnt/h/key"
out=$(in_ns root "$prelude
  mount --bind \"\$M/h\" \"\$M/alias\" || exit 9
  cd \"\$T/sess2-ws\" || exit 9
  DOCKER_CONFIG=\"\$M/h\" \"\$A3S\" session start --owner \$\$ >\"\$T/sid\" || exit 9
  id=\$(cat \"\$T/sid\")
  \"\$A3S\" session exec \"\$id\" -- cat \"\$M/alias/key\"; echo rc=\$?
  umount \"\$M/alias\" || exit 9
  \"\$A3S\" session exec \"\$id\" -- cat \"\$M/alias/key\"; echo rc=\$?
  \"\$A3S\" session stop \"\$id\"")
check "a session: a credential's other name removed between commands: the next is refused" \
  contains "$out" "rc=125"
check "... nothing read" not_contains "$out" "$secret"

# ... and any change of the host's mounts: the session keeps its own view, but the
# backend finds a rule's optional target on the host, so a credential on a mount the host
# then removes (an automount expiring) would be left unmasked in the session's view.
W=$tests/sess3-ws
mkdir -p "$W" "$mnt/cm"
script=$(cat <<'EOS'
mount -t tmpfs cm "$M/cm" && printf '%s' "$SECRET" >"$M/cm/aws.creds" || exit 9
cd "$T/sess3-ws" || exit 9
AWS_SHARED_CREDENTIALS_FILE="$M/cm/aws.creds" "$A3S" session start --owner $$ >"$T/sid3" || exit 9
id=$(cat "$T/sid3")
"$A3S" session exec "$id" -- cat "$M/cm/aws.creds"; echo "rc=$?"
umount "$M/cm" || exit 9
"$A3S" session exec "$id" -- cat "$M/cm/aws.creds"; echo "rc=$?"
"$A3S" session stop "$id"
EOS
)
out=$(SECRET=$secret in_ns root "$prelude
$script")
check "a session: the host unmounts a credential's filesystem: the next command is refused" \
  contains "$out" "rc=125"
check "... saying why" contains "$out" "the host's mounts changed"
check "... nothing read" not_contains "$out" "$secret"

# ... also when the host's mount table reads the same afterwards: an unmount and a new
# mount of the same directory at the same place reuse the mount's id, and mountinfo shows
# the very same line (the kernel's unique mount ids tell them apart).
W=$tests/sess4-ws
mkdir -p "$W" "$mnt/rb-src" "$mnt/rb-pt"
script=$(cat <<'EOS'
mount --bind "$M/rb-src" "$M/rb-pt" || exit 9
before=$(grep " $M/rb-pt " /proc/self/mountinfo | cut -d' ' -f1-5)
cd "$T/sess4-ws" || exit 9
"$A3S" session start --owner $$ >"$T/sid4" || exit 9
id=$(cat "$T/sid4")
"$A3S" session exec "$id" -- true; echo "first rc=$?"
umount "$M/rb-pt" && mount --bind "$M/rb-src" "$M/rb-pt" || exit 9
after=$(grep " $M/rb-pt " /proc/self/mountinfo | cut -d' ' -f1-5)
[ "$before" = "$after" ] && echo "SAME-LINE"
"$A3S" session exec "$id" -- true; echo "second rc=$?"
"$A3S" session stop "$id"
EOS
)
out=$(in_ns root "$prelude
$script")
check "a session: an unmount and the same mount again: the next command is refused" \
  contains "$out" "second rc=125"
check "... (the first ran; the mount table's line read the same)" \
  contains "$out" "first rc=0"

finish
