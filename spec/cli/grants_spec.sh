#!/usr/bin/env bash
# Network grants end to end (README "Network grants"): the command reaches one
# granted origin through the relay and the host mediator, and nothing else: denied
# CONNECTs never reach the upstream, raw TCP has no route, AF_UNIX is denied, wildcard and
# malformed grants are refused, stale approvals refuse the run, digests move with grants,
# an approval digest binds the exact grant set, and at most 256 grants are accepted.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
state=$(tmpdir)
# A loopback upstream: "ping" -> "pong" for raw tunnels, a tiny HTTP reply otherwise;
# every accepted connection is logged on the host side.
cat >"$state/upstream.py" <<'PY'
import socket, sys, threading
log = open(sys.argv[1], "a", buffering=1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True)
def serve(c):
    log.write("accepted\n")
    data = c.recv(4096)
    if data.startswith(b"ping"):
        c.sendall(b"pong")
    elif data.startswith(b"GET "):
        log.write("http " + data.split(b"\r\n")[0].decode() + "\n")
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nhttp-ok\n")
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
python3 "$state/upstream.py" "$state/log" >"$state/port" &
up=$!
trap 'kill $up 2>/dev/null; cleanup' EXIT
for _ in $(seq 50); do [ -s "$state/port" ] && break; sleep 0.05; done
port=$(head -1 "$state/port")
check "upstream started" test -n "$port"
accepted() { local n; n=$(grep -c accepted "$state/log" 2>/dev/null); echo "${n:-0}"; }

# Digests move with grants; an identical re-grant changes nothing; stale refuses.
run_cli digest -w "$ws"; base=$OUT
run_cli digest -w "$ws" --grant "127.0.0.1:$port"; granted=$OUT
run_cli digest -w "$ws" --grant "127.0.0.1:$port" --grant "127.0.0.1:$port"; twice=$OUT
check "a grant changes the digest" test "$granted" != "$base"
check "an identical re-grant changes nothing" eq "$twice" "$granted"
stale=0000000000000000000000000000000000000000000000000000000000000000
run_cli -w "$ws" --grant "127.0.0.1:$port" --grant-digest "$stale" -c "touch $ws/stale-ran"
check "stale approval: refused (125)" eq "$RC" 125
check "stale approval: names both digests" contains "$ERR" "$stale"
check "stale approval: names the current digest for this grant set" contains "$ERR" "$granted"
check "stale approval: nothing ran" test ! -e "$ws/stale-ran"

# The approval digest covers the policy and the exact grant set: what `digest --grant ...`
# prints is what `run` with the same grants accepts (any order, duplicates and spellings
# collapsed), and an approval is never replayed with another grant set.
run_cli -w "$ws" --grant "127.0.0.1:$port" --grant-digest "$granted" -- true
check "the digest printed for a grant approves exactly that grant" eq "$RC" 0
run_cli -w "$ws" --grant "127.0.0.1:$port" --grant-digest "$base" -c "touch $ws/base-ran"
check "the policy digest alone approves no grant (125)" eq "$RC" 125
check "policy digest replayed: names the approved digest" contains "$ERR" "$base"
check "policy digest replayed: names the digest of this grant set" contains "$ERR" "$granted"
check "policy digest replayed: nothing ran" test ! -e "$ws/base-ran"
run_cli digest -w "$ws" --grant 127.0.0.1; anyport=$OUT
run_cli -w "$ws" --grant 127.0.0.1 --grant-digest "$granted" -c "touch $ws/replay-ran"
check "approval replayed for every port of 127.0.0.1: refused (125)" eq "$RC" 125
check "every-port replay: names the approved digest" contains "$ERR" "$granted"
check "every-port replay: names the digest of this grant set" contains "$ERR" "$anyport"
run_cli digest -w "$ws" --grant "127.0.0.1:$port" --grant example.org:443; two=$OUT
run_cli -w "$ws" --grant "127.0.0.1:$port" --grant example.org:443 --grant-digest "$granted" \
  -c "touch $ws/replay-ran"
check "approval replayed with one more grant: refused (125)" eq "$RC" 125
check "extra-grant replay: names the approved digest" contains "$ERR" "$granted"
check "extra-grant replay: names the digest of this grant set" contains "$ERR" "$two"
run_cli -w "$ws" --grant example.org:443 --grant-digest "$two" -c "touch $ws/replay-ran"
check "approval of two grants replayed with one of them: refused (125)" eq "$RC" 125
check "nothing ran on any replay" test ! -e "$ws/replay-ran"
run_cli digest -w "$ws" --grant example.org:443 --grant "127.0.0.1:$port"; rev=$OUT
check "the approval digest is order-free" eq "$rev" "$two"
run_cli digest -w "$ws" --grant EXAMPLE.org:443 --grant "127.0.0.1:$port" --grant example.org:443
check "duplicates and host case collapse" eq "$OUT" "$two"
run_cli -w "$ws" --grant example.org:443 --grant "127.0.0.1:$port" --grant-digest "$two" -- true
check "digest --grant X --grant Y approves run --grant Y --grant X" eq "$RC" 0
run_cli digest -w "$ws" --grant '[0:0::1]:8080'; v6a=$OUT
run_cli digest -w "$ws" --grant '[::1]:8080'; v6b=$OUT
check "IPv6 literals are normalized" eq "$v6a" "$v6b"
run_cli -w "$ws" --grant '[::1]:8080' --grant-digest "$v6a" -- true
check "a normalized IPv6 grant runs with its approval" eq "$RC" 0

# At most 256 grants; more are refused before anything runs (and quickly: the set is
# sorted once, not re-hashed per grant).
many=()
for i in $(seq 257); do many+=(--grant "h$i.example.com:443"); done
run_cli digest -w "$ws" "${many[@]}"
check "257 grants: digest refused (125)" eq "$RC" 125
check "257 grants: the message names the cap" contains "$ERR" "at most 256"
run_cli digest -w "$ws" "${many[@]:2}"
check "256 grants: accepted" eq "$RC" 0
run_cli -w "$ws" "${many[@]}" -c "touch $ws/many-ran"
check "257 grants: run refused (125)" eq "$RC" 125
huge=()
for i in $(seq 20000); do huge+=(--grant "h$i.example.com"); done
run_cli -w "$ws" "${huge[@]}" -c "touch $ws/many-ran"
check "20000 grants: run refused (125)" eq "$RC" 125
check "20000 grants: the message names the cap" contains "$ERR" "at most 256"
check "too many grants: nothing ran" test ! -e "$ws/many-ran"
for bad in '*' '*.example.com' 'api.*.com' 'a b' 'a/b' 'user@host' 'host:0' 'host:99999' \
  '-x.example' '-oProxyCommand=x:22' 'a.-b.example' 'example-'; do
  run_cli -w "$ws" --grant "$bad" -c "touch $ws/bad-ran"
  check "malformed or wildcard grant '$bad' refused" eq "$RC" 125
done
check "no malformed grant ran anything" test ! -e "$ws/bad-ran"
run_cli -w "$ws" --grant -x.example -c true
check "a host starting with '-': the message says why" contains "$ERR" "may not start with '-'"

# An allowed CONNECT through the relay's HTTP proxy.
n0=$(accepted)
run_cli -w "$ws" --json --grant "127.0.0.1:$port" -t 20 -- python3 -c "
import os, socket
host, p = os.environ['HTTPS_PROXY'].rsplit('/', 1)[-1].split(':')
s = socket.create_connection((host, int(p)), timeout=5)
s.sendall(b'CONNECT 127.0.0.1:$port HTTP/1.1\r\nHost: x\r\n\r\n')
head = s.recv(4096)
assert head.startswith(b'HTTP/1.1 200'), head
s.sendall(b'ping'); print(s.recv(4).decode(), 'tunnel-ok')"
check "CONNECT to the granted origin tunnels (pong)" contains "$OUT" 'pong tunnel-ok'
check "result lists the grant with the digest" contains "$OUT" "\"network_grants\":[{\"host\":\"127.0.0.1\",\"policy_digest\":\"$granted\",\"port\":$port}]"
check "the upstream saw the tunnel" test "$(accepted)" -gt "$n0"

# SOCKS5 through the relay.
run_cli -w "$ws" --grant "127.0.0.1:$port" -t 20 -- python3 -c "
import os, socket, struct
host, p = os.environ['ALL_PROXY'].rsplit('/', 1)[-1].split(':')
s = socket.create_connection((host, int(p)), timeout=5)
s.sendall(b'\x05\x01\x00'); assert s.recv(2) == b'\x05\x00'
h = b'127.0.0.1'
s.sendall(b'\x05\x01\x00\x03' + bytes([len(h)]) + h + struct.pack('>H', $port))
r = s.recv(10); assert r[1] == 0, r
s.sendall(b'ping'); print(s.recv(4).decode(), 'socks-ok')"
check "SOCKS5 CONNECT to the granted origin (pong)" contains "$OUT" 'pong socks-ok'

# Absolute-form plain HTTP through the proxy.
run_cli -w "$ws" --grant "127.0.0.1:$port" -t 20 -- python3 -c "
import urllib.request
print(urllib.request.urlopen('http://127.0.0.1:$port/v1/x', timeout=5).read().decode().strip())"
check "absolute-form HTTP GET is forwarded" contains "$OUT" http-ok

# Denials: another port, raw TCP, AF_UNIX; the upstream must see none of them.
n1=$(accepted)
run_cli -w "$ws" --json --grant "127.0.0.1:$port" -t 20 -- python3 -c "
import os, socket
host, p = os.environ['HTTPS_PROXY'].rsplit('/', 1)[-1].split(':')
s = socket.create_connection((host, int(p)), timeout=5)
s.sendall(b'CONNECT 127.0.0.1:9 HTTP/1.1\r\n\r\n'); print(s.recv(64).split(b'\r\n')[0].decode())
try:
    socket.create_connection(('127.0.0.1', $port), timeout=1); print('raw-connected')
except OSError: print('raw-refused')
try:
    socket.socket(socket.AF_UNIX); print('unix-opened')
except OSError: print('unix-denied')"
check "CONNECT to a non-granted port gets 403" contains "$OUT" 'HTTP/1.1 403'
check "raw TCP to the host loopback has no route" contains "$OUT" raw-refused
check "AF_UNIX sockets are denied to the command" contains "$OUT" unix-denied
check "the refusal is a structured denial" contains "$OUT" '"kind":"network"'
check "the upstream was never contacted by the denied attempts" eq "$(accepted)" "$n1"

# Hosts are exact: a grant for localhost does not cover 127.0.0.1 (and resolves to an
# internal address, which only a literal IP grant may reach).
run_cli -w "$ws" --grant "localhost:$port" -t 20 -- python3 -c "
import os, socket
host, p = os.environ['HTTPS_PROXY'].rsplit('/', 1)[-1].split(':')
for target in (b'127.0.0.1', b'localhost'):
    s = socket.create_connection((host, int(p)), timeout=5)
    s.sendall(b'CONNECT ' + target + b':$port HTTP/1.1\r\n\r\n'); print(target.decode(), s.recv(64).split(b'\r\n')[0].decode())"
check "localhost grant does not allow 127.0.0.1" contains "$OUT" "127.0.0.1 HTTP/1.1 403"
check "localhost resolves to loopback: refused without a literal IP grant" contains "$OUT" "localhost HTTP/1.1 403"
check "still nothing reached the upstream" eq "$(accepted)" "$n1"

# Without a grant there is no proxy at all.
run_cli -w "$ws" -c 'echo "proxy=${HTTPS_PROXY:-none}"'
check "baseline: no proxy variables" eq "$OUT" "proxy=none"
finish
