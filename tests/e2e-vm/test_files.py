#!/usr/bin/env python3
# vm: the file routes of the spec's "Files" on a real microVM: write and
# read back binary data with mode and mkdir, stat (file, dir, symlink with
# its target, no following), list, mkdir, rename, delete (409 for a
# non-empty directory, recursive), users (owners, 403 refusals), atomic
# replacement under a concurrent reader in the guest, the refusals before
# any byte of a body is read, and a transfer that a pause cuts short.
# Tar and big transfers are in test_tar.py, watches and the in-sandbox
# socket in test_insandbox.py.

import re
import socket
import threading
import time

import filetest  # noqa: F401  (first: puts tests/e2e-vm and tests/e2e on sys.path)
import vmtest  # noqa: E402
from vmtest import VmBoxd, Tap  # noqa: E402
from filetest import Fs, STAT_FIELDS, guest, guest_ok, pattern_chunks, sha256

RE_MTIME = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$')

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('files'))
OTHER = vmtest.setup_or_bail(d, lambda: d.project_with_key('others'))
with clock('create (first, may build the template snapshot)'):
    SB = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'files-box'}))
fs = Fs(d, KEY, 'files-box')


def sh(script, **kw):
    return guest(d, KEY, 'files-box', script, **kw)


def owner(path):
    return sh('stat -c %U:%a ' + path).out.strip()


def test_write_read(t):
    sh('rm -rf /tmp/rw; mkdir -p /tmp/rw')
    data = bytes(range(256)) * 64 + b'\x00\xff end'
    r = fs.put('/tmp/rw/bin', data, mode='0640')
    t.status(r, 200, 'PUT fs/file: 200')
    t.fields(r[2], STAT_FIELDS, 'the answer is a Stat (path, name, type, size, mode, mtime)')
    st = r[2] or {}
    t.eq((st.get('path'), st.get('name'), st.get('type'), st.get('size'), st.get('mode')),
         ('/tmp/rw/bin', 'bin', 'file', len(data), '0640'), 'Stat of the new file: mode 0640 as asked')
    t.match(RE_MTIME, st.get('mtime'), 'mtime is RFC 3339 UTC')
    r = fs.get('/tmp/rw/bin')
    t.eq((r[0], r[1].get('content-type'), r[3]), (200, 'application/octet-stream', data),
         'GET fs/file gives the bytes back, application/octet-stream')
    r = sh('sha256sum < /tmp/rw/bin')
    t.eq(r.out.split()[0] if r.out else None, sha256(data), 'the guest has the same bytes')

    r = fs.put('/tmp/rw/plain', b'hello\n')
    t.eq((r[0], (r[2] or {}).get('mode')), (200, '0644'), 'a new file without mode= is 0644')
    r = fs.put('/tmp/rw/bin', b'again')
    t.eq((r[0], (r[2] or {}).get('size'), (r[2] or {}).get('mode')), (200, 5, '0640'),
         'replacing a file keeps its mode when none is given')
    r = fs.put('/tmp/rw/empty', b'')
    t.eq((r[0], (r[2] or {}).get('size')), (200, 0), 'an empty body makes an empty file')
    t.eq(fs.get('/tmp/rw/empty')[:1] + (fs.get('/tmp/rw/empty')[3],), (200, b''),
         'GET of an empty file: 200, no bytes')

    r = fs.put('/tmp/rw/missing/deeper/f', b'x')
    t.error(r, 404, 'not_found', 'a missing parent without mkdir=true is 404')
    t.eq(sh('test -e /tmp/rw/missing && echo yes || echo no').out, 'no\n',
         'nothing was created for the refused write')
    r = fs.put('/tmp/rw/missing/deeper/f', b'x', mkdir=True)
    t.eq((r[0], (r[2] or {}).get('size')), (200, 1), 'mkdir=true creates the missing parents')
    r = fs.stat('/tmp/rw/missing/deeper')
    t.eq((r[0], (r[2] or {}).get('type')), (200, 'dir'), 'the parent is a directory now')

    t.error(fs.get('/tmp/rw/nope'), 404, 'not_found', 'GET of a missing file is 404')
    t.error(fs.get('/tmp/rw'), 400, 'invalid', 'GET of a directory is 400 invalid')
    t.error(fs.put('/tmp/rw', b'x'), 400, 'invalid', 'PUT onto a directory is 400 invalid')
    t.error(fs.get('tmp/rw/bin'), 400, 'invalid', 'a relative path is 400 invalid',
            message_contains='absolute')
    t.error(fs.request('GET', '/fs/file'), 400, 'invalid', 'no path= is 400 invalid')
    t.error(fs.get('/tmp/rw/bin', bogus='1'), 400, 'invalid', 'an unknown query parameter is 400',
            message='unknown query parameter bogus')
    t.error(fs.put('/tmp/rw/x', b'x', mkdir='yes'), 400, 'invalid', 'mkdir=yes is 400 (true or false)')
    t.error(fs.put('/tmp/rw/x', b'x', mode='0999'), 400, 'invalid', 'mode=0999 is 400 (octal)')
    t.error(fs.put('/tmp/rw/x', b'x', mode='17777'), 400, 'invalid', 'mode beyond 07777 is 400')
    t.error(fs.request('GET', '/fs/file?path=/a&path=/b'), 400, 'invalid',
            'a parameter given twice is 400')
    t.error(Fs(d, None, 'files-box').get('/tmp/rw/bin'), 401, 'unauthorized', 'no key: 401')
    t.error(Fs(d, OTHER, 'files-box').get('/tmp/rw/bin'), 404, 'not_found',
            "another project's sandbox: 404")
    t.error(Fs(d, KEY, 'no-such-box').stat('/'), 404, 'not_found', 'no such sandbox: 404')
    r = fs.request('HEAD', '/fs/file', path='/tmp/rw/plain')
    t.eq((r[0], r[3]), (200, b''), 'HEAD fs/file: 200 without a body')
    t.eq(fs.request('HEAD', '/fs/file', path='/tmp/rw/nope')[0], 404, 'HEAD of a missing file: 404')


def test_write_targets(t):
    # on tmpfs the agent writes the body into the file itself, on a disk
    # file system its worker does: the same bytes and answers either way
    big = b''.join(pattern_chunks(6 << 20))
    for path in ('/tmp/rw-big', '/var/tmp/rw-big'):
        r = fs.put(path, big, mode='0600')
        t.eq((r[0], (r[2] or {}).get('size'), (r[2] or {}).get('mode')), (200, len(big), '0600'),
             'PUT of 6 MiB into %s: 200 and its Stat' % path)
        r = sh('sha256sum < %s | cut -c1-64; stat -f -c %%T %s' % (path, path))
        t.eq(r.out.split(), [sha256(big), 'tmpfs' if path.startswith('/tmp') else 'ext2/ext3'],
             'the guest has the same bytes in %s' % path)
    # a full file system: the write fails, the old file stays, nothing is
    # left
    guest_ok(t, d, KEY, 'files-box', 'mkdir -p /mnt/small && mount -t tmpfs -o size=1m boxsmall /mnt/small'
             ' && echo old > /mnt/small/f && stat -f -c %T /mnt/small | grep -qx tmpfs',
             'a 1 MiB tmpfs in the guest (mount(8))')
    try:
        r = fs.put('/mnt/small/f', big)
        t.error(r, 409, 'conflict', 'PUT onto a full tmpfs: 409 conflict (the state forbids it), saying why',
                message_contains='No space left')
        r = sh('cat /mnt/small/f; ls -a /mnt/small | wc -l')
        t.eq(r.out[:64], 'old\n3\n', 'the old file stays, no temporary file is left')
        t.eq(fs.put('/mnt/small/f', b'fits')[0], 200, 'a write that fits goes through')
    finally:
        sh('umount /mnt/small')


def test_refusal_before_body(t):
    # a refused upload answers from the headers: with Expect: 100-continue
    # the client never sends its body
    s = socket.create_connection(('127.0.0.1', d.port), timeout=60)
    head = ('PUT /v1/sandboxes/files-box/fs/file?path=/tmp/none/x HTTP/1.1\r\n'
            'Host: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n'
            'Expect: 100-continue\r\n\r\n' % (KEY, 1 << 30))
    s.sendall(head.encode())
    got = b''
    while b'\r\n\r\n' not in got:
        part = s.recv(65536)
        if not part:
            break
        got += part
    s.close()
    first = got.split(b'\r\n', 1)[0]
    t.ok(first.startswith(b'HTTP/1.1 404'), 'a 1 GiB PUT to a missing parent is refused (404) '
         'before its body is sent (Expect: 100-continue)', repr(got[:200]))


def test_stat_list(t):
    sh('rm -rf /tmp/sl; mkdir -p /tmp/sl/dir; printf abc > /tmp/sl/file; '
       'ln -s /etc/passwd /tmp/sl/link; ln -s /tmp/sl/dir /tmp/sl/dirlink; ln -s /nowhere /tmp/sl/dangling; '
       'mkfifo /tmp/sl/fifo; chmod 1750 /tmp/sl/dir')
    r = fs.stat('/tmp/sl/file')
    t.eq((r[0], r[2]), (200, {'path': '/tmp/sl/file', 'name': 'file', 'type': 'file', 'size': 3,
                              'mode': '0644', 'mtime': (r[2] or {}).get('mtime')}), 'stat of a file')
    r = fs.stat('/tmp/sl/dir')
    t.eq((r[0], (r[2] or {}).get('type'), (r[2] or {}).get('mode')), (200, 'dir', '1750'),
         'stat of a directory: type dir, mode with the sticky bit as an octal string')
    r = fs.stat('/tmp/sl/link')
    st = r[2] or {}
    t.eq((r[0], st.get('type'), st.get('target'), st.get('size')), (200, 'symlink', '/etc/passwd', 11),
         'stat of a symlink: type symlink, its target, not followed')
    t.fields(st, STAT_FIELDS | {'target'}, 'a symlink Stat has target')
    r = fs.stat('/tmp/sl/dirlink')
    t.eq(((r[2] or {}).get('type'), (r[2] or {}).get('target')), ('symlink', '/tmp/sl/dir'),
         'a symlink to a directory is a symlink')
    r = fs.stat('/tmp/sl/dangling')
    t.eq((r[0], (r[2] or {}).get('type')), (200, 'symlink'), 'a dangling symlink is a symlink')
    t.eq(fs.stat('/tmp/sl/fifo')[2].get('type'), 'other', 'a FIFO is type other')
    r = fs.stat('/')
    t.eq((r[0], (r[2] or {}).get('name'), (r[2] or {}).get('type')), (200, '/', 'dir'), 'stat of /')
    t.error(fs.stat('/tmp/sl/none'), 404, 'not_found', 'stat of a missing path: 404')

    r = fs.list('/tmp/sl')
    entries = (r[2] or {}).get('entries')
    t.eq(r[0], 200, 'GET fs/list: 200')
    t.fields(r[2], {'entries'}, 'the answer is {entries}')
    names = [e.get('name') for e in entries or []]
    t.eq(names, ['dangling', 'dir', 'dirlink', 'fifo', 'file', 'link'], 'entries sorted by name, no . or ..')
    by = {e['name']: e for e in entries or []}
    t.eq((by.get('link', {}).get('target'), by.get('dir', {}).get('type'), by.get('file', {}).get('path')),
         ('/etc/passwd', 'dir', '/tmp/sl/file'), 'entries are Stats (target, type, full path)')
    t.ok(all(set(e) - {'target'} == STAT_FIELDS for e in entries or []), 'every entry has the Stat fields')
    t.error(fs.list('/tmp/sl/file'), 400, 'invalid', 'list of a file is 400 invalid')
    t.error(fs.list('/tmp/sl/none'), 404, 'not_found', 'list of a missing directory is 404')
    r = fs.list('/tmp/sl/dir')
    t.eq((r[0], r[2]), (200, {'entries': []}), 'an empty directory lists no entries')

    sh('mkdir -p /tmp/many && cd /tmp/many && seq -w 1 3000 | xargs touch')
    r = fs.list('/tmp/many')
    names = [e.get('name') for e in (r[2] or {}).get('entries', [])]
    t.eq((r[0], len(names), names[:2], names[-1:]), (200, 3000, ['0001', '0002'], ['3000']),
         'a directory of 3000 entries lists them all (streamed, more than one agent frame)')


def test_mkdir_rename_delete(t):
    sh('rm -rf /tmp/mk')
    r = fs.mkdir({'path': '/tmp/mk'})
    t.eq((r[0], (r[2] or {}).get('type'), (r[2] or {}).get('mode')), (200, 'dir', '0755'),
         'POST fs/mkdir: the Stat of the new directory, 0755 by default')
    t.error(fs.mkdir({'path': '/tmp/mk'}), 409, 'already_exists', 'mkdir of an existing path: 409')
    t.eq(fs.mkdir({'path': '/tmp/mk', 'parents': True})[0], 200, 'with parents an existing directory is fine')
    t.error(fs.mkdir({'path': '/tmp/mk/a/b'}), 404, 'not_found', 'a missing parent without parents: 404')
    r = fs.mkdir({'path': '/tmp/mk/a/b', 'parents': True, 'mode': '0700'})
    t.eq((r[0], (r[2] or {}).get('mode')), (200, '0700'), 'parents: true makes them; mode 0700 as asked')
    t.error(fs.mkdir({'path': '/tmp/mk/c', 'x': 1}), 400, 'invalid', 'an unknown field is 400',
            message='bad request body: json: unknown field x')
    t.error(fs.mkdir({'path': '/tmp/mk/c', 'mode': 493}), 400, 'invalid', 'mode must be a string')
    t.error(fs.mkdir({'path': 'tmp/mk/c'}), 400, 'invalid', 'a relative path is 400')
    t.error(fs.mkdir({}), 400, 'invalid', 'no path is 400')
    t.error(fs.mkdir({'path': '/tmp/mk/c'}, bogus='1'), 400, 'invalid', 'unknown query parameter is 400')
    t.error(fs.request('POST', '/fs/mkdir', body=b'[1]'), 400, 'invalid', 'a body that is no object is 400')

    fs.put('/tmp/mk/f', b'1')
    r = fs.rename({'from': '/tmp/mk/f', 'to': '/tmp/mk/g'})
    t.eq((r[0], (r[2] or {}).get('path'), (r[2] or {}).get('size')), (200, '/tmp/mk/g', 1),
         'POST fs/rename: the Stat of the new path')
    t.error(fs.stat('/tmp/mk/f'), 404, 'not_found', 'the old path is gone')
    t.error(fs.rename({'from': '/tmp/mk/f', 'to': '/tmp/mk/h'}), 404, 'not_found', 'rename of a missing path: 404')
    t.error(fs.rename({'from': '/tmp/mk/g', 'to': '/tmp/mk/h', 'force': True}), 400, 'invalid',
            'rename: unknown field is 400', message='bad request body: json: unknown field force')
    t.error(fs.rename({'from': '/tmp/mk/g'}), 400, 'invalid', 'rename without to: 400')

    t.error(fs.delete('/tmp/mk'), 409, 'conflict', 'DELETE of a non-empty directory is 409 conflict')
    t.eq(fs.stat('/tmp/mk/g')[0], 200, 'nothing was deleted')
    t.error(fs.delete('/tmp/mk', recursive='maybe'), 400, 'invalid', 'recursive=maybe is 400')
    sh('mkdir -p /tmp/keep && touch /tmp/keep/precious && ln -s /tmp/keep /tmp/mk/a/link')
    r = fs.delete('/tmp/mk/g')
    t.eq((r[0], r[3]), (204, b''), 'DELETE of a file: 204, no body')
    t.eq(fs.delete('/tmp/mk/a/b')[0], 204, 'DELETE of an empty directory: 204')
    t.eq(fs.delete('/tmp/mk', recursive=True)[0], 204, 'recursive=true deletes a tree')
    t.error(fs.stat('/tmp/mk'), 404, 'not_found', 'the tree is gone')
    t.eq(sh('ls /tmp/keep').out, 'precious\n', 'a symlink in the tree was not followed')
    t.error(fs.delete('/tmp/mk'), 404, 'not_found', 'DELETE of a missing path: 404')

    # paths are normalised by name first: "/tmp/.." is "/", never deleted
    t.error(fs.delete('/tmp/..', recursive=True), 400, 'invalid', 'DELETE of /tmp/.. is DELETE of /: 400',
            message_contains='cannot delete /')
    t.error(fs.delete('/./', recursive=True), 400, 'invalid', 'DELETE of /./: 400')
    t.eq(sh('test -x /bin/sh && test -d /boot && test -d /tmp && echo intact').out, 'intact\n',
         'nothing was deleted')
    sh('mkdir -p /tmp/nm/sub/keep /tmp/nm-beside')
    r = fs.stat('/tmp/nm/./sub/keep/..//')
    t.eq((r[0], (r[2] or {}).get('path')), (200, '/tmp/nm/sub'), 'stat of /tmp/nm/./sub/keep/..//: /tmp/nm/sub')
    t.eq(fs.delete('/tmp/nm/sub/keep/..', recursive=True)[0], 204, 'DELETE of /tmp/nm/sub/keep/.. deletes /tmp/nm/sub')
    t.eq(sh('ls -a /tmp/nm; test -d /tmp/nm-beside && echo beside').out, '.\n..\nbeside\n',
         '... and only that')
    # the state forbids it: 409, not a server error
    t.error(fs.delete('/proc', recursive=True), 409, 'conflict', 'DELETE of a mount point (/proc): 409 conflict')
    sh('mkdir -p /tmp/nm/d1 /tmp/nm/d2/x && echo f > /tmp/nm/f')
    t.error(fs.rename({'from': '/tmp/nm/d1', 'to': '/tmp/nm/f'}), 409, 'conflict', 'rename of a directory onto a file: 409')
    t.error(fs.rename({'from': '/tmp/nm/d1', 'to': '/tmp/nm/d2'}), 409, 'conflict',
            'rename of a directory onto a non-empty one: 409')
    t.error(fs.rename({'from': '/tmp/nm/f', 'to': '/tmp/nm/d2'}), 409, 'conflict', 'rename of a file onto a directory: 409')
    sh('rm -rf /tmp/nm /tmp/nm-beside')
    # /tmp is a tmpfs, /home/box the disk: a rename across them is a move
    sh('rm -rf /tmp/mv /home/box/mv && mkdir -p /tmp/mv/sub && echo one > /tmp/mv/sub/f && ln -s sub/f /tmp/mv/ln'
       ' && chmod 0710 /tmp/mv/sub')
    r = fs.rename({'from': '/tmp/mv', 'to': '/home/box/mv'})
    t.eq((r[0], (r[2] or {}).get('path'), (r[2] or {}).get('type')), (200, '/home/box/mv', 'dir'),
         'rename of a tree from tmpfs to the disk: 200, its Stat')
    t.eq(sh('cat /home/box/mv/ln; stat -c %a /home/box/mv/sub; test -e /tmp/mv || echo gone').out,
         'one\n710\ngone\n', 'moved whole (a symlink, a mode), the original gone')
    sh('rm -rf /home/box/mv')


def test_users(t):
    sh('rm -rf /tmp/u; mkdir -p /tmp/u; chmod 1777 /tmp/u')
    fs.put('/tmp/u/by-root', b'r')
    t.eq(owner('/tmp/u/by-root'), 'root:644', 'without user= a created file belongs to root')
    r = fs.put('/tmp/u/by-box', b'b', user='box')
    t.eq((r[0], owner('/tmp/u/by-box')), (200, 'box:644'), 'with user=box it belongs to box')
    fs.mkdir({'path': '/tmp/u/dir-box'}, user='box')
    t.eq(owner('/tmp/u/dir-box'), 'box:755', 'mkdir with user=box: a directory of box')
    fs.mkdir({'path': '/tmp/u/dir-root'})
    t.eq(owner('/tmp/u/dir-root'), 'root:755', 'mkdir without user=: root')

    fs.put('/tmp/u/secret', b'top secret', mode='0600')
    t.error(fs.get('/tmp/u/secret', user='box'), 403, 'permission_denied',
            'box reading a root-owned 0600 file: 403')
    t.eq(fs.get('/tmp/u/secret')[3], b'top secret', 'root reads it')
    t.eq(fs.stat('/tmp/u/secret', user='box')[0], 200, 'box may stat it (the directory is searchable)')
    t.error(fs.put('/tmp/u/secret', b'overwrite', user='box'), 403, 'permission_denied',
            "box replacing root's file in a sticky directory: 403")
    t.eq(fs.get('/tmp/u/secret')[3], b'top secret', 'the refused write changed nothing')
    t.error(fs.list('/root', user='box'), 403, 'permission_denied', 'box listing /root: 403')
    t.error(fs.put('/root/x', b'x', user='box'), 403, 'permission_denied', 'box writing into /root: 403')
    t.error(fs.stat('/root/.bashrc', user='box'), 403, 'permission_denied', 'box stat in /root: 403')
    t.error(fs.mkdir({'path': '/root/d'}, user='box'), 403, 'permission_denied', 'box mkdir in /root: 403')
    t.error(fs.delete('/etc/hostname', user='box'), 403, 'permission_denied', 'box deleting /etc/hostname: 403')
    t.error(fs.rename({'from': '/etc/hostname', 'to': '/etc/hostname.new'}, user='box'), 403,
            'permission_denied', 'box renaming /etc/hostname: 403')
    t.error(fs.tar_get('/root', user='box'), 403, 'permission_denied', 'box: tar of /root: 403')
    t.error(fs.put('/tmp/u/x', b'x', user='nobody-here'), 400, 'invalid', 'an unknown user is 400')
    t.error(fs.put('/tmp/u/x', b'x', user=''), 400, 'invalid', 'an empty user is 400')
    t.eq(fs.put('/root/by-root', b'x')[0], 200, 'root writes into /root')


def test_atomic_write(t):
    size = 4 << 20
    a, b = b'A' * size, b'B' * size
    ha, hb = sha256(a), sha256(b)
    fs.put('/tmp/atomic', a)
    seconds = 20
    out = {}

    def reader():
        # every read of the whole file, hashed, until the deadline
        out['r'] = sh('end=$(( $(date +%%s) + %d )); n=0; while [ $(date +%%s) -lt $end ]; do '
                      'sha256sum /tmp/atomic; n=$((n+1)); done' % seconds, timeout=seconds + 60)

    th = threading.Thread(target=reader)
    th.start()
    time.sleep(1)
    puts = 0
    statuses = set()
    end = time.time() + seconds - 3
    while time.time() < end:
        statuses.add(fs.put('/tmp/atomic', b if puts % 2 == 0 else a)[0])
        puts += 1
    th.join()
    r = out.get('r')
    lines = [x.split()[0] for x in (r.out if r else '').splitlines() if x.strip()]
    bad = [h for h in lines if h not in (ha, hb)]
    t.eq(statuses, {200}, 'every write answered 200 (%d writes of 4 MiB)' % puts)
    t.ok(len(lines) > 10 and not bad, 'a reader in the guest saw only whole contents '
         '(%d reads, %d mixed or partial)' % (len(lines), len(bad)), bad[:3])
    t.ok(ha in lines and hb in lines, 'the reader saw both contents (the writes interleaved with it)')
    t.eq(sh('ls -a /tmp | grep -c box- || true').out.strip(), '0', 'no temporary file is left behind')


def test_interrupted_transfer(t):
    # a download that a pause cuts short ends short of its Content-Length:
    # the client sees an incomplete body, never a short file taken for whole
    total = 48 << 20
    st, body = fs.put_stream('/tmp/long', pattern_chunks(total), total)
    t.eq((st, (body or {}).get('size')), (200, total), 'a 48 MiB file to read')
    got = {'n': 0}
    result = {}

    def slow_sink(data):
        got['n'] += len(data)
        time.sleep(0.05)

    def reader():
        result['r'] = fs.get_stream('/tmp/long', slow_sink, bufsize=256 << 10)

    th = threading.Thread(target=reader)
    th.start()
    time.sleep(3)
    r = d.request('POST', '/v1/sandboxes/files-box/pause', {}, token=KEY)
    t.eq(r[0], 200, 'the sandbox pauses during the download (holds do not prevent it)')
    th.join(120)
    status, _h, n, complete = result.get('r', (None, None, 0, None))
    t.ok(status == 200 and not complete and n < total,
         'the download ends incomplete (%d of %d bytes, short of its Content-Length)' % (n, total),
         'status %r complete %r' % (status, complete))
    r = fs.stat('/tmp/long')
    t.eq((r[0], vmtest.state(d, KEY, 'files-box')), (200, 'running'), 'the next call wakes it again')


def test_abandoned_upload(t):
    # a client that goes away in the middle of a PUT: the write is
    # abandoned in the guest, the old file stays as it was
    fs.put('/tmp/abandon', b'old contents')
    s = socket.create_connection(('127.0.0.1', d.port), timeout=60)
    s.sendall(('PUT /v1/sandboxes/files-box/fs/file?path=/tmp/abandon HTTP/1.1\r\nHost: x\r\n'
               'Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n' % (KEY, 64 << 20)).encode())
    for chunk in pattern_chunks(8 << 20):
        s.sendall(chunk)
    s.close()
    time.sleep(3)
    t.eq(fs.get('/tmp/abandon')[3], b'old contents', 'a PUT cut off by its client leaves the file as it was')
    t.eq(sh('ls -a /tmp | grep -c "box-" || true').out.strip(), '0', 'and no temporary file')
    t.eq(fs.put('/tmp/abandon', b'new')[0], 200, 'the next write goes through')


vmtest.main(t, clock, test_write_read, test_write_targets, test_refusal_before_body, test_stat_list,
            test_mkdir_rename_delete, test_users, test_atomic_write, test_abandoned_upload,
            test_interrupted_transfer)
