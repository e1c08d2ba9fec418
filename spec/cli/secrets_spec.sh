#!/usr/bin/env bash
# Credentials and secret files (README "What baseline enforces",
# Filesystem): workspace .env* files anywhere (except in .git/node_modules/target)
# are unreadable and unwritable; the caller's HOME, /root, /home, /run and the host temp
# dir are empty inside; /etc/shadow cannot be read. Canaries must never reach output.
source "$(dirname "$0")/lib.sh"
require_sandbox

# lib.sh's tmpdir registers its dir for cleanup inside the $(...) subshell, which the
# EXIT trap never sees; register it in this shell instead.
mkdir_tmp() { local d; d=$(tmpdir) || exit 1; _tmp_roots+=("$d"); printf -v "$1" '%s' "$d"; }

rnd() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
# Both streams of the last run, for "never printed anywhere" checks.
both() { printf '%s\n%s' "$OUT" "$ERR"; }

# --- workspace .env files ---------------------------------------------------------------
mkdir_tmp ws
secret="workspace-secret-$(rnd)"
printf '%s' "$secret" >"$ws/.env"
run_cli -w "$ws" -c 'cat .env'
check "cat .env: non-zero" test "$RC" -ne 0
check "cat .env: canary not in stdout/stderr" not_contains "$(both)" "$secret"
run_cli -w "$ws" -c 'head -c 100 < .env; od -c .env; grep -r . .env; cp .env copy.txt; cat copy.txt'
check "other ways to read .env: canary never printed" not_contains "$(both)" "$secret"
check "other ways to read .env: no copy with the canary on the host" \
  not_contains "$(cat "$ws/copy.txt" 2>/dev/null)" "$secret"
run_cli -w "$ws" -c 'printf overwritten > .env'
check "write .env: non-zero" test "$RC" -ne 0
check "write .env: host content unchanged" eq "$(cat "$ws/.env")" "$secret"
run_cli -w "$ws" -c 'rm -f .env; mv .env moved.env'
check "rm/mv .env: non-zero" test "$RC" -ne 0
check "rm/mv .env: still there, unchanged" eq "$(cat "$ws/.env" 2>&1)" "$secret"
check "rm/mv .env: no moved copy" test ! -e "$ws/moved.env"
run_cli -w "$ws" -c 'printf ordinary-ok > ordinary.txt && cat ordinary.txt'
check "ordinary files next to .env still work" eq "$OUT" "ordinary-ok"

# Nested and case-variant names anywhere in the source tree.
nested="nested-secret-$(rnd)"
mkdir -p "$ws/src/config" "$ws/deep/a/b/c"
printf '%s' "$nested" >"$ws/src/config/.ENV.local"
printf '%s' "$nested" >"$ws/deep/a/b/c/.env.production"
printf '%s' "$nested" >"$ws/.Env.Secret"
run_cli -w "$ws" -c 'cat src/config/.ENV.local'
check "cat src/config/.ENV.local: non-zero" test "$RC" -ne 0
check "cat src/config/.ENV.local: canary not printed" not_contains "$(both)" "$nested"
run_cli -w "$ws" -c 'cat deep/a/b/c/.env.production; cat .Env.Secret'
check "deeply nested .env.production and .Env.Secret: non-zero" test "$RC" -ne 0
check "deeply nested .env.production and .Env.Secret: canary not printed" \
  not_contains "$(both)" "$nested"
# (restore .env in case an escape above removed it, so this check cannot pass vacuously)
printf '%s' "$secret" >"$ws/.env"
run_cli -w "$ws" -c 'grep -r . src deep . 2>/dev/null; true'
check "grep -r over the workspace: no secret canary" not_contains "$(both)" "$nested"
check "grep -r over the workspace: no .env canary" not_contains "$(both)" "$secret"

# Package and build stores are not masked (their .env* files are ordinary files).
mkdir -p "$ws/node_modules/pkg" "$ws/target/debug"
printf 'node-modules-env' >"$ws/node_modules/pkg/.env.secret"
printf 'target-env' >"$ws/target/debug/.env.secret"
run_cli -w "$ws" -c 'cat node_modules/pkg/.env.secret; printf "|"; cat target/debug/.env.secret'
check "node_modules/target .env.secret: readable (exit 0)" eq "$RC" 0
check "node_modules/target .env.secret: contents" eq "$OUT" "node-modules-env|target-env"

# --- the caller's HOME is hidden ---------------------------------------------------------
mkdir_tmp fh
hc="home-canary-$(rnd)"
mkdir -p "$fh/.ssh" "$fh/.aws"
printf '%s' "$hc" >"$fh/.ssh/id_rsa"
printf '%s' "$hc" >"$fh/.aws/credentials"
printf '%s' "$hc" >"$fh/.netrc"
printf '%s' "$hc" >"$fh/notes.txt"
HOME=$fh run_cli -w "$ws" -c "cat '$fh/.ssh/id_rsa' '$fh/.aws/credentials' '$fh/.netrc' '$fh/notes.txt'; ls -A '$fh/.ssh' '$fh/.aws'; printf '%s' \"\$HOME\""
check "fake HOME: canary never printed" not_contains "$(both)" "$hc"
check "fake HOME: HOME inside is not the caller's" not_contains "$OUT" "$fh"
HOME=$fh run_cli -w "$ws" -c "ls -A '$fh'"
check "fake HOME: ls -A prints nothing" eq "$OUT" ""
HOME=$fh run_cli -w "$ws" -c 'cat ~/.netrc; ls -A ~'
check "fake HOME via ~: canary never printed" not_contains "$(both)" "$hc"
HOME=$fh run_cli -w "$ws" -c "find '$fh' -type f 2>/dev/null; true"
check "fake HOME: find lists no file" eq "$OUT" ""

# /root and /home are hidden whoever runs. The baseline re-exposes PATH dirs and
# toolchain roots (~/.cargo, ~/.pyenv, ...) read-only, so first run with a clean
# environment (a fake, empty HOME and a system PATH): then both must be empty.
mkdir_tmp eh
o=$(mktemp) e=$(mktemp)
env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$eh" "$A3S" -w "$ws" \
  -c 'ls -A /root; printf "|"; ls -A /home; printf "|"; ls -A /run' >"$o" 2>"$e" </dev/null
RC=$? OUT=$(cat "$o") ERR=$(cat "$e")
rm -f "$o" "$e"
check "clean env: /root, /home and /run are empty inside" eq "$OUT" "||"
if [ "$(id -u)" -eq 0 ]; then
  check "clean env: ls of /root succeeds as root (a tmpfs, not a denial)" eq "$RC" 0
  check "(host /root is not empty, so the check means something)" test -n "$(ls -A /root)"
fi
# With the caller's own environment, /root and /home may only show the mount points of
# re-exposed toolchain roots and PATH dirs, never anything else of the host.
allowed_re='^(\.pyenv|\.rbenv|\.nodenv|\.goenv|\.cargo|\.rustup|\.nvm|\.volta|\.bun|\.deno|go'
IFS=: read -ra pdirs <<<"${PATH:-}"
for d in "${pdirs[@]}"; do
  case $d in /root/?* | /home/?*) allowed_re+="|$(cut -d/ -f3 <<<"$d" | sed 's/[.]/\\./g')" ;; esac
done
allowed_re+=')$'
run_cli -w "$ws" -c 'ls -A /root'
check "caller env: /root shows only toolchain mount points" \
  eq "$(grep -vE "$allowed_re" <<<"$OUT")" ""
run_cli -w "$ws" -c 'ls -A /root/.ssh /root/.bashrc /root/.profile 2>/dev/null; true'
check "caller env: no /root dotfiles or .ssh visible" eq "$OUT" ""
run_cli -w "$ws" -c 'ls -A /home'
check "caller env: /home shows no user's home" \
  eq "$(grep -vE "$allowed_re" <<<"$OUT")" ""
run_cli -w "$ws" -c 'ls -A "/home/a3s-test" 2>/dev/null; ls -A /home/cloudsdk 2>/dev/null; true'
check "caller env: no home directory content under /home" eq "$OUT" ""

# System secrets.
run_cli -w "$ws" -c 'cat /etc/shadow'
check "cat /etc/shadow: non-zero" test "$RC" -ne 0
check "cat /etc/shadow: no root: line" not_contains "$(both)" "root:"
run_cli -w "$ws" -c 'cat /etc/gshadow'
check "cat /etc/gshadow: no root: line" not_contains "$(both)" "root:"
run_cli -w "$ws" -c 'cat /etc/passwd'
check "/etc/passwd stays readable (the host root is visible read-only)" contains "$OUT" "root:"

# /run is empty inside.
run_cli -w "$ws" -c 'ls -A /run'
check "/run is empty inside" eq "$OUT" ""
run_cli -w "$ws" -c 'ls -A /var/run/ 2>/dev/null'
check "/var/run is empty inside" eq "$OUT" ""

# --- the host temp dir: /tmp inside is a fresh tmpfs --------------------------------------
tc="tmp-canary-$(rnd)"
tf=$(mktemp /tmp/a3s-tmp-canary-XXXXXX)
_tmp_roots+=("$tf")
printf '%s' "$tc" >"$tf"
chmod 0644 "$tf"
run_cli -w "$ws" -c "cat '$tf'; ls -A /tmp"
check "host /tmp canary: not readable inside" not_contains "$(both)" "$tc"
check "host /tmp canary: not listed inside" not_contains "$OUT" "$(basename "$tf")"
run_cli -w "$ws" -c "printf shadowed > '$tf' && cat '$tf'"
check "host /tmp canary: writing the same path inside works on the private /tmp" eq "$OUT" "shadowed"
check "host /tmp canary: the host file is unchanged" eq "$(cat "$tf")" "$tc"

# --- credential files in subdirectories (a monorepo's per-package .npmrc) ----------------
cs="npm-token-$(rnd)"
mkdir -p "$ws/pkgs/a"
for f in .npmrc .netrc .pypirc .git-credentials; do printf '%s %s\n' "$f" "$cs" >"$ws/pkgs/a/$f"; done
run_cli -w "$ws" -c 'cd pkgs/a; cat .npmrc .netrc .pypirc .git-credentials'
check "credential files in a subdirectory: none readable" not_contains "$(both)" "$cs"
run_cli -w "$ws" -c 'printf x > pkgs/a/.npmrc'
check "credential files in a subdirectory: not writable" eq "$(cat "$ws/pkgs/a/.npmrc")" ".npmrc $cs"

# --- a credential an environment variable places in the workspace ----------------------
# CARGO_HOME inside the workspace: the policy masks $CARGO_HOME/credentials.toml by path.
# Attack: one run moves the directory (or the file) away; the next run, whose mask names
# the old path, would read it. The directories above such a mask are held: neither moves.
ct="cargo-token-$(rnd)"
# cargo_home DIR (relative): a credential there; run 1 (MOVES) tries to move it away, run 2
# (READS) looks for it wherever it could have gone.
cargo_home() {
  mkdir -p "$ws/$1"
  printf 'token = "%s"\n' "$ct" >"$ws/$1/credentials.toml"
  CARGO_HOME="$ws/$1" run_cli -w "$ws" -c "cat $1/credentials.toml; $2; echo tried"
  check "CARGO_HOME at $1: its credentials unreadable" not_contains "$OUT" "$ct"
  check "... not moved" test -f "$ws/$1/credentials.toml"
  CARGO_HOME="$ws/$1" run_cli -w "$ws" -c "cat $3"
  check "... and the next run reads it nowhere" not_contains "$(both)" "$ct"
}
cargo_home .cargo 'mv .cargo .c2; mv .cargo/credentials.toml moved.toml' \
  '.c2/credentials.toml moved.toml .cargo/credentials.toml'
check "... nor the file" test ! -e "$ws/moved.toml"
rm -rf "$ws/.c2" "$ws/moved.toml" "$ws/.cargo"
# ... also in a package store the scan does not otherwise enter (node_modules, target).
cargo_home node_modules/cargo 'mv node_modules/cargo node_modules/moved; mv node_modules nm2' \
  'node_modules/moved/credentials.toml nm2/cargo/credentials.toml nm2/moved/credentials.toml'
rm -rf "$ws/node_modules" "$ws/nm2"
# ... inside a directory masked whole (.env*): the run still runs.
mkdir -p "$ws/.envdir/c"
printf 'token = "%s"\n' "$ct" >"$ws/.envdir/c/credentials.toml"
CARGO_HOME="$ws/.envdir/c" run_cli -w "$ws" -c 'cat .envdir/c/credentials.toml; echo ran'
check "CARGO_HOME inside a masked directory: the run runs" contains "$OUT" ran
check "... and reads nothing of it" not_contains "$(both)" "$ct"
rm -rf "$ws/.envdir"
# Spelled through the workspace but not canonically: a link there (into the workspace or
# out of it) that a command could re-point, or a ".." after a directory it could rename,
# between runs; the next run would mask a decoy, or nothing. Each is refused (125).
out=$(tmpdir)
mkdir -p "$ws/real" "$ws/decoy" "$ws/a" "$out/cargo"
printf 'token = "%s"\n' "$ct" | tee "$ws/real/credentials.toml" "$out/cargo/credentials.toml" >/dev/null
touch "$ws/decoy/credentials.toml" "$ws/real/credentials" "$out/cargo/credentials"
ln -s real "$ws/link"
ln -s "$out/cargo" "$ws/outlink"
# ... and a spelling that starts and ends outside but passes through the workspace on its
# way (a link outside pointing in, a link there pointing out; or "..": a command removes
# the hop, and the next run's path resolves to nothing, masking nothing).
mkdir -p "$ws/hop"
ln -s "$out/cargo" "$ws/hop/c"
ln -s "$ws/hop" "$out/L"
for spelled in "$ws/link" "$ws/outlink" "$ws/a/../real" "$out/L/c" "$out/L/../../$(basename "$out")/cargo"; do
  CARGO_HOME="$spelled" run_cli -w "$ws" -c "cat real/credentials.toml $out/cargo/credentials.toml"
  check "CARGO_HOME=${spelled#"$ws"/} (the workspace's): refused (125)" eq "$RC" 125
  check "... saying why" contains "$ERR" "leads through the workspace"
  check "... nothing read" not_contains "$OUT" "$ct"
done
rm -rf "$ws/real" "$ws/decoy" "$ws/link" "$ws/outlink" "$ws/a" "$ws/hop" "$out/L"


# Credential files and directories named by other tools' variables: masked where they are
# (outside /tmp and the hidden roots, which hide them anyway: under /mnt as root). And
# Gradle's store in a GRADLE_USER_HOME that is re-exposed as a toolchain root.
gt="gradle-secret-$(rnd)"
gh=$(mktemp -d "$HOME/.a3s-spec-gradle-XXXXXX") || exit 1
echo "$gh" >>"$_tmp_list"
printf 'gradle.publish.secret=%s\n' "$gt" >"$gh/gradle.properties"
mkdir -p "$gh/caches"
chmod 0755 "$gh"
chmod 0644 "$gh/gradle.properties"
GRADLE_USER_HOME=$gh run_cli -w "$ws" -c "ls $gh; cat $gh/gradle.properties"
check "GRADLE_USER_HOME (re-exposed): the run runs, the root is there" contains "$OUT" caches
check "... its gradle.properties is not read" not_contains "$(both)" "$gt"
if [ "$(id -u)" -eq 0 ]; then
  cr=$(mktemp -d /mnt/a3s-spec-creds-XXXXXX) || exit 1
  echo "$cr" >>"$_tmp_list"
  chmod 0755 "$cr"
  vt="var-secret-$(rnd)"
  for f in aws-credentials aws-config gcloud.json npmrc npmrc-lower netrc kube1 kube2 \
           pgpass web-token registry-auth age-key; do
    printf '%s-%s\n' "$vt" "$f" >"$cr/$f"
  done
  for d in docker gnupg gh azure gcloud pass xdg-config/gh; do
    mkdir -p "$cr/$d" && printf '%s-%s\n' "$vt" "$d" >"$cr/$d/secret"
  done
  AWS_SHARED_CREDENTIALS_FILE=$cr/aws-credentials AWS_CONFIG_FILE=$cr/aws-config \
    GOOGLE_APPLICATION_CREDENTIALS=$cr/gcloud.json NPM_CONFIG_USERCONFIG=$cr/npmrc \
    NETRC=$cr/netrc KUBECONFIG=$cr/kube1:$cr/kube2 DOCKER_CONFIG=$cr/docker \
    GNUPGHOME=$cr/gnupg GH_CONFIG_DIR=$cr/gh AZURE_CONFIG_DIR=$cr/azure \
    CLOUDSDK_CONFIG=$cr/gcloud npm_config_userconfig=$cr/npmrc-lower PGPASSFILE=$cr/pgpass \
    AWS_WEB_IDENTITY_TOKEN_FILE=$cr/web-token REGISTRY_AUTH_FILE=$cr/registry-auth \
    SOPS_AGE_KEY_FILE=$cr/age-key PASSWORD_STORE_DIR=$cr/pass XDG_CONFIG_HOME=$cr/xdg-config \
    run_cli -w "$ws" -c "ls $cr; cat $cr/* $cr/*/secret $cr/*/*/secret; true"
  check "credential variables of other tools: the run runs, the directory is there" \
    contains "$OUT" kube2
  check "... none of the files they name is read" not_contains "$(both)" "$vt"
fi

finish
