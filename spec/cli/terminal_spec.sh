#!/usr/bin/env bash
# The command never gets the caller's terminal (or socket, or writable fd) as its stdin:
# the CLI runs inside a pseudo-terminal (its stdin/stdout/stderr are the pty slave and the
# pty is its controlling terminal, as in an interactive shell), and inside the sandbox
# fd 0 is not a terminal, stty cannot touch the outer terminal, writes to fd 0 or to
# /dev/tty never reach the screen (output only goes through the bounded capture), and
# what is typed into the terminal still reaches the command's stdin. Stdin given as a
# socket or as a regular file cannot be written through either.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null 2>&1 || skip_all "python3 is needed to drive a pseudo-terminal"

ws=$(tmpdir)
work=$(tmpdir)

# ptyrun.py OUTFILE INPUT -- ARGV...: runs ARGV in a new session whose controlling
# terminal is a fresh pty (stdin/stdout/stderr = the slave), types INPUT (Python escapes,
# e.g. 'hello\n') into it 0.5 s after the start, and saves all the terminal showed in
# OUTFILE. Prints "rc=N termios=same|changed flags=same|changed": the outer terminal's
# settings and the file status flags of the caller's open terminal (shared with the CLI)
# after the run, compared with before.
cat >"$work/ptyrun.py" <<'EOF'
import codecs, fcntl, os, pty, select, sys, termios, time
out_path, typed = sys.argv[1], codecs.decode(sys.argv[2], "unicode_escape").encode("latin-1")
argv = sys.argv[4:]
master, slave = pty.openpty()
before, flags_before = termios.tcgetattr(slave), fcntl.fcntl(slave, fcntl.F_GETFL)
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.closerange(3, 256)
    os.execvp(argv[0], argv)
out, t0, sent, status = b"", time.time(), not typed, None
while time.time() - t0 < 120:
    if not sent and time.time() - t0 > 0.5:
        os.write(master, typed)
        sent = True
    r, _, _ = select.select([master], [], [], 0.05)
    if r:
        try:
            out += os.read(master, 65536)
        except OSError:
            pass
    elif status is not None:
        break  # exited and nothing more to read
    if status is None:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p:
            status = st
if status is None:
    os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
after, flags_after = termios.tcgetattr(slave), fcntl.fcntl(slave, fcntl.F_GETFL)
open(out_path, "wb").write(out)
print("rc=%d termios=%s flags=%s" % (
    os.waitstatus_to_exitcode(status), "same" if before == after else "changed",
    "same" if flags_before == flags_after else "changed"))
EOF

# in_pty INPUT CLI-ARGS...: sets SUM (the summary line) and TTY (what the terminal showed,
# carriage returns removed).
in_pty() {
  local typed=$1; shift
  SUM=$(python3 "$work/ptyrun.py" "$work/screen" "$typed" -- "$A3S" "$@" 2>&1)
  TTY=$(tr -d '\r' <"$work/screen")
}

# --- fd 0 inside is not the terminal ---------------------------------------------------
in_pty '' -w "$ws" -c 'test -t 0; echo "t0=$?"; test -p /dev/stdin; echo "fifo=$?"'
check "pty: the CLI ran (exit 0)" contains "$SUM" "rc=0 "
check "pty: 'test -t 0' is false inside" contains "$TTY" "t0=1"
check "pty: the command's stdin is a pipe" contains "$TTY" "fifo=0"

in_pty '' -w "$ws" -c 'stty -a; echo "stty=$?"'
check "pty: 'stty -a' inside finds no terminal" contains "$TTY" "stty=1"
check "pty: no terminal settings were printed" not_contains "$TTY" "speed "

# --- the outer terminal's settings cannot be changed from inside ----------------------
in_pty '' -w "$ws" -c 'stty raw -echo; echo "raw=$?"; stty raw -echo <&1; stty raw -echo <&2; true'
check "pty: 'stty raw -echo' inside fails" contains "$TTY" "raw=1"
check "pty: the outer terminal's settings are unchanged" contains "$SUM" "termios=same"
check "pty: the caller's terminal fd flags are unchanged (no O_NONBLOCK left behind)" \
  contains "$SUM" "flags=same"

# --- output only through the bounded capture ------------------------------------------
# (fd 0 is saved as fd 3 first: inside a pipeline, fd 0 of tr is the pipe from head.)
in_pty '' -w "$ws" --json -c 'head -c 307200 /dev/zero | tr "\0" a; exec 3<&0
  head -c 307200 /dev/zero | tr "\0" b >&3 2>/dev/null; echo "w0=$?" >&2'
json=$(printf '%s\n' "$TTY" | grep -o '{"backend".*' | head -n 1)
jfield() {
  printf '%s' "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1" 2>/dev/null
}
check "--json in a pty: the result object is printed" test -n "$json"
check "--json in a pty: total_bytes counts the 300 KiB (+ 5 bytes of stderr)" \
  eq "$(jfield total_bytes)" "307205"
check "--json in a pty: captured_bytes is the capture's whole budget (100 KiB), not 0" \
  eq "$(jfield captured_bytes)" "102400"
check "--json in a pty: writing to fd 0 failed" contains "$(jfield stderr)" "w0=1"
check "--json in a pty: nothing written to fd 0 reached the terminal" \
  not_contains "$TTY" "bbbbbbbbbbbbbbbb"
check "--json in a pty: the terminal shows nothing but the result object" \
  eq "$(printf '%s\n' "$TTY" | grep -c .)" "1"

# --- no controlling terminal: /dev/tty and escape sequences ---------------------------
in_pty '' -w "$ws" -c 'printf "\033]0;a3s-osc-title\007" >/dev/tty; echo "devtty=$?"
  printf "\033]0;a3s-osc-title\007" >&0; echo "fd0=$?"'
check "pty: writing an OSC sequence to /dev/tty fails" contains "$TTY" "devtty=1"
check "pty: writing an OSC sequence to fd 0 fails" contains "$TTY" "fd0=1"
check "pty: no OSC sequence reached the terminal" not_contains "$TTY" $'\033]0;a3s-osc'

# --- what is typed still reaches the command --------------------------------------------
in_pty 'hello\n' -w "$ws" -c 'head -c 5; echo "|got"'
check "pty: typed input reaches the command's stdin" contains "$TTY" "hello|got"
check "pty: exit 0 after reading typed input" contains "$SUM" "rc=0 "
in_pty 'line one\n\x04' -w "$ws" -c 'cat; echo "|eof"'
check "pty: ^D typed in the terminal is EOF for the command" contains "$TTY" "line one
|eof"

# --- a CLI in the background of the terminal: not stopped, input left to the foreground ---
# As after `a3s-sandbox ... &` in an interactive shell: the CLI's process group is not the
# terminal's foreground group. Reading the terminal then must neither stop the CLI
# (SIGTTIN would freeze its supervision, deadline included) nor take the line typed for
# the foreground job.
bg_out=$(python3 - "$A3S" "$ws" <<'EOF'
import fcntl, os, pty, select, sys, termios, time
master, slave = pty.openpty()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.close(r)
    cli = os.fork()
    if cli == 0:
        os.setpgid(0, 0)  # a background job
        os.execv(sys.argv[1], [sys.argv[1], "-w", sys.argv[2], "-c", "sleep 1.5; echo bg-done"])
    os.setpgid(cli, cli)
    time.sleep(0.7)  # the line below is typed at 0.2 s: the CLI sees it first
    got = b""
    while b"\n" not in got:
        if select.select([0], [], [], 3)[0]:
            got += os.read(0, 100)
        else:
            break
    _, st = os.waitpid(cli, os.WUNTRACED)
    if os.WIFSTOPPED(st):
        os.kill(cli, 9)
        os.waitpid(cli, 0)
    os.write(w, b"stopped=%d fg-read=%r cli-rc=%d" % (
        os.WIFSTOPPED(st), got, os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1))
    os._exit(0)
os.close(w)
time.sleep(0.2)
os.write(master, b"typed-line\n")
res, t0 = b"", time.time()
while time.time() - t0 < 60:
    rr, _, _ = select.select([master, r], [], [], 0.1)
    if master in rr:
        try:
            os.read(master, 4096)
        except OSError:
            pass
    if r in rr:
        res = os.read(r, 1000)
        break
os.waitpid(pid, 0)
print(res.decode())
EOF
)
check "background CLI: not stopped by the terminal (SIGTTIN)" contains "$bg_out" "stopped=0"
check "background CLI: the typed line stays with the foreground job" \
  contains "$bg_out" "fg-read=b'typed-line\\n'"
check "background CLI: the command ran to completion" contains "$bg_out" "cli-rc=0"

# --- stdin is a socket: readable, never writable back -----------------------------------
sock_out=$(python3 - "$A3S" "$ws" <<'EOF'
import os, socket, subprocess, sys
ours, theirs = socket.socketpair()
cmd = 'echo leaked-through-fd0 >&0; echo "w=$?"; cat'
p = subprocess.Popen([sys.argv[1], "-w", sys.argv[2], "-c", cmd], stdin=theirs,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
theirs.close()
ours.sendall(b"from-the-socket")
ours.shutdown(socket.SHUT_WR)
out, _ = p.communicate(timeout=60)
ours.settimeout(5)
back = b""
while True:
    d = ours.recv(4096)
    if not d:
        break
    back += d
print("out=%r back=%r rc=%d" % (out.decode(), back.decode(), p.returncode))
EOF
)
check "socket stdin: writing to fd 0 fails inside" contains "$sock_out" "w=1"
check "socket stdin: the data sent still arrives" contains "$sock_out" "from-the-socket'"
check "socket stdin: nothing reached the other end" contains "$sock_out" "back='' "

# --- stdin is a regular file opened read-only: not writable through /proc --------------
printf 'original\n' >"$work/input.txt"
o=$("$A3S" -w "$ws" -c 'echo pwned >/proc/self/fd/0; cat' <"$work/input.txt" 2>/dev/null)
check "file stdin: the command still reads it" contains "$o" "original"
check "file stdin: reopening /proc/self/fd/0 cannot write the caller's file" \
  eq "$(cat "$work/input.txt")" "original"

finish
