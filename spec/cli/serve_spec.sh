#!/usr/bin/env bash
# `a3s-sandbox serve` (docs/PROTOCOL.md) driven over its pipes (serve_check.py): several
# execs in flight at once, each answer matched by its id; a cancel kills the exec's whole
# tree; 1,000 malformed lines each answered with a JSON error and the server still
# answering; 10 MB of output delivered losslessly in seq order; an exec's result equal to
# what `a3s-sandbox --json` prints for the same command; the other ops, the cap on running
# requests, and the end of input waiting for a running exec; a client that reads nothing
# cannot keep a command past its deadline nor the server past SIGTERM. The command line
# refuses what serve does not take.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 drives the server"
command -v pgrep >/dev/null || skip_all "pgrep looks for what a cancel left"
here=$(cd "$(dirname "$0")" && pwd)

sv() { python3 "$here/serve_check.py" "$1" "$(tmpdir)"; }
check "concurrent execs: all in flight at once, each result its own" sv concurrent
check "cancel: the exec reports cancelled and no process of its tree is left" sv cancel
check "1,000 malformed lines: one JSON error each, then a probe is answered" sv malformed
check "10 MB of output beside another exec's: every byte, in seq order, whole lines" sv big_output
check "exec results equal a3s-sandbox --json's" sv same_as_json
check "SIGTERM: the running exec is killed and answered, exit 143" sv signalled
check "the server killed (SIGKILL): its commands die with it" sv server_killed
check "the reader goes away: the running exec is killed, exit 141" sv reader_gone
check "a client that reads nothing: the exec still dies at its deadline; drops are said" sv stalled_deadline
check "a client that reads nothing: SIGTERM still ends the server (143) and the exec" sv stalled_signalled
check "a line with a running request's id, whatever it asks: a duplicate, never a second final" sv running_id
check "a policy deadline flipped by a concurrent command: no exec outlives the deadline it enforced" sv deadline_flip
check "digest, plan, capabilities, stdin_base64, duplicate id, busy, end of input" sv requests

ws=$(tmpdir)
run_cli serve -w "$ws" --grant example.org
check "serve --grant: refused (each request says its grants)" eq "$RC" 125
run_cli serve -w "$ws" --json
check "serve --json: refused (the answers are JSON already)" eq "$RC" 125
run_cli serve -w "$ws" -c true
check "serve -c: refused" eq "$RC" 125
run_cli serve -w "$ws" -p a3s-no-such-policy
check "serve with a policy that does not exist: refused before serving (125)" eq "$RC" 125
check "... saying why" contains "$ERR" "a3s-no-such-policy"
run_cli serve -w "$ws"
check "serve with no input: exit 0, nothing written" eq "$RC:$OUT" "0:"
finish
