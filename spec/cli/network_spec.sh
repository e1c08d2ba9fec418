#!/usr/bin/env bash
# Network (the baseline's private network namespace): no socket of any family
# can be created, socketpair(AF_UNIX) still works, a listener on the host is never
# contacted, and the sandbox sees only its own loopback interface.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed for the listener"

ws=$(tmpdir)
side=$(tmpdir)

# Positive control: python works inside, so the failures below are the boundary's.
run_cli -w "$ws" -c "python3 -c 'print(\"py-ok\")'"
check "python3 runs inside" eq "$OUT" "py-ok"

run_cli -w "$ws" -c 'python3 -c "import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); print(\"bound\")"'
check "AF_INET socket+bind fails (non-zero)" test "$RC" -ne 0
check "AF_INET: nothing bound" not_contains "$OUT" "bound"
check "AF_INET: failed at socket creation" contains "$ERR" "Error"

run_cli -w "$ws" -c 'python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.bind(\"blocked.sock\"); print(\"bound\")"'
check "AF_UNIX socket+bind fails (non-zero)" test "$RC" -ne 0
check "AF_UNIX: nothing bound" not_contains "$OUT" "bound"
check "AF_UNIX: no socket file on the host" test ! -e "$ws/blocked.sock"

# Every family, every type: creation is refused.
run_cli -w "$ws" -c 'python3 - <<"EOF"
import socket
fams = [("INET", socket.AF_INET, socket.SOCK_STREAM), ("INET_DGRAM", socket.AF_INET, socket.SOCK_DGRAM),
        ("INET6", socket.AF_INET6, socket.SOCK_STREAM), ("UNIX", socket.AF_UNIX, socket.SOCK_STREAM),
        ("UNIX_DGRAM", socket.AF_UNIX, socket.SOCK_DGRAM), ("NETLINK", socket.AF_NETLINK, socket.SOCK_RAW),
        ("PACKET", socket.AF_PACKET, socket.SOCK_RAW), ("VSOCK", 40, socket.SOCK_STREAM)]
for name, fam, typ in fams:
    try:
        socket.socket(fam, typ).close()
        print(name, "created")
    except OSError as e:
        print(name, "denied", e.errno)
EOF'
check "socket families probe ran" eq "$RC" 0
check "no socket family can be created" not_contains "$OUT" "created"
check "socket families probe covered 8 families" eq "$(grep -c denied <<<"$OUT")" 8

# socketpair(AF_UNIX) cannot reach outside and must keep working.
run_cli -w "$ws" -c "python3 -c 'import socket; a,b=socket.socketpair(); a.send(b\"x\"); print(b.recv(1))'"
check "socketpair(AF_UNIX) works" eq "$RC" 0
check "socketpair(AF_UNIX) carries bytes" eq "$OUT" "b'x'"

# --- a host listener is never contacted ------------------------------------------------
cat >"$side/listener.py" <<'EOF'
import socket, sys, threading
log, portfile = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 0))
srv.listen(16)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
import os; os.rename(portfile + ".tmp", portfile)
while True:
    c, addr = srv.accept()
    with open(log, "a") as f:
        f.write("accepted %s\n" % (addr,))
    c.close()
EOF
: >"$side/accepted.log"
python3 "$side/listener.py" "$side/accepted.log" "$side/port" &
listener_pid=$!
trap 'kill "$listener_pid" 2>/dev/null; wait "$listener_pid" 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do [ -s "$side/port" ] && break; sleep 0.05; done
port=$(cat "$side/port" 2>/dev/null)
if [ -z "$port" ]; then
  fail "host listener started"
else
  pass "host listener started on port $port"
  # Control: the listener does record a connection from the host.
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
  for _ in $(seq 40); do [ -s "$side/accepted.log" ] && break; sleep 0.05; done
  check "control: the listener records a host connection" test -s "$side/accepted.log"
  : >"$side/accepted.log"
  hostip=$(ip -4 -o addr show scope global 2>/dev/null | awk '{sub(/\/.*/, "", $4); print $4; exit}')
  [ -n "$hostip" ] || hostip=127.0.0.1

  run_cli -w "$ws" -c "bash -c 'exec 3<>/dev/tcp/127.0.0.1/$port' && echo connected"
  check "bash /dev/tcp to 127.0.0.1:$port fails" test "$RC" -ne 0
  check "bash /dev/tcp: not connected" not_contains "$OUT" "connected"
  run_cli -w "$ws" -c "bash -c 'exec 3<>/dev/tcp/$hostip/$port' && echo connected"
  check "bash /dev/tcp to the host address $hostip fails" test "$RC" -ne 0
  run_cli -w "$ws" -c "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $port), timeout=2); print(\"connected\")'"
  check "python connect to 127.0.0.1:$port fails" test "$RC" -ne 0
  check "python connect: not connected" not_contains "$OUT" "connected"
  run_cli -w "$ws" -c "python3 -c 'import socket; socket.create_connection((\"$hostip\", $port), timeout=2); print(\"connected\")'"
  check "python connect to $hostip:$port fails" test "$RC" -ne 0
  sleep 0.3
  check "the host listener was never contacted" eq "$(cat "$side/accepted.log")" ""

  # The listener is in the host's namespace: visible in the host's /proc/net/tcp (control),
  # invisible in the sandbox's.
  hexport=$(printf ':%04X ' "$port")
  check "control: host /proc/net/tcp lists the listener" contains "$(cat /proc/net/tcp)" "$hexport"
  run_cli -w "$ws" -c 'cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; echo end-tcp'
  check "sandbox /proc/net/tcp readable" contains "$OUT" "end-tcp"
  check "sandbox /proc/net/tcp does not list the host listener" not_contains "$OUT" "$hexport"
fi

# --- only loopback in the sandbox's network namespace --------------------------------
run_cli -w "$ws" -c "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
check "/proc/net/dev readable" eq "$RC" 0
check "only lo is visible" eq "$OUT" "lo"
check "control: the host has more than lo" test "$(tail -n +3 /proc/net/dev | grep -vc '^ *lo:')" -gt 0
run_cli -w "$ws" -c 'tail -n +2 /proc/net/route | wc -l'
check "no routes in the sandbox" eq "$OUT" 0

finish
