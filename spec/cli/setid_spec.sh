#!/usr/bin/env bash
# Set-uid/set-gid files (systemd's RestrictSUIDSGID=): whatever the command uses (chmod,
# install, mkdir -m, cp -p, tar -p, python, perl, raw syscalls), no file or directory
# with S_ISUID or S_ISGID appears in the host workspace. Ordinary modes still work.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
outside=$(tmpdir)
have() { command -v "$1" >/dev/null 2>&1; }
nonzero() { [ "$1" -ne 0 ] || { echo "#   exit status was 0"; return 1; }; }
mode_of() { stat -c %a "$1" 2>&1; }

# Set-id entries in the workspace as the host sees them, one "mode path" per line.
setid_in_ws() { find "$ws" -perm /6000 -printf '%m %p\n' 2>&1; }

# attempt WHAT ARGS...: run the CLI in the workspace, then check from the host that no
# set-id entry exists. Anything found is neutralised so that later checks start clean.
attempt() {
  local what=$1 found; shift
  printf x >"$ws/f" && chmod 0644 "$ws/f"
  run_cli -w "$ws" "$@"
  found=$(setid_in_ws)
  check "$what: no set-id entry in the workspace" eq "$found" ""
  [ -z "$found" ] || find "$ws" -perm /6000 -exec chmod ug-s {} +
}
# refused WHAT ARGS...: attempt, and the command must also report the failure.
refused() {
  attempt "$@"
  check "$1: the command fails" nonzero "$RC"
}

# --- the attack itself ----------------------------------------------------------------------
refused "cp /bin/sh; chmod 4755" -c 'cp /bin/sh ./x && chmod 4755 ./x'
check "cp /bin/sh worked (control): ./x is there, mode 755" eq "$(mode_of "$ws/x")" 755

# --- chmod(1) in every spelling ---------------------------------------------------------------
for m in u+s g+s ug+s 4755 2755 6755 4000 2644; do
  refused "chmod $m" -c "chmod $m f"
done
refused "chmod 4755 (argv form)" -- chmod 4755 f
refused "chmod --reference of a set-uid file" -c 'chmod --reference=/usr/bin/passwd f'
refused "chmod -R g+s" -c 'mkdir -p tree/sub && chmod -R g+s tree'

# --- install, mkdir -m, cp -p, tar -p -------------------------------------------------------
refused "install -m 4755" -c 'install -m 4755 /bin/sh ./inst'
refused "install -m 2755" -c 'install -m 2755 /bin/sh ./inst2'
refused "install -d -m 2755" -c 'install -d -m 2755 ./instdir'
refused "mkdir -m 2755" -c 'mkdir -m 2755 ./d2755'
refused "mkdir -m 4755" -c 'mkdir -m 4755 ./d4755'
# Copies of a set-uid and of a set-gid program of the host, when it has them.
host_suid=$(find /usr/bin/passwd /usr/bin/su /usr/bin/mount /bin -maxdepth 1 -type f -perm -4000 2>/dev/null | head -n 1)
host_sgid=$(find /usr/bin/ssh-agent /usr/bin/chage /usr/bin/expiry /usr/bin -maxdepth 1 -type f -perm -2000 2>/dev/null | head -n 1)
for src in $host_suid $host_sgid; do
  attempt "cp -p $src" -c "cp -p $src ./copied"
  attempt "cp -a $src" -c "cp -a $src ./copied-a"
  attempt "cp --preserve=mode $src" -c "cp --preserve=mode $src ./copied-m"
done
[ -n "$host_suid$host_sgid" ] || pass "cp -p of a host set-id program # SKIP none found"

# An archive with a set-uid and a set-gid member, made on the host outside the workspace.
mkdir -p "$outside/tree/gdir" && cp /bin/true "$outside/tree/suid" &&
  chmod 4755 "$outside/tree/suid" && chmod 2755 "$outside/tree/gdir" &&
  tar -cf "$ws/setid.tar" -C "$outside/tree" . &&
  check "setup: the archive holds a set-uid member" contains "$(tar -tvf "$ws/setid.tar")" rws
attempt "tar -xpf of set-id members" -c 'mkdir -p untar && tar -xpf setid.tar -C untar'
attempt "tar -xf --same-permissions" -c 'mkdir -p untar2 && tar --same-permissions -xf setid.tar -C untar2'

# --- interpreters ---------------------------------------------------------------------------
if have python3; then
  py() { refused "$1" -- python3 -c "import os, stat; $2"; }
  py "python os.chmod 0o4755" 'os.chmod("f", 0o4755)'
  py "python os.chmod 0o2755" 'os.chmod("f", 0o2755)'
  py "python os.fchmod 0o6755" 'fd = os.open("f", os.O_RDONLY); os.fchmod(fd, 0o6755)'
  py "python os.open O_CREAT 0o4755" 'os.open("p", os.O_CREAT | os.O_WRONLY, 0o4755)'
  py "python os.open O_CREAT|O_EXCL 0o2755" 'os.open("p2", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o2755)'
  py "python os.open O_TMPFILE 0o4755" 'os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o4755)'
  py "python os.mkdir 0o2755" 'os.mkdir("pd", 0o2755)'
  py "python os.mknod S_IFREG|0o4755" 'os.mknod("pn", stat.S_IFREG | 0o4755)'
  py "python os.chmod through a symlink" 'os.symlink("f", "lnk"); os.chmod("lnk", 0o4755)'
  # Raw syscalls through libc (the numbers are the same on x86_64 and aarch64).
  sysc='import ctypes, os; l = ctypes.CDLL(None, use_errno=True); l.syscall.restype = ctypes.c_long'
  run_cli -w "$ws" -- python3 -c "$sysc; r = l.syscall(452, -100, b\"f\", 0o4755, 0); print(r, ctypes.get_errno())"
  case "$OUT" in "-1 1" | "-1 38") pass "fchmodat2(04755): EPERM or ENOSYS" ;;
    *) fail "fchmodat2(04755): EPERM or ENOSYS (got '$OUT' $ERR)" ;; esac
  check "fchmodat2(04755): no set-id entry in the workspace" eq "$(setid_in_ws)" ""
  run_cli -w "$ws" -- python3 -c "$sysc; h = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o4755, 0); r = l.syscall(437, -100, b\"o2\", h, 24); print(r, ctypes.get_errno())"
  check "openat2(O_CREAT, 04755): ENOSYS" eq "$OUT" "-1 38"
  check "openat2: nothing created" test ! -e "$ws/o2"
  check "openat2: no set-id entry in the workspace" eq "$(setid_in_ws)" ""
else
  pass "python checks # SKIP python3 is not installed"
fi
if have perl; then
  refused "perl chmod 04755" -- perl -e 'chmod(04755, "f") or die "chmod: $!\n"'
  refused "perl sysopen O_CREAT 02755" -- perl -MFcntl -e 'sysopen(my $h, "pl", O_CREAT | O_WRONLY, 02755) or die "sysopen: $!\n"'
  refused "perl mkdir 02755" -- perl -e 'mkdir("pld", 02755) or die "mkdir: $!\n"; chmod(02755, "pld") or die "chmod: $!\n"'
else
  pass "perl checks # SKIP perl is not installed"
fi

# --- ordinary modes still work ------------------------------------------------------------------
printf x >"$ws/plain" && chmod 0644 "$ws/plain"
run_cli -w "$ws" -c 'chmod 0755 plain'
check "chmod 0755: exit 0" eq "$RC" 0
check "chmod 0755: applied on the host" eq "$(mode_of "$ws/plain")" 755
run_cli -w "$ws" -c 'chmod 0600 plain'
check "chmod 0600: exit 0" eq "$RC" 0
check "chmod 0600: applied on the host" eq "$(mode_of "$ws/plain")" 600
run_cli -w "$ws" -c 'chmod u+x,go-rwx plain && install -m 0750 /bin/sh ./inst-ok && mkdir -m 0700 dir-ok && mkdir -m 1777 sticky-ok'
check "chmod u+x, install -m 0750, mkdir -m 0700 / 1777: exit 0" eq "$RC" 0
check "install -m 0750 applied" eq "$(mode_of "$ws/inst-ok")" 750
check "mkdir -m 0700 applied" eq "$(mode_of "$ws/dir-ok")" 700
check "mkdir -m 1777 (sticky) applied" eq "$(mode_of "$ws/sticky-ok")" 1777
if have python3; then
  run_cli -w "$ws" -- python3 -c 'import os; os.close(os.open("py-ok", os.O_CREAT | os.O_WRONLY, 0o640)); os.chmod("py-ok", 0o604)'
  check "python os.open 0o640 + os.chmod 0o604: exit 0" eq "$RC" 0
  check "python modes applied" eq "$(mode_of "$ws/py-ok")" 604
fi
check "finally: no set-id entry in the workspace" eq "$(setid_in_ws)" ""

# --- the workspace root's mode is restored (a 0777 workspace lets anyone plant files) ----
chmod 0750 "$ws"
run_cli -w "$ws" -c 'chmod 0777 . && stat -c %a .'
check "chmod 0777 of the workspace root: it took effect inside" eq "$OUT" 777
check "chmod 0777 of the workspace root: restored on the host afterwards" \
  eq "$(mode_of "$ws")" 750
run_cli -w "$ws" -t 1 -c 'chmod 0777 .; sleep 30'
check "chmod 0777, then killed by the deadline: still restored" eq "$(mode_of "$ws")" 750
# ... and its ACLs: a default ACL would make what host tools create there writable.
before_acl=$(getfacl -p "$ws" 2>/dev/null)
run_cli -w "$ws" -c 'setfacl -d -m o::rwx . && setfacl -m o::rwx . && getfacl -p . | grep -c default'
check "setfacl on the workspace root: it took effect inside" test "${OUT:-0}" -gt 0
check "setfacl on the workspace root: ACLs restored on the host afterwards" \
  eq "$(getfacl -p "$ws" 2>/dev/null)" "$before_acl"
check "setfacl on the workspace root: mode restored too" eq "$(mode_of "$ws")" 750

finish
