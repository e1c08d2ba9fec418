#!/usr/bin/env bash
# Escape attempts, checked from the host: namespaces cannot be re-entered or created,
# host processes are invisible and unreachable, mounts/hostname/link/TTY injection/kernel
# keyring/bpf/perf are refused, and ordinary toolchains still work read-only without
# writing anything outside the workspace.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed for the syscall probes"

ws=$(tmpdir)
fakehome=$(tmpdir)
hosttmp=$(tmpdir)
hosttmp=$(cd "$hosttmp" && pwd -P)
mkdir -p "$fakehome/.config"
printf 'home-file\n' >"$fakehome/.config/settings"
home_before=$(cd "$fakehome" && find . -printf '%p %s %T@\n' | sort)

# All runs in this spec see a private host temp dir and a populated fake HOME, so that
# "nothing was written outside the workspace" can be checked exactly afterwards.
sb() { local o e; o=$(mktemp) e=$(mktemp)
  env HOME="$fakehome" TMPDIR="$hosttmp" "$A3S" -w "$ws" "$@" >"$o" 2>"$e" </dev/null
  RC=$?; OUT=$(cat "$o") ERR=$(cat "$e"); rm -f "$o" "$e"; }
nonzero() { [ "$1" -ne 0 ] || { echo "#   exit status was 0"; return 1; }; }
lt() { [ "$1" -lt "$2" ] || { echo "#   $1 is not < $2"; return 1; }; }
matches_any() { [ "$1" = "-1 1" ] || [ "$1" = "-1 38" ] || { echo "#   got '$1'"; return 1; }; }
# A raw syscall (x86_64 numbers) through ctypes: OUT is "<ret> <errno>". On another
# architecture OUT is "skip" and the checks comparing it are reported as skipped.
scheck() { if [ "$OUT" = skip ]; then pass "$1 # SKIP raw syscall numbers are x86_64 only"; else check "$@"; fi; }
x86_64=0; [ "$(uname -m)" = x86_64 ] && x86_64=1
pysys() { [ "$x86_64" = 1 ] || { OUT=skip; return; }; sb -c "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); l.syscall.restype = ctypes.c_long; r = l.syscall($1); print(r, ctypes.get_errno())'"; }

# Guard: the payloads below are harmless inside a sandbox but not all of them on the
# host. Make sure commands really run in their own pid/uts/mount namespaces first.
host_uts=$(cat /proc/sys/kernel/hostname)
sb -c 'cat /proc/sys/kernel/hostname; ls /proc | grep -c "^[0-9]"; test -w /usr && echo usr-writable; true'
if [ "$(sed -n 1p <<<"$OUT")" != a3s-sandbox ] || [ "$(sed -n 1p <<<"$OUT")" = "$host_uts" ] ||
   [ "$(sed -n 2p <<<"$OUT")" -ge 10 ] 2>/dev/null || contains "$OUT" usr-writable >/dev/null; then
  fail "guard: commands run inside a sandbox (got: ${OUT:0:200}); not running the escape payloads"
  finish
fi
pass "guard: commands run inside a sandbox"

# --- user/other namespaces cannot be created ------------------------------------------------
sb -c 'unshare -U true && echo escaped'
check "unshare -U true fails" nonzero "$RC"
check "unshare -U: no success marker" not_contains "$OUT" escaped
sb -c 'unshare -r id && echo escaped'
check "unshare -r id fails" nonzero "$RC"
check "unshare -r: no success marker" not_contains "$OUT" escaped
sb -c "python3 -c 'import os; os.unshare(0x10000000)'"
check "python os.unshare(CLONE_NEWUSER) fails" nonzero "$RC"
pysys "272, 0x10000000"
scheck "unshare(CLONE_NEWUSER) syscall: EPERM" eq "$OUT" "-1 1"
pysys "272, 0x00020000"
scheck "unshare(CLONE_NEWNS) syscall: EPERM" eq "$OUT" "-1 1"
# clone(CLONE_NEWUSER|SIGCHLD): refused before any child exists.
pysys "56, 0x10000000 | 17, 0, 0, 0, 0"
scheck "clone(CLONE_NEWUSER) syscall: EPERM" eq "$OUT" "-1 1"
pysys "435, 0, 0"
scheck "clone3: ENOSYS (so libc falls back to clone)" eq "$OUT" "-1 38"
sb -c "python3 -c 'import os, ctypes; l = ctypes.CDLL(None, use_errno=True); fd = os.open(\"/proc/self/ns/mnt\", os.O_RDONLY); print(l.setns(fd, 0), ctypes.get_errno())'"
check "setns: EPERM" eq "$OUT" "-1 1"

# --- host processes are invisible and unreachable ---------------------------------------------
host_init=$(tr '\0\n' '  ' </proc/1/cmdline)
sb -c 'ls /proc | grep -c "^[0-9]"; tr "\0\n" "  " </proc/1/cmdline'
check "/proc/1 readable inside" eq "$RC" 0
inside_init=$(sed -n 2p <<<"$OUT")
check "PID 1 inside is not the host's init" test "$inside_init" != "$host_init"
check "PID 1 inside does not show the host init command" not_contains "$inside_init" "${host_init%% *}"
# The launcher: in a fresh run bwrap's --as-pid-1 makes it pid 1; in a session's command,
# the launcher that joined the session. (bwrap's own reaper in a mediated run.)
own_init() { case "$1" in *bwrap* | *" --setup "*) return 0 ;; esac; echo "#   $1"; return 1; }
check "PID 1 inside is the sandbox's own init" own_init "$inside_init"
check "only a handful of PIDs are visible inside" lt "$(sed -n 1p <<<"$OUT")" 10
check "control: the host has more PIDs than that" test "$(ls /proc | grep -c '^[0-9]')" -ge 10

sleep 31.777 &
host_pid=$!
# The pattern 31[.]777 does not match its own command line.
sb -c "grep -l '31[.]777' /proc/[0-9]*/cmdline 2>/dev/null; echo listed-done"
check "a host process is not listed inside" eq "$OUT" "listed-done"
sb -c "kill -0 $host_pid 2>/dev/null; echo kill-rc=\$?"
check "a host process cannot be signalled" eq "$OUT" "kill-rc=1"
sb -c "kill -9 $host_pid 2>/dev/null; true"
check "the host process is still alive" kill -0 "$host_pid"
kill "$host_pid" 2>/dev/null
wait "$host_pid" 2>/dev/null

# --- mounts, hostname, links --------------------------------------------------------------------
mkdir -p "$ws/mnt"
sb -c 'mount -t tmpfs none /mnt && echo mounted'
check "mount -t tmpfs on /mnt fails" nonzero "$RC"
check "mount: no success marker" not_contains "$OUT" mounted
sb -c 'mount -t tmpfs none mnt && echo mounted'
check "mount -t tmpfs in the workspace fails" nonzero "$RC"
check "no mount appeared in the host's mount table" not_contains "$(cat /proc/mounts)" "$ws/mnt"
pysys "430, b\"tmpfs\", 0"
scheck "fsopen (mount API): refused (EPERM or ENOSYS)" matches_any "$OUT"
pysys "428, -100, b\"/\", 0"
scheck "open_tree (mount API): refused (EPERM or ENOSYS)" matches_any "$OUT"
pysys "165, b\"none\", b\"mnt\", b\"tmpfs\", 0, 0"
scheck "mount(2) syscall: EPERM" eq "$OUT" "-1 1"

host_hostname=$(cat /proc/sys/kernel/hostname)
sb -c 'cat /proc/sys/kernel/hostname; uname -n'
check "hostname inside is a3s-sandbox" eq "$OUT" "a3s-sandbox
a3s-sandbox"
# Writes back the current name: refused inside, and a no-op wherever it might not be.
sb -c 'v=$(cat /proc/sys/kernel/hostname) && printf "%s\n" "$v" > /proc/sys/kernel/hostname && echo wrote'
check "writing /proc/sys/kernel/hostname fails" nonzero "$RC"
sb -c "python3 -c 'import socket; socket.sethostname(socket.gethostname()); print(\"set\")'"
check "sethostname fails" nonzero "$RC"
check "the host's hostname is unchanged" eq "$(cat /proc/sys/kernel/hostname)" "$host_hostname"
# Host-global (non-namespaced) sysctls: writing back the current value changes nothing
# on the host, but must be refused. (A root caller is uid 0 inside; /proc/sys files are
# root-owned 0644, so only a read-only /proc/sys stops this.)
for k in kernel/printk_ratelimit vm/swappiness; do
  [ -e "/proc/sys/$k" ] || continue
  before=$(cat "/proc/sys/$k")
  sb -c "v=\$(cat /proc/sys/$k) && printf '%s\n' \"\$v\" > /proc/sys/$k && echo wrote"
  check "host-global sysctl $k cannot be written" not_contains "$OUT" wrote
  check "host-global sysctl $k unchanged" eq "$(cat "/proc/sys/$k")" "$before"
done
if [ -e /proc/sysrq-trigger ]; then
  sb -c 'test -w /proc/sysrq-trigger && echo sysrq-writable; true'
  check "/proc/sysrq-trigger is not writable (access check only)" not_contains "$OUT" sysrq-writable
fi

sb -c 'echo x > link-src && ln link-src link-dst && echo linked'
check "ln (hard link) fails" nonzero "$RC"
check "ln: no link on the host" test ! -e "$ws/link-dst"
check "ln: the source was written (control)" test -e "$ws/link-src"
pysys "265, -100, b\"link-src\", -100, b\"link-dst2\", 0"
scheck "linkat syscall: EPERM" eq "$OUT" "-1 1"
check "linkat: no link on the host" test ! -e "$ws/link-dst2"

# --- TTY injection, keyring, bpf, perf, userfaultfd, io_uring ----------------------------------
sb -c "python3 -c 'import fcntl, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI, b\"x\"); print(\"injected\")
except OSError as e:
    print(e.errno)'"
check "TIOCSTI: EPERM (not ENOTTY)" eq "$OUT" 1
pysys "16, 0, 0x541C, b\"x\""
scheck "TIOCLINUX: EPERM" eq "$OUT" "-1 1"
pysys "16, 0, ctypes.c_ulong(0x100005412), b\"x\""
scheck "TIOCSTI with high bits set: EPERM (32-bit compare)" eq "$OUT" "-1 1"
pysys "250, 0, ctypes.c_long(-3), 0"
scheck "keyctl: EPERM" eq "$OUT" "-1 1"
pysys "248, b\"user\", b\"a3s\", b\"x\", 1, ctypes.c_long(-3)"
scheck "add_key: EPERM" eq "$OUT" "-1 1"
pysys "249, b\"user\", b\"a3s\", 0, 0"
scheck "request_key: EPERM" eq "$OUT" "-1 1"
pysys "321, 0, 0, 0"
scheck "bpf: EPERM" eq "$OUT" "-1 1"
pysys "298, 0, 0, -1, -1, 0"
scheck "perf_event_open: EPERM" eq "$OUT" "-1 1"
pysys "323, 0"
scheck "userfaultfd: EPERM" eq "$OUT" "-1 1"
pysys "425, 1, 0"
scheck "io_uring_setup: refused (EPERM or ENOSYS)" matches_any "$OUT"

# --- toolchains work, read-only ------------------------------------------------------------
sb -c "python3 -c 'print(6*7)'"
check "python3 works" eq "$OUT" 42
printf '#include <stdio.h>\nint main(void){puts("hello from cc");return 0;}\n' >"$ws/hello.c"
sb -c 'cc -o hello hello.c && ./hello'
check "cc compiles and runs in the workspace" eq "$OUT" "hello from cc"
check "cc output landed in the workspace" test -x "$ws/hello"
sb -c "lua5.4 -e 'print(1+1)'"
check "lua5.4 works" eq "$OUT" 2
sb -c 'git init -q repo2 && git -C repo2 status --short && echo git-ok'
check "git init in a subdirectory works" eq "$RC" 0
check "git status in the subdirectory works" contains "$OUT" git-ok
check "repo2/.git exists on the host" test -d "$ws/repo2/.git"
sb -c 'git init -q . && echo top-level-init'
check "top-level git init fails (.git is pinned)" nonzero "$RC"
check "top-level git init: no success marker" not_contains "$OUT" top-level-init
check "top-level git init: no .git left in the workspace" test ! -e "$ws/.git"
sb -c 'touch /usr/a3s-escape-probe; echo x > /etc/a3s-escape-probe; echo x > "'"$fakehome"'/.config/settings"; echo x > "'"$hosttmp"'/escape"; echo x > /tmp/a3s-escape-probe-'$$'; true'
check "no file created under /usr" test ! -e /usr/a3s-escape-probe
check "no file created under /etc" test ! -e /etc/a3s-escape-probe
check "/tmp inside is private" test ! -e "/tmp/a3s-escape-probe-$$"
rm -f /usr/a3s-escape-probe /etc/a3s-escape-probe "/tmp/a3s-escape-probe-$$" 2>/dev/null

# Nothing of the above was written outside the workspace.
check "the caller's HOME is unchanged" eq "$(cd "$fakehome" && find . -printf '%p %s %T@\n' | sort)" "$home_before"
check "the host temp dir is empty (scratch removed)" eq "$(ls -A "$hosttmp")" ""

finish
