#!/usr/bin/env python3
# vm: the `box` client with real microVMs: exec one-shot (output streams and
# the exit statuses passed through: the command's, 124, 126, 127), exec -i
# over the WebSocket (stdin then EOF, binary), detached sessions, attach
# with replay and offsets, signal, cp of a directory tree in and out
# (compared), single files, tars on stdin/stdout, ports, port-forward to a
# guest HTTP server, a session the sandbox's pause ends, and the
# interactive terminal under tmux: typing, window resize, Ctrl-C, the
# detach keys, re-attach with the output replayed, the terminal restored.

import hashlib
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.request

import clitest
from clitest import Client, check
import vmtest
from vmtest import VmBoxd, Tap

SB = 'cli-vm'
t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('clivm'))
c = Client(d, KEY)
WORK = tempfile.mkdtemp(prefix='box-cli-vm-')


def setup_sandbox():
    r = c('create', '--name', SB, timeout=300)
    if r.rc != 0:
        raise RuntimeError(r.describe())
    return r


with clock('box create (first)'):
    FIRST = vmtest.setup_or_bail(d, setup_sandbox)


def boxd_alive():
    """A boxd that died makes every later check wait for its timeouts:
    stop at once, with its log."""
    if not d.alive():
        rc = d.proc.returncode if d.proc else None
        d.dump_log()
        d.cleanup()
        shutil.rmtree(WORK, ignore_errors=True)
        print('Bail out! boxd died (exit %r)' % rc, flush=True)
        os._exit(1)   # not SystemExit: the section would catch it and go on


def sh(script, *args, **kw):
    return c('exec', SB, '--', 'sh', '-c', script, *args, **kw)


def test_exec_oneshot(t):
    boxd_alive()
    t.eq(FIRST.out, SB + '\n', 'box create printed the name')
    t.eq(vmtest.state(d, KEY, SB), 'running', 'the sandbox runs once box create returned')
    r = sh('echo to-out; echo to-err >&2; exit 7')
    check(t, r, 7, 'exec: the command\'s exit status 7 is box\'s', out='to-out\n')
    t.eq(r.err, 'to-err\n', 'stderr goes to stderr, apart from stdout')
    check(t, c('exec', SB, '--', 'true'), 0, 'exec true: 0', out='')
    check(t, sh('kill -9 $$'), 137, 'killed by SIGKILL: 137')
    r = c('exec', SB, '--', 'no-such-program')
    check(t, r, 127, 'executable not found: 127', err_contains='(invalid)')
    r = c('exec', '--user', 'nosuchuser', SB, '--', 'true')
    check(t, r, 126, 'unknown user: 126', err_contains='nosuchuser')
    r = c('exec', '--timeout', '1', SB, '--', 'sleep', '30')
    check(t, r, 124, '--timeout killed the command: 124', err_contains='timed out')
    t.ok(r.seconds < 20, 'the timeout applied', r.seconds)
    r = c('exec', '--user', 'root', '--cwd', '/etc', '--env', 'A=1 2', '-e', 'B=x=y', SB, '--',
          'sh', '-c', 'echo "$(id -un) $(pwd) $A $B"')
    check(t, r, 0, 'exec --user --cwd --env', out='root /etc 1 2 x=y\n')
    r = c('exec', SB, 'echo', '-n', 'no-dashes')
    check(t, r, 0, 'without "--" options end at the sandbox (-n is the command\'s)', out='no-dashes')
    r = c('exec', SB, 'sh', '-c', 'printf "%s|" "$@"', 'sh', 'a', '--', '-x')
    check(t, r, 0, 'a "--" among the command\'s arguments is the command\'s', out='a|--|-x|')
    r = c('exec', '-u', 'root', '--', SB, '--', 'printf', '%s|', '--', 'y')
    check(t, r, 0, '"--" before the sandbox ends box\'s options; one after it is dropped, a later one kept',
          out='--|y|')
    r = c('exec', SB, '--', 'head', '-c', '3000000', '/dev/urandom', binary=True)
    t.ok(r.rc == 0 and len(r.out) == 3000000, 'binary output of 3 MB comes through whole',
         'exit %r, %d bytes' % (r.rc, len(r.out)))
    r = c('exec', 'no-such-sandbox', '--', 'true')
    check(t, r, 125, 'an unknown sandbox: 125', err_contains='(not_found)')


def test_exec_stream(t):
    boxd_alive()
    r = c('exec', '-i', SB, '--', 'sh', '-c', 'cat; echo err-line >&2; exit 3', stdin='line one\nline two\n')
    check(t, r, 3, 'exec -i: stdin reaches the command, then EOF; its status 3',
          out='line one\nline two\n')
    t.eq(r.err, 'err-line\n', 'exec -i: stderr apart (no TTY)')
    data = os.urandom(6 * 1024 * 1024)
    r = c('exec', '-i', SB, '--', 'sh', '-c', 'cat > /tmp/in.bin && sha256sum /tmp/in.bin', stdin=data)
    t.ok(r.rc == 0 and r.out.split()[:1] == [hashlib.sha256(data).hexdigest()],
         'exec -i: 6 MiB of binary stdin arrive byte for byte', r.describe())
    r = c('exec', '-i', SB, '--', 'cat', '/tmp/in.bin', binary=True)
    t.ok(r.rc == 0 and r.out == data, 'exec -i: 6 MiB of binary output come back byte for byte',
         'exit %r, %d bytes' % (r.rc, len(r.out)))
    r = c('exec', '-i', SB, '--', 'wc', '-c', stdin=b'')
    check(t, r, 0, 'exec -i with empty stdin: EOF at once', out='0\n')
    r = c('exec', '-i', SB, '--', 'no-such-program')
    check(t, r, 127, 'exec -i of a missing executable: the error frame, 127',
          err_contains='executable not found')
    r = c('exec', '-i', '--user', 'nosuchuser', SB, '--', 'true')
    check(t, r, 126, 'exec -i as an unknown user: 126')
    p = c.popen(['exec', '-i', SB, '--', 'sh', '-c', 'trap "echo got-int; exit 9" INT; echo ready; '
                 'while :; do sleep 0.1; done'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
    line = p.stdout.readline()
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    t.ok(line == b'ready\n' and out == b'got-int\n' and p.returncode == 9,
         'exec -i: a local SIGINT is passed to the command (its trap runs, its status is box\'s)',
         'first %r rest %r err %r exit %r' % (line, out, err, p.returncode))


def test_sessions(t):
    boxd_alive()
    r = c('exec', '-d', SB, '--', 'sh', '-c', 'for i in 1 2 3; do echo tick-$i; sleep 0.3; done; exit 5')
    check(t, r, 0, 'exec -d: started and returned')
    sid = r.out.strip()
    t.match(r'^s-[a-z0-9]{10}$', sid, 'exec -d prints the session ID')
    end = time.time() + 30
    while True:
        r = c('sessions', SB)
        row = [ln for ln in r.out.splitlines() if ln.startswith(sid)]
        if time.time() > end or (len(row) == 1 and 'exited' in row[0]):
            break
        time.sleep(0.3)
    t.ok(r.rc == 0 and len(row) == 1 and 'exited 5' in row[0], 'sessions lists it, exited 5', r.out)
    r = c('attach', SB, sid)
    check(t, r, 5, 'attach to an exited session: the replay, then its status 5',
          out='tick-1\ntick-2\ntick-3\n')
    r = c('attach', '--offset', '7', SB, sid)
    check(t, r, 5, 'attach --offset 7 replays from byte 7', out='tick-2\ntick-3\n')
    r = c('sessions', SB, '--json')
    t.ok(r.rc == 0 and sid in r.out and '"sessions"' in r.out, 'sessions --json', r.out)

    r = c('exec', '-d', SB, '--', 'sleep', '300')
    sid2 = r.out.strip()
    check(t, c('signal', SB, sid2, 'TERM'), 0, 'signal TERM')
    time.sleep(0.5)
    r = c('attach', SB, sid2)
    check(t, r, 143, 'the signalled session ended by SIGTERM: attach exits 143')
    r = c('signal', SB, sid2, 'SIGKILL')
    check(t, r, 1, 'signal to an exited session: exit 1', err_contains='(conflict)')
    r = c('signal', SB, 's-0000000000', 'TERM')
    check(t, r, 1, 'signal to an unknown session: exit 1', err_contains='(not_found)')
    r = c('attach', SB, 's-0000000000')
    check(t, r, 125, 'attach to an unknown session: 125', err_contains='(not_found)')


def tree_listing(root):
    """path -> (type, mode, content hash or link target) for a local tree."""
    out = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(base, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ('l', os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ('d', oct(stat.S_IMODE(st.st_mode)))
            else:
                with open(p, 'rb') as f:
                    out[rel] = ('f', oct(stat.S_IMODE(st.st_mode)), hashlib.sha256(f.read()).hexdigest())
    return out


def make_tree(root):
    os.makedirs(os.path.join(root, 'sub', 'deep'))
    os.makedirs(os.path.join(root, 'empty dir'))
    with open(os.path.join(root, 'hello.txt'), 'w') as f:
        f.write('hello\n')
    with open(os.path.join(root, 'name with spaces.txt'), 'w') as f:
        f.write('spaces\n')
    with open(os.path.join(root, 'sub', 'deep', 'random.bin'), 'wb') as f:
        f.write(os.urandom(3 * 1024 * 1024 + 17))
    with open(os.path.join(root, 'sub', 'secret'), 'w') as f:
        f.write('s\n')
    os.chmod(os.path.join(root, 'sub', 'secret'), 0o600)
    with open(os.path.join(root, 'sub', 'run.sh'), 'w') as f:
        f.write('#!/bin/sh\necho ran\n')
    os.chmod(os.path.join(root, 'sub', 'run.sh'), 0o755)
    os.chmod(os.path.join(root, 'sub', 'deep'), 0o750)
    os.symlink('../hello.txt', os.path.join(root, 'sub', 'link'))
    long_name = 'n' * 120
    os.makedirs(os.path.join(root, 'long', long_name))
    with open(os.path.join(root, 'long', long_name, long_name + '.txt'), 'w') as f:
        f.write('long names (pax)\n')


def test_cp(t):
    boxd_alive()
    src = os.path.join(WORK, 'tree')
    make_tree(src)
    want = tree_listing(src)
    r = c('cp', src, SB + ':/tmp/up')
    check(t, r, 0, 'cp of a directory tree in (new destination)')
    r = c('exec', '--user', 'root', SB, '--', 'sh', '-c',
          'cd /tmp/up && find . -mindepth 1 | wc -l; cat sub/link; ./sub/run.sh; stat -c %a sub/secret sub/deep')
    t.eq((r.rc, r.out), (0, '%d\nhello\nran\n600\n750\n' % len(want)),
         'in the sandbox: every entry, the symlink, modes (exec bit, 0600, 0750)')
    out = os.path.join(WORK, 'out')
    r = c('cp', SB + ':/tmp/up', out)
    check(t, r, 0, 'cp of the tree out (new destination)')
    got = tree_listing(out) if os.path.isdir(out) else {}
    t.eq(got, want, 'the tree came back identical: names, types, modes, contents, link targets')

    os.makedirs(os.path.join(WORK, 'into'))
    r = c('cp', SB + ':/tmp/up', os.path.join(WORK, 'into'))
    check(t, r, 0, 'cp out into an existing directory')
    t.eq(tree_listing(os.path.join(WORK, 'into', 'up')), want, '... keeps the source\'s name (into/up)')
    r = c('cp', SB + ':/tmp/up/.', os.path.join(WORK, 'into'))
    check(t, r, 0, 'cp out of SRC/. into an existing directory')
    t.ok(os.path.isfile(os.path.join(WORK, 'into', 'hello.txt')), '... copies what is in SRC')

    r = c('exec', '--user', 'root', SB, '--', 'mkdir', '-p', '/tmp/exists')
    r = c('cp', src, SB + ':/tmp/exists')
    check(t, r, 0, 'cp in into an existing directory')
    r = c('exec', SB, '--', 'cat', '/tmp/exists/tree/hello.txt')
    check(t, r, 0, '... keeps the source\'s name (/tmp/exists/tree)', out='hello\n')

    f = os.path.join(src, 'sub', 'run.sh')
    r = c('cp', f, SB + ':/tmp/single.sh')
    check(t, r, 0, 'cp of a single file in')
    r = c('exec', SB, '--', 'sh', '-c', 'stat -c %a /tmp/single.sh; /tmp/single.sh')
    check(t, r, 0, '... with its content and mode', out='755\nran\n')
    r = c('cp', f, SB + ':/tmp/exists')
    check(t, r, 0, 'cp of a file into an existing directory')
    check(t, c('exec', SB, '--', 'cat', '/tmp/exists/run.sh'), 0, '... keeps its name',
          out='#!/bin/sh\necho ran\n')
    dest = os.path.join(WORK, 'single.bin')
    r = c('cp', SB + ':/tmp/up/sub/deep/random.bin', dest)
    check(t, r, 0, 'cp of a single file out')
    with open(os.path.join(src, 'sub', 'deep', 'random.bin'), 'rb') as a, open(dest, 'rb') as b:
        t.ok(a.read() == b.read(), '... byte for byte')
    r = c('cp', SB + ':/tmp/up/sub/secret', WORK)
    check(t, r, 0, 'cp of a file out into an existing directory')
    t.eq(oct(stat.S_IMODE(os.stat(os.path.join(WORK, 'secret')).st_mode)), '0o600',
         '... keeps its name and mode 0600')

    # tars on stdin and stdout
    tar = subprocess.run(['tar', '-C', src, '-cf', '-', '.'], stdout=subprocess.PIPE).stdout
    r = c('cp', '-', SB + ':/tmp/fromtar', stdin=tar)
    check(t, r, 0, 'cp - SANDBOX:/dir: a tar from stdin')
    r = c('cp', SB + ':/tmp/fromtar', '-', binary=True)
    t.ok(r.rc == 0 and len(r.out) > 3 * 1024 * 1024, 'cp SANDBOX:/dir -: a tar on stdout', r.rc)
    unpacked = os.path.join(WORK, 'untar')
    os.makedirs(unpacked)
    subprocess.run(['tar', '-C', unpacked, '-xf', '-'], input=r.out)
    t.eq(tree_listing(unpacked), want, 'the tar round trip is identical')

    # what a sandbox sends is not trusted: no set-user-ID bit comes out; a
    # symlink comes out as the file it points to, with a plain mode
    c('exec', '--user', 'root', SB, '--', 'sh', '-c',
      'rm -rf /tmp/evil && mkdir -p /tmp/evil/sub && echo x > /tmp/evil/suid && chmod 4755 /tmp/evil/suid '
      '&& echo y > /tmp/evil/sub/f && chmod 0640 /tmp/evil/sub/f && ln -s sub/f /tmp/evil/ln')
    evil = os.path.join(WORK, 'evil')
    check(t, c('cp', SB + ':/tmp/evil', evil), 0, 'cp out of a tree with a set-user-ID file')
    t.eq(oct(stat.S_IMODE(os.stat(os.path.join(evil, 'suid')).st_mode)), '0o755',
         '... the set-user-ID bit is dropped here')
    ln_out = os.path.join(WORK, 'from-link')
    check(t, c('cp', SB + ':/tmp/evil/ln', ln_out), 0, 'cp out of a symlink')
    umask = os.umask(0)
    os.umask(umask)
    t.eq((open(ln_out).read(), oct(stat.S_IMODE(os.stat(ln_out).st_mode))), ('y\n', oct(0o666 & ~umask)),
         '... is the file it points to, with a plain mode (not the link\'s 0777)')
    # a download cut short (the sandbox pauses) leaves the old file and no
    # temporary one: box is stopped (SIGSTOP) once the temporary file is
    # there, so that flow control holds the transfer while the pause cuts it
    c('exec', '--user', 'root', SB, '--', 'sh', '-c', 'head -c 64000000 /dev/zero > /tmp/big.bin')
    old = os.path.join(WORK, 'old.bin')
    with open(old, 'w') as f:
        f.write('old')
    p = c.popen(['cp', '-q', SB + ':/tmp/big.bin', old], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    end = time.time() + 60
    while time.time() < end and not [n for n in os.listdir(WORK) if n.startswith('.old.bin.box-')]:
        time.sleep(0.005)
    p.send_signal(signal.SIGSTOP)
    check(t, c('pause', SB), 0, 'pause during a cp out (box stopped meanwhile)')
    p.send_signal(signal.SIGCONT)
    rc, err = clitest.wait_exit(p, 60)
    t.eq(rc, 3, 'the cut download: exit 3 (the connection)')
    with open(old, 'rb') as f:
        kept = f.read(16)
    t.eq((kept, [n for n in os.listdir(WORK) if n.startswith('.old.bin')]), (b'old', []),
         '... the old file is whole and no temporary file is left')
    check(t, c('wake', SB), 0, 'wake after it')
    c('exec', '--user', 'root', SB, '--', 'rm', '-f', '/tmp/big.bin')

    r = c('cp', '--user', 'box', src, SB + ':/root/nope')
    check(t, r, 1, 'cp --user box into /root: exit 1', err_contains='(permission_denied)')
    r = c('cp', SB + ':/tmp/does-not-exist', os.path.join(WORK, 'x'))
    check(t, r, 1, 'cp of a missing sandbox path: exit 1', err_contains='(not_found)')
    t.ok(not os.path.exists(os.path.join(WORK, 'x')), '... and nothing is written here')
    r = c('cp', os.path.join(WORK, 'no-such-local'), SB + ':/tmp/x')
    check(t, r, 1, 'cp of a missing local path: exit 1')


def wait_port(port, session, timeout=20):
    end = time.time() + timeout
    r = None
    while time.time() < end:
        r = c('ports', SB)
        for ln in r.out.splitlines()[1:]:
            cols = ln.split()
            if cols and cols[0] == str(port):
                return cols, r
        time.sleep(0.5)
    return None, r


def process_kib(pid, field='VmRSS'):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    return 0


def slow_local_client(t, pf, local):
    """A local client that stops reading while the sandbox sends 96 MiB:
    port-forward stops reading the WebSocket (and boxd the agent), so its
    memory stays bounded; then everything arrives."""
    size = 96 * 1024 * 1024
    check(t, c('exec', SB, '--', 'sh', '-c', 'head -c %d /dev/zero > /tmp/www/big.bin' % size), 0,
          'a 96 MiB file for the HTTP server')
    base = process_kib(pf.pid)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.connect(('127.0.0.1', local))
    s.sendall(b'GET /big.bin HTTP/1.0\r\n\r\n')
    time.sleep(6)   # the server in the guest would have sent it all by now
    stalled = process_kib(pf.pid)
    got = 0
    s.settimeout(120)
    head = b''
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        if head is not None:
            head += d
            if b'\r\n\r\n' in head:
                got = len(head) - head.index(b'\r\n\r\n') - 4
                head = None
            continue
        got += len(d)
    s.close()
    t.eq(got, size, 'the stalled client then reads all 96 MiB through port-forward')
    with open('/proc/%d/maps' % pf.pid) as f:
        sanitized = 'libasan' in f.read()
    if sanitized:
        t.skip('port-forward memory stays bounded while its local client stalls',
               'RSS means nothing under AddressSanitizer (quarantine, shadow memory); checked in the plain build')
    else:
        t.ok(stalled - base < 24 * 1024,
             'port-forward memory stays bounded while its local client stalls (RSS %d -> %d KiB)'
             % (base, stalled))


def test_ports(t):
    boxd_alive()
    with open(os.path.join(WORK, 'page.bin'), 'wb') as f:
        f.write(os.urandom(2 * 1024 * 1024))
    check(t, c('cp', os.path.join(WORK, 'page.bin'), SB + ':/tmp/www/page.bin'), 1,
          'cp of a file to a missing directory: exit 1 (not_found)')
    check(t, c('exec', SB, '--', 'mkdir', '-p', '/tmp/www'), 0, 'mkdir /tmp/www')
    check(t, c('cp', os.path.join(WORK, 'page.bin'), SB + ':/tmp/www/page.bin'), 0, 'cp the page in')
    r = c('exec', '-d', '--cwd', '/tmp/www', SB, '--', 'python3', '-m', 'http.server', '8000',
          '--bind', '127.0.0.1')
    sid = r.out.strip()
    cols, r = wait_port(8000, sid)
    t.ok(cols is not None and cols[1] == '127.0.0.1' and cols[-1] == sid,
         'box ports: 8000 on 127.0.0.1 with the session that started it', r.describe() if r else None)
    r = c('ports', SB, '--json')
    t.ok(r.rc == 0 and '"port" : 8000' in r.out, 'ports --json', r.out)

    pf = c.popen(['port-forward', SB, '0:8000', '0:8999'], stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE)
    try:
        lines = [pf.stdout.readline().decode() for _ in range(2)]
        ports = [re.search(r'127\.0\.0\.1:(\d+) -> %s:(\d+)' % SB, ln) for ln in lines]
        t.ok(all(ports), 'port-forward prints each local address it listens on', lines)
        if not all(ports):
            return
        local = int(ports[0].group(1))
        closed = int(ports[1].group(1))
        with open(os.path.join(WORK, 'page.bin'), 'rb') as f:
            page = f.read()
        body = urllib.request.urlopen('http://127.0.0.1:%d/page.bin' % local, timeout=60).read()
        t.ok(body == page, 'an HTTP GET through port-forward: 2 MiB byte for byte', len(body))
        results = []

        def fetch():
            try:
                results.append(urllib.request.urlopen('http://127.0.0.1:%d/page.bin' % local,
                                                      timeout=60).read() == page)
            except OSError as e:
                results.append(repr(e))
        threads = [threading.Thread(target=fetch) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(90)
        t.eq(results, [True] * 4, 'four connections at once, each with its own stream')
        # a client that half-closes (shutdown of its writing, nc -N) still
        # gets the whole answer: HTTP/1.0 without keep-alive
        with socket.create_connection(('127.0.0.1', local), timeout=60) as sk:
            sk.sendall(b'GET /page.bin HTTP/1.0\r\nHost: x\r\n\r\n')
            sk.shutdown(socket.SHUT_WR)
            answer = b''
            while True:
                chunk = sk.recv(65536)
                if not chunk:
                    break
                answer += chunk
        t.ok(answer.startswith(b'HTTP/1.0 200') and answer.endswith(page),
             'a local client that shuts its writing side after the request gets the whole answer',
             (answer[:40], len(answer)))
        slow_local_client(t, pf, local)
        try:
            urllib.request.urlopen('http://127.0.0.1:%d/' % closed, timeout=30).read()
            refused = False
        except OSError:
            refused = True
        t.ok(refused, 'a forwarded port where nothing listens: the connection is closed')
    finally:
        pf.send_signal(signal.SIGINT)
        rc, err = clitest.wait_exit(pf, 20)
    t.eq(rc, 0, 'port-forward ends with 0 on SIGINT')
    t.ok('(port_closed)' in err and 'CRITICAL' not in err and 'WARNING' not in err,
         'port-forward said why the other port failed (port_closed), and nothing else', err)
    c('signal', SB, sid, 'TERM')


def test_pause_under_session(t):
    boxd_alive()
    p = c.popen(['exec', '-i', '--detachable', SB, '--', 'sh', '-c', 'echo started; sleep 600'],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    r = c('pause', SB)
    check(t, r, 0, 'pause while a session is attached')
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    err = err.decode('utf-8', 'replace')
    t.ok(first == b'started\n' and p.returncode == 125 and 'went away' in err,
         'the attached box exits 125: the sandbox went away, the status is unknown',
         'first %r exit %r stderr %r' % (first, p.returncode, err))
    m = re.search(r'box attach %s (s-[a-z0-9]{10})' % SB, err)
    t.ok(m is not None, 'box says how to attach the detachable session after the wake', err)
    if m is None:
        return
    check(t, c('wake', SB), 0, 'wake')
    p = c.popen(['attach', SB, m.group(1)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)
    first = p.stdout.readline()
    c('signal', SB, m.group(1), 'KILL')
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
    t.ok(first == b'started\n' and p.returncode == 137,
         'the session survived the pause: attach replays its output and ends with SIGKILL\'s 137',
         'first %r exit %r' % (first, p.returncode))
    p.stdout.close()
    p.stderr.close()


# ---- the terminal, under tmux ---------------------------------------------

TMUX_SOCKET = 'box-cli-test-%d' % os.getpid()


def tmux(*args):
    return subprocess.run(['tmux', '-L', TMUX_SOCKET] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE).stdout.decode('utf-8', 'replace')


def pane():
    return tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', 'cli')


def wait_pane(pattern, timeout=30):
    end = time.time() + timeout
    text = ''
    while time.time() < end:
        text = pane()
        m = re.search(pattern, text, re.M)
        if m is not None:
            return m, text
        time.sleep(0.2)
    return None, text


def keys(*k):
    tmux('send-keys', '-t', 'cli', *k)


def test_terminal(t):
    boxd_alive()
    if shutil.which('tmux') is None:
        t.skip('the interactive terminal under tmux', 'tmux is not installed')
        return
    env = clitest.env_for(c.url, KEY)
    env['PS1'] = 'host$ '
    env['TERM'] = 'xterm-256color'
    env['PATH'] = os.path.dirname(clitest.BOX) + ':' + env.get('PATH', '')
    subprocess.run(['tmux', '-L', TMUX_SOCKET, '-f', '/dev/null', 'new-session', '-d', '-s', 'cli',
                    '-x', '100', '-y', '30', 'bash --norc --noprofile'], env=env)
    try:
        terminal_session(t)
    finally:
        tmux('kill-server')


def terminal_session(t):
    before = os.path.join(WORK, 'stty-before')
    after = os.path.join(WORK, 'stty-after')
    wait_pane(r'[$#] $', 10)
    keys("PS1='host$ '", 'Enter')
    m, text = wait_pane(r'^host\$ ', 10)
    t.ok(m is not None, 'tmux runs a shell', text)
    keys('box create --name tty-made', 'Enter')
    m, text = wait_pane(r'Sandbox tty-made \(sb-[a-z2-7]{12}\) is running after [0-9.]+ s', 300)
    t.ok(m is not None, 'box create on a terminal says when the sandbox runs', text)

    keys('clear; stty -g > %s; box exec -it --detachable %s; echo "EXIT=$?"; stty -g > %s'
         % (before, SB, after), 'Enter')
    m, text = wait_pane(r'@%s' % SB, 60)
    t.ok(m is not None, 'box exec -it: the sandbox\'s shell prompt', text)
    keys('echo hi-$((6*7))', 'Enter')
    m, text = wait_pane(r'^hi-42$', 20)
    t.ok(m is not None, 'typed "echo hi-$((6*7))": the shell answered hi-42', text)
    keys('stty size', 'Enter')
    m, text = wait_pane(r'^30 100$', 20)
    t.ok(m is not None, 'stty size in the sandbox: the window\'s 30 rows, 100 columns', text)
    tmux('resize-window', '-t', 'cli', '-x', '120', '-y', '40')
    time.sleep(0.5)
    keys('stty size', 'Enter')
    m, text = wait_pane(r'^40 120$', 20)
    t.ok(m is not None, 'after resizing the window: stty size follows (40 120, SIGWINCH)', text)
    keys('sleep 120', 'Enter')
    time.sleep(1)
    keys('C-c')
    keys('echo still-$((1+1))', 'Enter')
    m, text = wait_pane(r'^still-2$', 20)
    t.ok(m is not None and 'EXIT=' not in text,
         'Ctrl-C interrupts the remote sleep, not box (raw mode)', text)
    keys('C-p', 'C-q')
    m, text = wait_pane(r'Detached from session (s-[a-z0-9]{10})', 20)
    t.ok(m is not None, 'Ctrl-P Ctrl-Q detaches and names the session', text)
    m2, text = wait_pane(r'^EXIT=0$', 10)
    t.ok(m2 is not None, 'a detach exits 0', text)
    t.ok(('box attach %s ' % SB) in text, 'and says how to re-attach', text)
    time.sleep(0.5)
    try:
        with open(before) as a, open(after) as b:
            same = a.read() == b.read()
    except OSError as e:
        same = repr(e)
    t.eq(same, True, 'the terminal\'s settings are restored after box (stty -g before = after)')
    if m is None:
        return
    sid = m.group(1)
    r = c('sessions', SB)
    row = [ln for ln in r.out.splitlines() if ln.startswith(sid)]
    t.ok(len(row) == 1 and 'running' in row[0] and row[0].split()[-1] == 'no',
         'the detached session runs on, not attached', r.out)

    keys('clear', 'Enter')
    tmux('clear-history', '-t', 'cli')
    tmux('resize-window', '-t', 'cli', '-x', '110', '-y', '35')
    time.sleep(0.5)
    keys('box attach %s %s; echo "EXIT2=$?"' % (SB, sid), 'Enter')
    m, text = wait_pane(r'^hi-42$', 30)
    t.ok(m is not None, 'box attach replays the session\'s output (hi-42 again)', text)
    keys('stty size', 'Enter')
    m, text = wait_pane(r'^35 110$', 20)
    t.ok(m is not None, 'attach passes the window\'s size (resized meanwhile to 35 110)', text)
    keys('exit 3', 'Enter')
    m, text = wait_pane(r'^EXIT2=3$', 30)
    t.ok(m is not None, 'the shell\'s exit 3 ends box attach with 3', text)

    keys('clear', 'Enter')
    keys('echo "L=$TERM"; box exec -it %s -- sh -c "echo R=\\$TERM; exit 4"; echo "EXIT3=$?"' % SB,
         'Enter')
    m, text = wait_pane(r'^EXIT3=4$', 60)
    local = re.search(r'^L=(\S+)$', text, re.M)
    remote = re.search(r'^R=(\S+)$', text, re.M)
    t.ok(m is not None and local is not None and remote is not None
         and local.group(1) == remote.group(1),
         'box exec -it with a command: the local TERM is the command\'s, its exit status 4', text)
    keys('clear', 'Enter')
    keys('box exec -t %s -- sh -c "trap \'echo got-int; exit 6\' INT; echo ready; sleep 100 & wait";'
         ' echo "EXIT5=$?"' % SB, 'Enter')
    m, text = wait_pane(r'^ready', 30)
    keys('C-c')
    m, text = wait_pane(r'^EXIT5=6$', 30)
    t.ok(m is not None and 'got-int' in text,
         'box exec -t without -i: the terminal is not raw, Ctrl-C reaches the command as SIGINT',
         text)

    keys('clear', 'Enter')
    keys('stty -g > %s; box exec -it %s -- sleep 101; echo "EXIT6=$?"; stty -g > %s'
         % (before + '2', SB, after + '2'), 'Enter')
    time.sleep(3)
    pids = subprocess.run(['pgrep', '-f', 'box exec -it %s -- sleep 101' % SB],
                          stdout=subprocess.PIPE).stdout.split()
    for pid in pids:
        os.kill(int(pid), signal.SIGTERM)
    m, text = wait_pane(r'^EXIT6=143$', 30)
    time.sleep(0.5)
    try:
        with open(before + '2') as a, open(after + '2') as b:
            same = a.read() == b.read()
    except OSError as e:
        same = repr(e)
    t.ok(len(pids) == 1 and m is not None and same is True,
         'SIGTERM to box in raw mode: it exits 143 with the terminal restored',
         'pids %r same %r\n%s' % (pids, same, text))

    keys('clear', 'Enter')
    keys('box exec -it %s -- sh -c "cat; echo done"; echo "EXIT4=$?"' % SB, 'Enter')
    time.sleep(2)
    keys('abc', 'Enter')
    keys('C-p', 'x', 'Enter', 'C-d')
    m, text = wait_pane(r'^EXIT4=0$', 30)
    t.ok(m is not None and 'done' in text and '^P' in text,
         'without --detachable Ctrl-P is an ordinary key (cat shows ^P), Ctrl-D ends the input', text)


def test_stop_and_continue(t):
    # stopped (kill -TSTP: in raw mode ^Z is the command's) and continued:
    # box gives the terminal its settings back before it stops and makes it
    # raw again when continued, whatever a shell did meanwhile.  On a pty of
    # the test's own: tmux would continue a stopped pane process at once.
    import pty
    import termios
    boxd_alive()
    env = clitest.env_for(c.url, KEY)
    env['TERM'] = 'xterm'
    pid, master = pty.fork()
    if pid == 0:
        os.execve(clitest.BOX, ['box', 'exec', '-it', SB, '--', 'sh'], env)
    os.set_blocking(master, False)

    def drain():
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    def canonical():
        return bool(termios.tcgetattr(master)[3] & termios.ICANON)

    def state():
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0]
    try:
        end = time.time() + 60
        while time.time() < end and canonical():
            drain()
            time.sleep(0.1)
        time.sleep(0.5)
        raw_before = not canonical()
        os.kill(pid, signal.SIGTSTP)
        time.sleep(1)
        drain()
        stopped, cooked = state(), canonical()
        # what a shell does when it takes the terminal back: settings of its own
        attrs = termios.tcgetattr(master)
        attrs[3] |= termios.ICANON | termios.ECHO
        termios.tcsetattr(master, termios.TCSANOW, attrs)
        os.kill(pid, signal.SIGCONT)
        time.sleep(1)
        drain()
        t.ok(raw_before and stopped == 'T' and cooked,
             'kill -TSTP of box in raw mode: the terminal gets its settings back, then box stops',
             (raw_before, stopped, cooked))
        t.ok(state() != 'T' and not canonical(), 'continued (SIGCONT): box runs and the terminal is raw again',
             (state(), canonical()))
        os.write(master, b'exit 7\r')
        end = time.time() + 30
        rc = None
        while time.time() < end and rc is None:
            drain()
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
            time.sleep(0.1)
        t.eq(rc, 7, '... and the session goes on: its exit 7 is box\'s')
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        os.close(master)


def test_cleanup(t):
    boxd_alive()
    r = c('delete', SB, 'tty-made')
    check(t, r, 0, 'box delete of both sandboxes', out='%s\ntty-made\n' % SB)
    d.stop()


try:
    vmtest.main(t, clock, test_exec_oneshot, test_exec_stream, test_sessions, test_cp, test_ports,
                test_terminal, test_stop_and_continue, test_pause_under_session, test_cleanup)
finally:
    shutil.rmtree(WORK, ignore_errors=True)
