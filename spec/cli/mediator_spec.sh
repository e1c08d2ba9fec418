#!/usr/bin/env bash
# The network mediator end to end, attacks from inside the sandbox, checked on the host
# side: a flood of refused requests leaves bounded records with exact counts (they used
# to grow without bound and, past 16 MiB, vanish from the result); plain HTTP carries one
# request per connection (a pipelined request or a body made into one by
# "Connection: content-length" never reaches the upstream); unspecified-address grants
# are refused.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
state=$(tmpdir)
# A keep-alive HTTP upstream on the host's loopback that logs every request it would parse
# out of a connection: it answers the first request (head plus Content-Length body) and
# keeps reading for half a second, as a server waiting for the next request would.
cat >"$state/upstream.py" <<'PY'
import socket, sys, threading, time
log = open(sys.argv[1], "a", buffering=1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True)
def serve(c):
    data, answered, until, started = b"", False, None, time.time()
    c.settimeout(0.1)
    while until is None or time.time() < until:
        try:
            chunk = c.recv(65536)
        except socket.timeout:
            if until is None and time.time() > started + 5: break
            continue
        if not chunk: break
        data += chunk
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not answered and sep:
            n = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length": n = int(v)
            if len(rest) >= n:
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
                answered, until = True, time.time() + 0.5
    # Every request the upstream would parse out of what it got (Content-Length framing).
    rest = data
    while rest:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        log.write("request " + lines[0].decode(errors="replace") + "\n")
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length": rest = rest[int(v):]
    log.write("bytes %d\n" % len(data))
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
requests() { local n; n=$(grep -c '^request ' "$state/log" 2>/dev/null); echo "${n:-0}"; }
jv() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" <<<"$OUT"; }

# --- a flood of refusals: bounded records, exact counts ------------------------------
flood=1500
run_cli -w "$ws" --json --grant "127.0.0.1:$port" -t 120 -- python3 -c "
import os, socket
host, p = os.environ['HTTPS_PROXY'].rsplit('/', 1)[-1].split(':')
refused = 0
for i in range($flood):
    s = socket.create_connection((host, int(p)), timeout=5)
    s.sendall(b'CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n' % (1 + i % 9))
    refused += s.recv(64).startswith(b'HTTP/1.1 403')
    s.close()
print('refused', refused)"
check "flood: every request refused inside" contains "$OUT" "\"stdout\":\"refused $flood"
net='[x for x in d["denials"] if x.get("kind") == "network"]'
records=$(jv "len([x for x in $net if not x.get('summary')])")
check "flood: records kept, bounded (first and last 32)" eq "$records" 64
check "flood: one summary with the exact total" \
  eq "$(jv "[x.get('total') for x in $net if x.get('summary')]")" "[$flood]"
check "flood: exact count per reason" \
  eq "$(jv "[x['counts'] for x in $net if x.get('summary')]")" "[{'not granted': $flood}]"
check "flood: the first record is the first refusal" \
  eq "$(jv "$net[0]['target']")" "127.0.0.1:1"
check "flood: the upstream saw none of it" eq "$(requests)" 0

# --- plain HTTP: one request per connection ------------------------------------------
run_cli -w "$ws" --grant "127.0.0.1:$port" -t 30 -- python3 -c "
import os, socket
host, p = os.environ['HTTP_PROXY'].rsplit('/', 1)[-1].split(':')
def exchange(data, then=None):
    s = socket.create_connection((host, int(p)), timeout=5)
    s.sendall(data)
    got = s.recv(4096)
    if then:
        s.sendall(then)
    while True:
        more = s.recv(4096)
        if not more: break
        got += more
    s.close()
    return got.split(b'\r\n')[0].decode()
print(exchange(b'GET http://127.0.0.1:$port/first HTTP/1.1\r\n\r\nGET /pipelined HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'))
print(exchange(b'GET http://127.0.0.1:$port/second HTTP/1.1\r\n\r\n', b'GET /after-answer HTTP/1.1\r\n\r\n'))
inner = b'GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'
print(exchange(b'POST http://127.0.0.1:$port/third HTTP/1.1\r\nConnection: content-length\r\nContent-Length: %d\r\n\r\n' % len(inner) + inner))
print(exchange(b'POST http://127.0.0.1:$port/fourth HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /tail HTTP/1.1\r\n\r\n'))"
check "http: four requests answered" eq "$(grep -c 'HTTP/1.1 200' <<<"$OUT")" 4
sleep 1
check "http: the upstream saw exactly the four decided requests" eq "$(requests)" 4
check "http: no pipelined request reached the upstream" not_contains "$(cat "$state/log")" pipelined
check "http: no request after the answer reached it" not_contains "$(cat "$state/log")" after-answer
check "http: a body never became a request" not_contains "$(cat "$state/log")" "request GET /smuggled"
check "http: nothing after the body reached it" not_contains "$(cat "$state/log")" /tail

# --- grants for the unspecified address reach loopback: refused ----------------------
for bad in "0.0.0.0:$port" "[::]:$port" "[::ffff:0.0.0.0]:$port"; do
  run_cli -w "$ws" --grant "$bad" -c "touch $ws/unspecified-ran"
  check "grant '$bad' refused (125)" eq "$RC" 125
  check "grant '$bad': the message names it" contains "$ERR" "$bad"
done
check "no unspecified grant ran anything" test ! -e "$ws/unspecified-ran"
finish
