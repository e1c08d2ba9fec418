#!/usr/bin/env bash
# The relay's channel to the mediator (relay/README.md; THREAT_MODEL.md): with a grant, the
# command can never obtain an AF_UNIX socket or make anything look a socket path up. It
# cannot re-point the relay (no socket path exists to replace), cannot ptrace the relay or
# copy its fds (pidfd_getfd), cannot reach a host socket through a datagram socketpair,
# and a policy allowing AF_UNIX still gets none in mediated mode. Asserted on the host:
# the host socket servers never see a connection or a byte.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
state=$(tmpdir)
chmod 0755 "$ws" "$state"

# Host-side Unix servers the sandbox can see (in the workspace, bound read-write): a
# stream listener and a datagram socket, each logging what reaches it.
cat >"$state/unix_servers.py" <<'PY'
import os, socket, sys, threading
log = open(sys.argv[1], "a", buffering=1)
st = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); st.bind(sys.argv[2]); st.listen(8)
dg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); dg.bind(sys.argv[3])
os.chmod(sys.argv[2], 0o777); os.chmod(sys.argv[3], 0o777)
print("ready", flush=True)
def stream():
    while True:
        c, _ = st.accept(); log.write("stream-connection\n"); c.close()
def dgram():
    while True:
        d = dg.recv(4096); log.write("datagram " + d.decode(errors="replace") + "\n")
threading.Thread(target=stream, daemon=True).start()
dgram()
PY
python3 "$state/unix_servers.py" "$state/log" "$ws/host.sock" "$ws/host.dgram" >"$state/ready" &
srv=$!
trap 'kill $srv 2>/dev/null; cleanup' EXIT
for _ in $(seq 50); do [ -s "$state/ready" ] && break; sleep 0.05; done
check "host unix servers started" test -S "$ws/host.sock" -a -S "$ws/host.dgram"
touch "$state/log"
seen() { cat "$state/log"; }

# The probe: ptrace and pidfd_getfd on the relay, sockets of every kind.
cat >"$state/probe.c" <<'EOF'
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
static void say(const char *what, long rc)
{
    printf("%s=%s\n", what, rc < 0 ? strerror(errno) : "OK");
}
int main(int argc, char **argv)
{
    pid_t relay = atoi(argv[1]);
    say("ptrace", ptrace(PTRACE_ATTACH, relay, 0, 0));
    long pfd = syscall(SYS_pidfd_open, relay, 0);
    say("pidfd_open", pfd);
    int copied = 0;
    for (int fd = 3; pfd >= 0 && fd < 64; fd++)
        if (syscall(SYS_pidfd_getfd, (int)pfd, fd, 0) >= 0)
            copied++;
    printf("pidfd_getfd_copied=%d\n", copied);
    say("socket_unix", socket(AF_UNIX, SOCK_STREAM, 0));
    say("socket_unix_dgram", socket(AF_UNIX, SOCK_DGRAM, 0));
    int sv[2];
    say("socketpair_dgram", socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
    long r = socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv);
    if (r == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[2]);
        say("sendto_host", sendto(sv[0], "escaped", 7, 0, (struct sockaddr *)&sa, sizeof sa));
    }
    say("socketpair_stream", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    say("socketpair_seqpacket", socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
    return 0;
}
EOF
cc -O2 -o "$ws/probe" "$state/probe.c" 2>/dev/null
check "probe built" test -x "$ws/probe"

# The relay is the launcher's parent, the launcher the command's.
relay_pid='r=$(awk "/^PPid/{print \$2}" /proc/$PPID/status)'

for mode in grant none; do
  g=()
  [ "$mode" = grant ] && g=(--grant 127.0.0.1:9)
  run_cli -w "$ws" "${g[@]}" -c "$relay_pid; ./probe \$r '$ws/host.dgram'"
  [ "$mode" = grant ] || continue
  check "[$mode] ran" eq "$RC" 0
  check "[$mode] ptrace of the relay refused" contains "$OUT" "ptrace=Operation not permitted"
  check "[$mode] no fd of the relay can be copied" contains "$OUT" "pidfd_getfd_copied=0"
  check "[$mode] socket(AF_UNIX) refused" not_contains "$OUT" "socket_unix=OK"
  check "[$mode] socket(AF_UNIX, SOCK_DGRAM) refused" not_contains "$OUT" "socket_unix_dgram=OK"
  check "[$mode] socketpair(AF_UNIX, SOCK_DGRAM) refused" not_contains "$OUT" "socketpair_dgram=OK"
  check "[$mode] socketpair(SOCK_STREAM) still works" contains "$OUT" "socketpair_stream=OK"
  check "[$mode] socketpair(SOCK_SEQPACKET) still works" contains "$OUT" "socketpair_seqpacket=OK"
done
# Without a grant too: no datagram socketpair can be re-addressed to a host socket.
run_cli -w "$ws" -c "./probe 1 '$ws/host.dgram'"
check "[no grant] socketpair(AF_UNIX, SOCK_DGRAM) refused" not_contains "$OUT" "socketpair_dgram=OK"

# Re-pointing: whatever the command creates where an old relay looked for the mediator,
# the relay never looks anything up; connections to its proxy never reach the host socket.
cat >"$state/client.py" <<'PY'
import os, socket, sys
tmp = os.environ.get("TMPDIR", "/tmp")
for name in (".a3s-mediator.sock",):
    p = os.path.join(tmp, name)
    try: os.unlink(p)
    except OSError: pass
    os.symlink(sys.argv[1], p)
for _ in range(3):
    c = socket.create_connection(("127.0.0.1", 24731), timeout=5)
    c.sendall(b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
    try: print(c.recv(100).decode(errors="replace").splitlines()[0])
    except Exception as e: print("no reply", e)
    c.close()
PY
cp "$state/client.py" "$ws/client.py"
run_cli -w "$ws" --grant example.invalid:443 -- python3 client.py "$ws/host.sock"
check "re-pointing: the host stream socket saw no connection" not_contains "$(seen)" "stream-connection"
check "re-pointing: the proxy still answers (the mediator decided)" contains "$OUT" "HTTP/1.1 403"

# A policy that allows AF_UNIX: none in mediated mode.
pol=$(tmpdir)
chmod 0755 "$pol"
cat >"$pol/unix-ok.lua" <<'EOF'
local plan = a3s.extend("baseline", "unix-ok")
plan:seccomp{ socket_families = { "AF_UNIX" } }
return plan
EOF
run_cli -w "$ws" --policy "$pol/unix-ok.lua" --grant 127.0.0.1:9 -c "$relay_pid; ./probe \$r '$ws/host.dgram'"
check "policy allowing AF_UNIX, mediated: socket(AF_UNIX) still refused" \
  not_contains "$OUT" "socket_unix=OK"

sleep 0.2
check "host side: no datagram reached the host socket" not_contains "$(seen)" "datagram"
check "host side: no stream connection reached the host socket" not_contains "$(seen)" "stream-connection"
finish
