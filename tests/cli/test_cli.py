#!/usr/bin/env python3
# cli: the `box` client against the real boxd with the dummy hypervisor:
# help and usage errors, configuration (environment, config file, which
# wins), exit statuses, create/list/get/delete/pause/stop/wake with tables
# and --json, error messages as "box: <message> (<code>)", events.

import json
import os
import re
import shutil
import signal
import tempfile
import time

from clitest import Client, box, check, wait_exit
import boxtest
from boxtest import Boxd, Tap

t = Tap()
d = Boxd(t).start()
KEY = d.project_with_key('clip')
OTHER_KEY = d.project_with_key('other')
c = Client(d, KEY)


def api_get(path, key=KEY):
    return d.request('GET', path, token=key)


def test_help_and_usage(t):
    r = box(['--help'])
    check(t, r, 0, 'box --help exits 0')
    for cmd in ('create', 'list', 'get', 'delete', 'pause', 'stop', 'wake', 'exec', 'attach',
                'sessions', 'signal', 'cp', 'ports', 'port-forward', 'events', 'checkpoint',
                'checkpoints', 'restore', 'fork', 'checkpoint-delete', 'tasks', 'task-put',
                'task-delete'):
        t.ok(re.search(r'^  %s\b' % re.escape(cmd), r.out, re.M) is not None,
             'box --help lists %s' % cmd, r.out)
    t.ok('BOX_URL' in r.out and 'BOX_KEY' in r.out, 'box --help names BOX_URL and BOX_KEY', r.out)
    r = box([])
    check(t, r, 2, 'box without a command: usage, exit 2', out='')
    t.ok('Commands:' in r.err, '... on stderr', r.err)
    r = box(['--version'])
    check(t, r, 0, 'box --version exits 0')
    t.match(r'^box \d+\.\d+', r.out, 'box --version prints the version')

    r = box(['create', '--help'])
    check(t, r, 0, 'box create --help exits 0')
    for opt in ('--name', '--template', '--cpus', '--memory-mib', '--disk-gib', '--env', '--label',
                '--idle-timeout', '--idle-action', '--protected', '--json'):
        t.ok(opt in r.out, 'box create --help lists %s' % opt, r.out)
    t.ok('box create' in r.out, 'per-command help names "box create"', r.out)
    r = box(['help', 'exec'])
    check(t, r, 0, 'box help exec exits 0')
    for opt in ('--interactive', '--tty', '--detachable', '--detach', '--user', '--cwd', '--env',
                '--timeout', '--detach-keys'):
        t.ok(opt in r.out, 'box help exec lists %s' % opt, r.out)
    for cmd in ('list', 'get', 'cp', 'port-forward', 'events', 'attach', 'signal'):
        r = box([cmd, '--help'])
        check(t, r, 0, 'box %s --help exits 0' % cmd)

    # usage errors: exit 2, and nothing is asked of the API (no key needed)
    for args, what in ((['frobnicate'], 'an unknown command'),
                       (['list', '--bogus'], 'an unknown option'),
                       (['get'], 'a missing argument'),
                       (['get', 'a', 'b'], 'an extra argument'),
                       (['create', '--env', 'NOEQUALS'], '--env without ='),
                       (['create', '--cpus', 'many'], 'a non-number for --cpus'),
                       (['list', '--label', 'novalue'], '--label without ='),
                       (['signal', 'a', 'b'], 'signal without the signal'),
                       (['cp', 'a', 'b'], 'cp with two local paths'),
                       (['cp', 'sb:relative', 'x'], 'cp with a relative sandbox path'),
                       (['port-forward', 'sb', 'notaport'], 'port-forward with a bad port spec')):
        r = box(args)
        check(t, r, 2, 'usage error (%s): exit 2' % what)
        t.ok(r.err.startswith('box: ') and r.out == '', 'usage error (%s): "box: ..." on stderr only'
             % what, r.describe())
    r = box(['frobnicate'])
    t.ok('box --help' in r.err, 'an unknown command points to box --help', r.err)
    r = box(['get'])
    t.ok('box get --help' in r.err, 'a usage error of a command points to its --help', r.err)

    # exec's own failures are 125, apart from the command's statuses
    for args, what in ((['exec'], 'no sandbox'),
                       (['exec', 'sb'], 'no command (and no -t)'),
                       (['exec', '--timeout', '0', 'sb', '--', 'true'], '--timeout 0'),
                       (['exec', '--timeout', '5', '-i', 'sb', '--', 'cat'], '--timeout with -i'),
                       (['exec', '-d', '-i', 'sb', '--', 'cat'], '-d with -i'),
                       (['exec', '-t', 'sb'], '-t without a terminal'),
                       (['exec', '--env', 'X', 'sb', '--', 'true'], '--env without ='),
                       (['exec', '--bogus', 'sb', '--', 'true'], 'an unknown option'),
                       (['exec', '--'], 'only "--"'),
                       (['exec', '--detachable', '--detach-keys', 'ctrl-1', 'sb', '--', 'top'],
                        'a bad --detach-keys, before the session starts'),
                       (['attach', '--detach-keys', 'ctrl-1', 'sb', 's-aaaaaaaaaa'], 'attach with a bad --detach-keys'),
                       (['exec', '-u', 'root', '--'], 'options and "--", no sandbox'),
                       (['attach', 'sb'], 'attach without a session')):
        r = box(args)
        check(t, r, 125, 'exec/attach usage error (%s): exit 125' % what)


def test_configuration(t):
    good_url = c.url
    r = box(['list'], url=good_url)
    check(t, r, 3, 'no key anywhere: exit 3', err_contains='BOX_KEY')
    r = box(['list'], url=good_url, key='box_' + 'a' * 32)
    check(t, r, 3, 'a refused key: exit 3', err_contains='(unauthorized)')
    t.ok('a valid API key is required' in r.err, 'the API\'s own message is printed', r.err)
    r = box(['list'], url='http://127.0.0.1:%d' % boxtest.free_port(), key=KEY)
    check(t, r, 3, 'nothing listening at BOX_URL: exit 3', err_contains='Cannot reach the API')
    r = box(['list'], url='ftp://127.0.0.1/', key=KEY)
    check(t, r, 2, 'BOX_URL that is not http(s): exit 2', err_contains='ftp://')
    r = box(['list'], url=good_url + '/', key=KEY)
    check(t, r, 0, 'a trailing slash in BOX_URL is fine')

    home = tempfile.mkdtemp(prefix='box-cli-home-')
    try:
        os.makedirs(os.path.join(home, 'box'))
        cfg = os.path.join(home, 'box', 'config')

        def write(url, key):
            with open(cfg, 'w') as f:
                f.write('# box client settings\n[box]\n')
                if url is not None:
                    f.write('url=%s\n' % url)
                if key is not None:
                    f.write('key=%s\n' % key)

        write(good_url, KEY)
        r = box(['list', '--json'], config_home=home)
        check(t, r, 0, 'url and key from $XDG_CONFIG_HOME/box/config')
        write(good_url, 'box_' + 'b' * 32)
        r = box(['list'], config_home=home, key=KEY)
        check(t, r, 0, 'BOX_KEY wins over key= in the config file')
        write(good_url, KEY)
        r = box(['list'], config_home=home, key='box_' + 'c' * 32)
        check(t, r, 3, 'BOX_KEY wins over the file also when it is the wrong one',
              err_contains='(unauthorized)')
        write('http://127.0.0.1:%d' % boxtest.free_port(), KEY)
        r = box(['list'], config_home=home, url=good_url)
        check(t, r, 0, 'BOX_URL wins over url= in the config file')
        write(good_url, KEY)
        r = box(['list'], config_home=home, url='http://127.0.0.1:%d' % boxtest.free_port())
        check(t, r, 3, 'BOX_URL wins over the file also when nothing listens there')
        r = box(['list'], config_home=home, url='', key='')
        check(t, r, 0, 'empty BOX_URL and BOX_KEY fall back to the file')
        write(None, KEY)
        r = box(['list'], config_home=home)
        check(t, r, 3, 'no url anywhere: the default address (nothing of ours there): exit 3')
        t.ok('127.0.0.1:7070' in r.err or '(unauthorized)' in r.err,
             'the default address is http://127.0.0.1:7070', r.err)
        write(good_url, None)
        r = box(['list'], config_home=home)
        check(t, r, 3, 'a config file without key=: exit 3', err_contains='key=')
        with open(cfg, 'w') as f:
            f.write('this is [not a key file\n')
        r = box(['list'], config_home=home, key=KEY)
        check(t, r, 1, 'a config file that is not a key file is an error (exit 1)', err_contains=cfg)
        r = box(['list'], config_home=home, url=good_url, key=KEY)
        check(t, r, 0, 'the file is not read when BOX_URL and BOX_KEY say everything')
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_create(t):
    r = c('create', '--name', 'alpha', '--label', 'team=web', '--label', 'tier=1', '--env', 'GREETING=hi there',
          '--cpus', '3', '--memory-mib', '1024', '--disk-gib', '8', '--idle-timeout', '120',
          '--idle-action', 'stop', '--http-port', '3000')
    check(t, r, 0, 'create with every option', out='alpha\n')
    t.eq(r.err, '', 'create prints nothing on stderr when it is not a terminal')
    st, _h, sb, _raw = api_get('/v1/sandboxes/alpha')
    t.eq(st, 200, 'the sandbox exists')
    sb = sb or {}
    t.eq(sb.get('state'), 'running', 'create answered once running')
    t.eq(sb.get('labels'), {'team': 'web', 'tier': '1'}, '--label (twice) became the labels')
    t.eq(sb.get('env'), {'GREETING': 'hi there'}, '--env became the env')
    t.eq(sb.get('resources'), {'cpus': 3, 'memory_mib': 1024, 'disk_gib': 8}, 'resources as given')
    t.eq(sb.get('idle'), {'timeout_s': 120, 'action': 'stop'}, 'idle timeout and action as given')
    t.eq((sb.get('http_port'), sb.get('protected')), (3000, False), 'http port as given, not protected')

    r = c('create', '--json', '--protected')
    check(t, r, 0, 'create --json --protected')
    try:
        made = json.loads(r.out)
    except ValueError:
        made = {}
    t.fields(made, boxtest.SANDBOX_FIELDS, 'create --json prints the whole Sandbox')
    t.match(boxtest.RE_GEN_NAME, made.get('name'), 'a generated name without --name')
    t.eq(made.get('protected'), True, '--protected')
    PROTECTED.append(made.get('name'))

    r = c('create', '--name', 'alpha')
    check(t, r, 1, 'a taken name: exit 1', err_contains='(already_exists)')
    t.ok(re.match(r'^box: .+ \(already_exists\)\n$', r.err) is not None,
         'the error is one line "box: <message> (<code>)"', r.err)
    t.eq(r.out, '', 'nothing on stdout for an error without --json')
    r = c('create', '--name', 'alpha', '--json')
    check(t, r, 1, 'a taken name with --json: exit 1')
    try:
        err = json.loads(r.out)
    except ValueError:
        err = None
    t.eq(sorted((err or {}).get('error', {}).keys()), ['code', 'message'],
         '--json prints the {error: {code, message}} object on stdout')
    t.eq(((err or {}).get('error') or {}).get('code'), 'already_exists', '... with the API\'s code')
    r = c('create', '--name', 'Bad_Name')
    check(t, r, 1, 'an invalid name: exit 1', err_contains='(invalid)')
    r = c('create', '--idle-timeout', '5')
    check(t, r, 1, 'an idle timeout below 30: exit 1', err_contains='(invalid)')
    r = c('create', '--template', 'no-such-template')
    check(t, r, 1, 'an unknown template: exit 1', err_contains='(invalid)')


PROTECTED = []


def test_list_get(t):
    for name, labels in (('beta', ['team=web']), ('gamma', ['team=db'])):
        args = ['create', '--name', name]
        for lab in labels:
            args += ['--label', lab]
        check(t, c(*args), 0, 'create %s' % name)
    r = c('list')
    check(t, r, 0, 'list')
    lines = r.out.splitlines()
    t.ok(len(lines) >= 1 and lines[0].split()[:3] == ['NAME', 'ID', 'STATE'],
         'list starts with a header NAME ID STATE ...', r.out)
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    t.ok({'alpha', 'beta', 'gamma'} <= set(rows), 'list shows every sandbox', r.out)
    t.ok(all(re.match(r'^sb-[a-z2-7]{12}$', row[1]) for row in rows.values()), 'second column is the ID',
         r.out)
    t.eq(rows.get('beta', [None, None, None])[2], 'running', 'third column is the state')

    r = c('list', '--json')
    check(t, r, 0, 'list --json')
    api = api_get('/v1/sandboxes')[2]
    try:
        mine = json.loads(r.out)
    except ValueError:
        mine = None
    t.eq(sorted(s['id'] for s in (mine or {}).get('sandboxes', [])),
         sorted(s['id'] for s in api['sandboxes']), 'list --json is the API\'s {sandboxes: [...]}')

    r = c('list', '--label', 'team=web')
    names = sorted(ln.split()[0] for ln in r.out.splitlines()[1:])
    t.eq(names, ['alpha', 'beta'], 'list --label team=web')
    r = c('list', '--label', 'team=web', '--label', 'tier=1')
    t.eq(sorted(ln.split()[0] for ln in r.out.splitlines()[1:]), ['alpha'], 'two labels: both must match')
    r = c('list', '--label', 'team=none')
    t.eq((r.rc, len(r.out.splitlines())), (0, 1), 'no match: only the header')
    d.request('POST', '/v1/sandboxes/gamma/pause', {}, token=KEY)
    r = c('list', '--state', 'paused')
    t.eq(sorted(ln.split()[0] for ln in r.out.splitlines()[1:]), ['gamma'], 'list --state paused')
    r = c('list', '--state', 'sleepy')
    check(t, r, 1, 'list --state with an unknown state: exit 1', err_contains='(invalid)')

    r = c('get', 'beta')
    check(t, r, 0, 'get')
    for label, value in (('Name', 'beta'), ('State', 'running'), ('Template', 'base'),
                         ('Labels', 'team=web'), ('Protected', 'no'),
                         ('URL', 'https://beta--clip.' + boxtest.SANDBOX_DOMAIN)):
        t.ok(re.search(r'^%s:\s+%s$' % (label, re.escape(value)), r.out, re.M) is not None,
             'get shows %s: %s' % (label, value), r.out)
    # this boxd serves no edge: GET /v1/edge says so, and `box url` adds no port
    t.eq(api_get('/v1/edge')[:3:2], (200, {'sandbox_domain': boxtest.SANDBOX_DOMAIN, 'port': None}),
         'GET /v1/edge without an edge: port null')
    check(t, c('url', 'beta', '--all'), 0, 'url without an edge: the record\'s URL as it is',
          out='https://beta--clip.%s\n' % boxtest.SANDBOX_DOMAIN)
    sb = api_get('/v1/sandboxes/beta')[2]
    r = c('get', sb['id'], '--json')
    check(t, r, 0, 'get by ID --json')
    try:
        got = json.loads(r.out)
    except ValueError:
        got = None
    t.eq((got or {}).get('id'), sb['id'], 'get --json is the Sandbox (by ID as by name)')
    r = c('get', 'nope')
    check(t, r, 1, 'get of an unknown sandbox: exit 1', err_contains='(not_found)')
    r = box(['get', 'beta'], url=c.url, key=OTHER_KEY)
    check(t, r, 1, 'another project\'s sandbox is not found: exit 1', err_contains='(not_found)')


def test_lifecycle(t):
    check(t, c('create', '--name', 'life'), 0, 'create life')
    r = c('pause', 'life')
    check(t, r, 0, 'pause', out='life\n')
    t.eq(api_get('/v1/sandboxes/life')[2].get('state'), 'paused', 'paused')
    r = c('pause', 'life')
    check(t, r, 0, 'pause again is a no-op')
    r = c('wake', 'life', '--json')
    check(t, r, 0, 'wake --json')
    try:
        t.eq(json.loads(r.out).get('state'), 'running', 'wake --json prints the running Sandbox')
    except ValueError:
        t.ok(False, 'wake --json prints JSON', r.out)
    r = c('stop', 'life')
    check(t, r, 0, 'stop', out='life\n')
    t.eq(api_get('/v1/sandboxes/life')[2].get('state'), 'stopped', 'stopped')
    r = c('pause', 'life')
    check(t, r, 1, 'pause of a stopped sandbox: exit 1', err_contains='(conflict)')
    r = c('wake', 'life')
    check(t, r, 0, 'wake of a stopped sandbox')

    check(t, c('create', '--name', 'life2'), 0, 'create life2')
    r = c('pause', 'life', 'ghost', 'life2')
    check(t, r, 1, 'pause of three, one unknown: exit 1', err_contains='(not_found)')
    t.eq(r.out, 'life\nlife2\n', 'the others were paused (their names printed)')
    t.eq([api_get('/v1/sandboxes/%s' % n)[2].get('state') for n in ('life', 'life2')],
         ['paused', 'paused'], 'both paused')

    r = c('delete', PROTECTED[0] if PROTECTED else 'x')
    check(t, r, 1, 'delete of a protected sandbox: exit 1', err_contains='(conflict)')
    r = c('delete', 'life', 'life2')
    check(t, r, 0, 'delete two', out='life\nlife2\n')
    t.eq([api_get('/v1/sandboxes/%s' % n)[0] for n in ('life', 'life2')], [404, 404], 'both are gone')
    r = c('delete', 'life')
    check(t, r, 1, 'delete again: exit 1', err_contains='(not_found)')
    r = c('exec', 'alpha', '--', 'true')
    check(t, r, 125, 'exec where the API refuses (the dummy runs no VM): exit 125',
          err_contains='(unsupported)')
    r = c('exec', 'ghost', '--', 'true')
    check(t, r, 125, 'exec in an unknown sandbox: exit 125', err_contains='(not_found)')
    r = c('exec', '-i', 'ghost', '--', 'cat')
    check(t, r, 125, 'exec -i: a refused WebSocket upgrade is the API\'s error (exit 125)',
          err_contains='(not_found)')
    r = c('attach', 'alpha', 's-abcdefghij')
    check(t, r, 125, 'attach where the API refuses: exit 125')
    r = c('sessions', 'ghost')
    check(t, r, 1, 'sessions of an unknown sandbox: exit 1', err_contains='(not_found)')
    r = c('ports', 'ghost')
    check(t, r, 1, 'ports of an unknown sandbox: exit 1', err_contains='(not_found)')
    r = c('cp', 'ghost:/etc/hostname', os.path.join(tempfile.gettempdir(), 'box-cli-never'))
    check(t, r, 1, 'cp from an unknown sandbox: exit 1', err_contains='(not_found)')
    t.ok(not os.path.exists(os.path.join(tempfile.gettempdir(), 'box-cli-never')),
         'a failed cp writes nothing locally')


def read_lines(p, n, timeout):
    """Up to @n lines of @p's stdout within @timeout seconds."""
    import select
    out = []
    end = time.time() + timeout
    buf = b''
    while len(out) < n and time.time() < end:
        ready, _w, _x = select.select([p.stdout], [], [], max(0.0, end - time.time()))
        if not ready:
            break
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b'\n' in buf and len(out) < n:
            line, buf = buf.split(b'\n', 1)
            out.append(line.decode('utf-8', 'replace'))
    return out


def test_events(t):
    import subprocess
    raw = c.popen(['events', '--json'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    text = c.popen(['events'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    one = c.popen(['events', '--sandbox', 'alpha', '--json'], stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)
        check(t, c('create', '--name', 'evt'), 0, 'create evt')
        check(t, c('pause', 'evt'), 0, 'pause evt')
        check(t, c('pause', 'alpha'), 0, 'pause alpha')
        check(t, c('delete', 'evt'), 0, 'delete evt')
        lines = read_lines(raw, 5, 10)
        events = []
        for ln in lines:
            try:
                events.append(json.loads(ln))
            except ValueError:
                events.append({'unparsed': ln})
        t.eq([(e.get('type'), (e.get('detail') or {}).get('reason')) for e in events],
             [('sandbox.created', None), ('sandbox.running', None), ('sandbox.paused', 'request'),
              ('sandbox.paused', 'request'), ('sandbox.deleted', 'request')],
             'events --json: one JSON object a line, in order', )
        t.ok(all(set(e) >= {'type', 'sandbox', 'at'} for e in events), 'each has type, sandbox, at',
             lines)
        tl = read_lines(text, 5, 10)
        t.ok(len(tl) == 5, 'events (text): one line per event', tl)
        t.ok(len(tl) == 5 and 'sandbox.created' in tl[0] and 'evt (sb-' in tl[0],
             'a text line has the type and the sandbox\'s name and ID', tl)
        t.ok(len(tl) == 5 and 'reason=request' in tl[2] and boxtest.is_utc_ts(tl[2].split()[0]),
             'a text line starts with the time and shows the detail as key=value', tl)
        t.ok(len(tl) == 5 and 'evt (sb-' in tl[4], 'a deleted sandbox keeps its name in the lines', tl)
        ol = read_lines(one, 1, 10)
        t.ok(len(ol) == 1 and json.loads(ol[0]).get('type') == 'sandbox.paused'
             and json.loads(ol[0]).get('sandbox') == api_get('/v1/sandboxes/alpha')[2]['id'],
             'events --sandbox alpha: only alpha\'s', ol)
        t.eq(read_lines(one, 1, 1), [], '... and nothing of the others')
    finally:
        for p in (raw, text, one):
            p.terminate()
            p.wait(10)
            p.stdout.close()
            p.stderr.close()
    r = box(['events'], url=c.url, key='box_' + 'd' * 32)
    check(t, r, 3, 'events with a refused key: exit 3', err_contains='(unauthorized)')
    r = c('events', '--sandbox', 'ghost', timeout=10)
    check(t, r, 1, 'events of an unknown sandbox: exit 1', err_contains='(not_found)')

    # --no-reconnect: the stream ends when boxd goes, exit 3 (events are best effort)
    p = c.popen(['events', '--no-reconnect'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # and by default box follows across boxd's restart: a client stopped
    # (SIGSTOP) over the restart finds the stream ended, tries while nothing
    # listens, is stopped again until boxd is back and changes were made,
    # then connects again and reports in "(state)" lines what changed
    # unseen, then the events that come after
    follow = c.popen(['events'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    follow_json = c.popen(['events', '--json'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    alpha_id = api_get('/v1/sandboxes/alpha')[2]['id']
    check(t, c('wake', 'alpha'), 0, 'wake alpha (paused above)')
    time.sleep(0.8)
    read_lines(follow, 1, 5)   # the wake: running (from paused)
    read_lines(follow_json, 1, 5)
    follow.send_signal(signal.SIGSTOP)
    follow_json.send_signal(signal.SIGSTOP)
    d.stop('boxd stops on SIGTERM while box events follows')
    rc, err = wait_exit(p, 15)
    t.ok(rc == 3, 'box events --no-reconnect exits 3 when the API ends the stream',
         'exit %r stderr %r' % (rc, err))
    # a while with nothing listening (refused tries), stopped again before boxd is back
    for f in (follow, follow_json):
        f.send_signal(signal.SIGCONT)
    time.sleep(1.5)
    for f in (follow, follow_json):
        f.send_signal(signal.SIGSTOP)
    t.ok(follow.poll() is None and follow_json.poll() is None,
         'box events keeps trying while the API cannot be reached')
    d.start(same_port=True)
    try:
        check(t, c('pause', 'alpha'), 0, 'pause alpha while the followers are stopped')
        check(t, c('create', '--name', 'unseen'), 0, 'create unseen while they are stopped')
        unseen_id = api_get('/v1/sandboxes/unseen')[2]['id']
        follow.send_signal(signal.SIGCONT)
        follow_json.send_signal(signal.SIGCONT)
        lines = sorted(read_lines(follow, 2, 20), key=lambda ln: ln.split()[2:3])
        t.ok(len(lines) == 2 and lines[0].split()[1:] == ['(state)', 'alpha', '(%s)' % alpha_id, 'state=paused']
             and boxtest.is_utc_ts(lines[0].split()[0]),
             'after the reconnection: a (state) line for alpha, paused unseen', lines)
        t.ok(len(lines) == 2 and lines[1].split()[1:] == ['(state)', 'unseen', '(%s)' % unseen_id, 'state=running'],
             '... and one for the sandbox created unseen', lines)
        check(t, c('delete', 'unseen'), 0, 'delete unseen after the reconnection')
        after = read_lines(follow, 1, 10)
        t.ok(len(after) == 1 and 'sandbox.deleted' in after[0] and 'unseen (%s)' % unseen_id in after[0],
             'the events after the reconnection follow', after)
        jl = read_lines(follow_json, 1, 10)
        t.ok(len(jl) == 1 and json.loads(jl[0]).get('type') == 'sandbox.deleted',
             'with --json: no state lines, the events after the reconnection', jl)
    finally:
        for f in (follow, follow_json):
            f.send_signal(signal.SIGCONT)
            f.terminate()
            f.wait(10)
    err = follow.stderr.read().decode('utf-8', 'replace')
    t.ok('The API ended the event stream; connecting again' in err
         and 'following the events again' in err,
         'box events says on stderr that it connects again, and when it follows again', err)
    for f in (follow, follow_json):
        f.stdout.close()
        f.stderr.close()

    # a reconnection that gets an answer that is not worth a retry ends it
    gone = c.popen(['events', '--sandbox', 'alpha'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.8)
    gone.send_signal(signal.SIGSTOP)
    d.stop('boxd stops again')
    d.start(same_port=True)
    check(t, c('delete', 'alpha'), 0, 'delete alpha while its follower is stopped')
    gone.send_signal(signal.SIGCONT)
    rc, err = wait_exit(gone, 15)
    t.ok(rc == 1 and '(not_found)' in err,
         'box events --sandbox alpha ends with not_found (exit 1) when alpha is gone at the reconnection',
         'exit %r stderr %r' % (rc, err))


def test_checkpoints(t):
    check(t, c('create', '--name', 'cpx'), 0, 'create cpx')
    r = c('checkpoint', 'cpx', '--comment', 'before')
    check(t, r, 0, 'checkpoint prints the ID', out='v1\n')
    r = c('checkpoint', 'cpx', '--disk-only', '--json')
    check(t, r, 0, 'checkpoint --disk-only --json')
    try:
        cp = json.loads(r.out)
        t.eq((cp.get('id'), cp.get('memory'), cp.get('auto')), ('v2', False, False),
             '--json prints the Checkpoint, disk only')
    except ValueError:
        t.ok(False, 'checkpoint --json prints JSON', r.out)
    r = c('checkpoints', 'cpx')
    check(t, r, 0, 'checkpoints')
    lines = r.out.splitlines()
    t.eq(lines[0].split(), ['ID', 'MEMORY', 'AUTO', 'CREATED', 'COMMENT'], 'the table\'s header')
    t.eq([ln.split()[:3] for ln in lines[1:]], [['v1', 'yes', 'no'], ['v2', 'no', 'no']],
         'one row a checkpoint, oldest first')
    t.ok(lines[1].rstrip().endswith('before'), 'the comment is shown', lines[1])
    r = c('restore', 'cpx', 'v1')
    check(t, r, 0, 'restore prints the sandbox', out='cpx\n')
    ids = [x['id'] for x in api_get('/v1/sandboxes/cpx/checkpoints')[2]['checkpoints']]
    t.eq(ids, ['v1', 'v2', 'auto-1'], 'the restore kept auto-1')
    r = c('fork', 'cpx:v1', '--name', 'cpx-f1')
    check(t, r, 0, 'fork SANDBOX:CHECKPOINT', out='cpx-f1\n')
    r = c('fork', 'cpx', '--name', 'cpx-f2', '--json')
    check(t, r, 0, 'fork of the newest checkpoint')
    t.eq(api_get('/v1/sandboxes/cpx-f2')[2].get('state'), 'running', 'the fork runs')
    check(t, c('create', '--name', 'cpy'), 0, 'create cpy (no checkpoint)')
    r = c('fork', 'cpy', '--name', 'cpy-f')
    check(t, r, 0, 'fork of a sandbox without checkpoints takes a fresh one', out='cpy-f\n')
    ids = [x['id'] for x in api_get('/v1/sandboxes/cpy/checkpoints')[2]['checkpoints']]
    t.eq(ids, ['v1'], 'the fresh checkpoint is v1')
    r = c('fork', 'cpy', '--fresh', '--name', 'cpy-g')
    check(t, r, 0, 'fork --fresh')
    ids = [x['id'] for x in api_get('/v1/sandboxes/cpy/checkpoints')[2]['checkpoints']]
    t.eq(ids, ['v1', 'v2'], '--fresh took v2')
    r = c('checkpoint-delete', 'cpx', 'v2', 'v9')
    check(t, r, 1, 'checkpoint-delete of v2 and an unknown v9: exit 1', out='v2\n',
          err_contains='(not_found)')
    r = c('restore', 'cpx', 'v2')
    check(t, r, 1, 'restore of a deleted checkpoint: exit 1', err_contains='(not_found)')
    r = c('fork', 'cpx:', '--name', 'z')
    check(t, r, 2, 'fork with an empty checkpoint: usage, exit 2')
    r = c('checkpoint', 'ghost')
    check(t, r, 1, 'checkpoint of an unknown sandbox: exit 1', err_contains='(not_found)')
    r = c('checkpoints')
    check(t, r, 2, 'checkpoints without a sandbox: usage, exit 2')
    for n in ('cpx', 'cpx-f1', 'cpx-f2', 'cpy', 'cpy-f', 'cpy-g'):
        d.request('DELETE', '/v1/sandboxes/%s' % n, token=KEY)


def test_tasks(t):
    check(t, c('create', '--name', 'tsk'), 0, 'create tsk')
    r = c('task-put', 'tsk', 'build/all 1', '--expire', '120')
    check(t, r, 0, 'task-put a name with a slash and a space')
    t.ok(r.out.startswith('build/all 1 expires at '), 'task-put says when it expires', r.out)
    r = c('task-put', 'tsk', 'long', '--json')
    check(t, r, 0, 'task-put --json')
    try:
        task = json.loads(r.out)
        t.eq(sorted(task), ['expires_at', 'name', 'started_at'], '--json prints the Task')
    except ValueError:
        t.ok(False, 'task-put --json prints JSON', r.out)
    names = [x['name'] for x in api_get('/v1/sandboxes/tsk/tasks')[2]['tasks']]
    t.eq(sorted(names), ['build/all 1', 'long'], 'the API lists both, the name decoded')
    r = c('tasks', 'tsk')
    check(t, r, 0, 'tasks')
    lines = r.out.splitlines()
    t.eq(lines[0].split(), ['NAME', 'STARTED', 'EXPIRES', 'IN'], 'the table\'s header')
    t.eq(len(lines), 3, 'one row a task')
    t.ok(any(ln.startswith('build/all 1') and '1 minute' in ln for ln in lines[1:]),
         'the 120 s task expires in about 2 minutes', r.out)
    r = c('task-put', 'tsk', 'x', '--expire', '3601')
    check(t, r, 1, 'task-put --expire 3601: the API refuses it', err_contains='(invalid)')
    r = c('task-delete', 'tsk', 'build/all 1', 'ghost')
    check(t, r, 1, 'task-delete of a task and an unknown one: exit 1', out='build/all 1\n',
          err_contains='(not_found)')
    names = [x['name'] for x in api_get('/v1/sandboxes/tsk/tasks')[2]['tasks']]
    t.eq(names, ['long'], 'the deleted one is gone')
    r = c('tasks')
    check(t, r, 2, 'tasks without a sandbox: usage, exit 2')
    d.request('DELETE', '/v1/sandboxes/tsk', token=KEY)


boxtest.main(t, test_help_and_usage, test_configuration, test_create, test_list_get, test_lifecycle,
             test_checkpoints, test_tasks, test_events)
