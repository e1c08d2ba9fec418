#!/usr/bin/env bash
# --tty: the command runs on a fresh pseudo-terminal the CLI owns (its fds 0, 1, 2 and its
# controlling terminal), never on the caller's terminal. Driven from Python through a real
# outer pty whose termios and window size are checked on the host: `test -t` holds inside,
# an interactive REPL works and Ctrl-C reaches it without killing the tree, the window size
# is copied and followed, a pager pages and quits, and the outer terminal's settings are
# restored however the run ends (command killed by SIGKILL, deadline, SIGTERM to the CLI).
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null 2>&1 || skip_all "python3 is needed to drive a pseudo-terminal"

ws=$(tmpdir)
work=$(tmpdir)
chmod 755 "$work"

# ttylib.py: Session(argv) runs argv in a new session whose controlling terminal is a
# fresh outer pty (33 rows x 101 columns). expect(text) waits for text on the screen;
# send(bytes) types; done() waits for the exit and prints rc=, termios=same|changed (the
# outer terminal's settings, `stty -g` style, after vs before) and raw=yes|no (whether the
# outer terminal was seen in raw mode during the run).
cat >"$work/ttylib.py" <<'EOF'
import fcntl, os, pty, select, signal, struct, sys, termios, time
class Session:
    def __init__(self, argv, rows=33, cols=101):
        self.master, self.slave = pty.openpty()
        self.resize(rows, cols)
        self.before = termios.tcgetattr(self.slave)
        self.raw_seen = False
        self.screen = b""
        self.status = None
        self.pid = os.fork()
        if self.pid == 0:
            os.setsid()
            fcntl.ioctl(self.slave, termios.TIOCSCTTY, 0)
            for fd in (0, 1, 2):
                os.dup2(self.slave, fd)
            os.closerange(3, 256)
            os.execvp(argv[0], argv)
    def resize(self, rows, cols):
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    def _pump(self, t):
        r, _, _ = select.select([self.master], [], [], t)
        if r:
            try:
                self.screen += os.read(self.master, 65536)
            except OSError:
                time.sleep(t)
        if not (termios.tcgetattr(self.slave)[3] & termios.ICANON):
            self.raw_seen = True
        if self.status is None:
            p, st = os.waitpid(self.pid, os.WNOHANG)
            if p:
                self.status = st
        return bool(r)
    def expect(self, text, timeout=15):
        t0 = time.time()
        while time.time() - t0 < timeout:
            if text.encode() in self.screen:
                return True
            self._pump(0.05)
        print("# expected text not seen; screen tail: %r" % self.screen[-300:].replace(b"=", b"_"))
        return False
    def send(self, data):
        os.write(self.master, data if isinstance(data, bytes) else data.encode())
    def done(self, timeout=60):
        t0 = time.time()
        while time.time() - t0 < timeout:
            if not self._pump(0.05) and self.status is not None:
                break
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            _, self.status = os.waitpid(self.pid, 0)
        after = termios.tcgetattr(self.slave)
        print("rc=%d" % os.waitstatus_to_exitcode(self.status))
        print("termios=%s" % ("same" if after == self.before else "changed"))
        print("raw=%s" % ("yes" if self.raw_seen else "no"))
        print("secs=%d" % int(time.time() - t0))
        sys.stdout.flush()
EOF

# py SCRIPT: runs a Python scenario (ttylib imported, $A3S and $ws as A3S and WS); sets OUT.
py() {
  OUT=$(cd "$work" && A3S="$A3S" WS="$ws" PYTHONPATH="$work" timeout 150 python3 -c "
import os, signal, time
from ttylib import Session
A3S, WS = os.environ['A3S'], os.environ['WS']
$1" 2>&1)
}

# --- the command sees a terminal on 0, 1 and 2 ------------------------------------------
py "s = Session([A3S, '-w', WS, '--tty', '--', 'bash', '-c',
  'test -t 0 && test -t 1 && test -t 2 && echo TT''Y-OK; tty >/dev/null && echo CT''TY-OK'])
s.expect('CTTY-OK'); s.done()
print('fds=%s ctty=%s' % (b'TTY-OK' in s.screen.replace(b'CTTY-OK', b''), b'CTTY-OK' in s.screen))"
check "--tty: fds 0, 1 and 2 are terminals inside" contains "$OUT" "fds=True"
check "--tty: the command has a terminal of its own (tty(1) works)" contains "$OUT" "ctty=True"
check "--tty: exit 0" contains "$OUT" "rc=0"
check "--tty: the outer terminal was in raw mode during the run" contains "$OUT" "raw=yes"
check "--tty: the outer terminal's settings are restored" contains "$OUT" "termios=same"

# --- without --tty nothing changes: no terminal inside, the outer one untouched --------
py "s = Session([A3S, '-w', WS, '--', 'bash', '-c', 'test -t 1 || echo NO-""TERM; sleep 0.5'])
print('nottty=%s' % s.expect('NO-TERM')); s.done()"
check "no --tty: stdout is not a terminal inside" contains "$OUT" "nottty=True"
check "no --tty: the outer terminal is never put in raw mode" contains "$OUT" "raw=no"

# --- the window size is copied, and followed (SIGWINCH) ---------------------------------
py "s = Session([A3S, '-w', WS, '--tty', '--', 'bash', '-c',
  'stty size; trap \"stty size; exit 0\" WINCH; echo READY; while :; do sleep 0.1; done'])
s.expect('READY'); first = b'33 101' in s.screen; s.resize(40, 120)
print('first=%s resized=%s' % (first, s.expect('40 120'))); s.done()"
check "--tty: stty size inside reports the outer window size" contains "$OUT" "first=True"
check "--tty: a resize of the outer terminal reaches the command (SIGWINCH)" contains "$OUT" "resized=True"
check "--tty: resize scenario exits 0" contains "$OUT" "rc=0"

# --- an interactive REPL; Ctrl-C reaches it, the tree lives on --------------------------
py "s = Session([A3S, '-w', WS, '--tty', '--', 'python3', '-q', '-i'])
s.expect('>>> '); s.send('x=1+1\n'); s.send('print(x*21)\n'); r1 = s.expect('42')
s.send('import time; time.sleep(30)\n'); time.sleep(1.5); s.send(b'\x03')
r2 = s.expect('KeyboardInterrupt'); s.send('print(\"still\" + \"-alive\")\n'); r3 = s.expect('still-alive')
print('eval=%s intr=%s alive=%s' % (r1, r2, r3)); s.send('exit()\n'); s.done()"
check "--tty: the REPL evaluates what is typed" contains "$OUT" "eval=True"
check "--tty: Ctrl-C interrupts the REPL's statement (KeyboardInterrupt)" contains "$OUT" "intr=True"
check "--tty: the REPL lives on after Ctrl-C" contains "$OUT" "alive=True"
check "--tty: the REPL's exit() is the CLI's exit 0" contains "$OUT" "rc=0"
check "--tty: REPL run restores the outer terminal" contains "$OUT" "termios=same"

# --- a pager pages and quits ---------------------------------------------------------
seq -f 'line-%g' 1 500 >"$ws/long.txt"
py "s = Session([A3S, '-w', WS, '--tty', '-e', 'TERM=xterm', '-e', 'LESS=', '--', 'less', 'long.txt'])
a = s.expect('line-30'); first = b'line-200' not in s.screen
s.send(' '); b = s.expect('line-60')
s.send('q'); s.done(); print('paged=%s' % (a and b and first))"
check "--tty: less shows the first page only, then pages" contains "$OUT" "paged=True"
check "--tty: q quits less (exit 0)" contains "$OUT" "rc=0"
check "--tty: less run restores the outer terminal" contains "$OUT" "termios=same"

# --- the command killed by SIGKILL inside ----------------------------------------------
py "s = Session([A3S, '-w', WS, '--tty', '--', 'bash', '-c', 'echo READY; kill -9 \$\$'])
print('ready=%s' % s.expect('READY')); s.done()"
check "--tty: kill -9 inside: it ran" contains "$OUT" "ready=True"
check "--tty: kill -9 \$\$ inside: exit 137" contains "$OUT" "rc=137"
check "--tty: kill -9 inside: the outer terminal's settings are restored" contains "$OUT" "termios=same"

# --- the command killed by SIGKILL from the host --------------------------------------
py "s = Session([A3S, '-w', WS, '--tty', '--', 'bash', '-c', 'echo READY; exec sleep 31.4159'])
s.expect('READY')
found = 0
t0 = time.time()
while not found and time.time() - t0 < 20: # the exec may lag behind READY on a busy host
    for p in [int(p) for p in os.listdir('/proc') if p.isdigit()]:
        try:
            if open('/proc/%d/cmdline' % p, 'rb').read() == b'sleep\x0031.4159\x00':
                os.kill(p, signal.SIGKILL); found += 1
        except OSError:
            pass
    if not found:
        time.sleep(0.05)
print('found=%d' % found); s.done()"
check "--tty: the command's host pid was found" contains "$OUT" "found=1"
check "--tty: SIGKILL from the host: exit 137" contains "$OUT" "rc=137"
check "--tty: SIGKILL from the host: the outer terminal's settings are restored" contains "$OUT" "termios=same"

# --- SIGTERM to the CLI -------------------------------------------------------------
py "s = Session([A3S, '-w', WS, '--tty', '--', 'bash', '-c', 'echo READY; exec sleep 27.1828'])
s.expect('READY'); os.kill(s.pid, signal.SIGTERM); s.done()
def cmd(p):
    try:
        return open('/proc/%s/cmdline' % p, 'rb').read()
    except OSError:
        return b''
def left():
    return len([p for p in os.listdir('/proc') if p.isdigit() and cmd(p) == b'sleep\x0027.1828\x00'])
t0 = time.time()
while left() and time.time() - t0 < 20: # teardown is not instant on a busy host
    time.sleep(0.05)
print('left=%d' % left())"
check "--tty: SIGTERM to the CLI: exit 143" contains "$OUT" "rc=143"
check "--tty: SIGTERM to the CLI: the outer terminal's settings are restored" contains "$OUT" "termios=same"
check "--tty: SIGTERM to the CLI: the tree is gone" contains "$OUT" "left=0"

# --- the deadline -----------------------------------------------------------------
py "s = Session([A3S, '-w', WS, '-t', '1', '--tty', '--', 'bash', '-c', 'echo READY; sleep 30'])
s.expect('READY'); s.done()"
check "--tty: the deadline still holds: exit 124" contains "$OUT" "rc=124"
check "--tty: deadline: the outer terminal's settings are restored" contains "$OUT" "termios=same"

# --- output still goes through the bounded capture: nothing is lost live, result is bounded
py "s = Session([A3S, '-w', WS, '--tty', '--', 'bash', '-c',
  'head -c 300000 /dev/zero | tr \"\\\\0\" a; echo; echo END-OF-OUTPUT'])
s.expect('END-OF-OUTPUT'); s.done(); print('as=%d' % s.screen.count(b'a'))"
check "--tty: large output: the end is shown" contains "$OUT" "as="
check "--tty: output over the budget is still shown live, once" contains "$OUT" "as=300000"
check "--tty: large output exits 0" contains "$OUT" "rc=0"

# --- --tty and --json are exclusive; --tty is only for run ------------------------------
run_cli -w "$ws" --tty --json -- true
check "--tty --json: usage error (125)" eq "$RC" "125"
check "--tty --json: the message names both" contains "$ERR" "--tty"
run_cli -w "$ws" --json --tty -- true
check "--json --tty: usage error (125)" eq "$RC" "125"
check "--json --tty: one JSON error object" contains "$OUT" '"usage"'
run_cli plan -w "$ws" --tty
check "plan --tty: unknown option (125)" eq "$RC" "125"

# --- --tty without a terminal: the command still gets a pty, input is forwarded -----
out=$(printf 'piped\n' | "$A3S" -w "$ws" --tty -- bash -c 'test -t 0 && read -r l && echo "got:$l"' 2>&1)
rc=$?
check "--tty with piped stdin: the command reads it from its terminal" contains "$out" "got:piped"
check "--tty with piped stdin: exit 0" eq "$rc" "0"

# --- a terminal query printed last: the terminal's answer never reaches the shell -----
# An outer terminal that answers a cursor-position query 0.4 s late; the shell reads
# right after the CLI returns. Also: the modes the command turned on are reset.
dsr=$(tmpdir)/dsr.py
cat >"$dsr" <<'PY'
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out, due, t0 = b"", None, time.time()
while time.time() - t0 < 20:
    r, _, _ = select.select([fd], [], [], 0.02)
    if r:
        try:
            d = os.read(fd, 65536)
        except OSError:
            break
        if not d:
            break
        out += d
        if b"\x1b[6n" in d:
            due = time.time() + 0.4
    if due and time.time() >= due:
        os.write(fd, b"\x1b[12;34R")
        due = None
os.waitpid(pid, 0)
sys.stdout.write(repr(out))
PY
out=$(cd "$ws" && A3S="$A3S" WS="$ws" python3 "$dsr" bash -c \
  '"$A3S" -w "$WS" --tty -- printf "\033[?1000h\033[6n"; read -t 2 -n 8 x; echo "SHELL-GOT:[$x]"' 2>&1)
check "a late terminal answer is dropped, not read by the shell ($out)" contains "$out" "SHELL-GOT:[]"
check "mouse reporting the command turned on is turned off at the end" contains "$out" '[?1000l'

finish
