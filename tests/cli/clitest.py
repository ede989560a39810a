# clitest.py: shared code of the `box` command-line client's tests.
#
# Runs $BOX_BUILD_ROOT/tools/box as a user would: with BOX_URL/BOX_KEY (or a
# config file under a private XDG_CONFIG_HOME), capturing stdout, stderr
# and the exit status.  TAP and boxd come from tests/e2e/boxtest.py.

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get('BOX_SOURCE_ROOT') or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'e2e'))
sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'e2e-vm'))

import boxtest  # noqa: E402

BOX = os.environ.get('BOX_CLI') or os.path.join(boxtest.BUILD_ROOT, 'tools', 'box')

# an empty config dir, so that a developer's ~/.config/box never leaks in
EMPTY_CONFIG = tempfile.mkdtemp(prefix='box-cli-cfg-')


class Result:
    def __init__(self, args, rc, out, err, seconds=0.0):
        self.args = args
        self.rc = rc
        self.out = out
        self.err = err
        self.seconds = seconds

    def describe(self):
        return 'box %s\nexit %r\nstdout %r\nstderr %r' % (
            ' '.join(self.args), self.rc, self.out[-1500:], self.err[-1500:])


def env_for(url=None, key=None, config_home=None, extra=None):
    env = dict(os.environ)
    for name in ('BOX_URL', 'BOX_KEY'):
        env.pop(name, None)
    env['XDG_CONFIG_HOME'] = config_home or EMPTY_CONFIG
    env['LC_ALL'] = 'C.UTF-8'
    env['LANGUAGE'] = ''
    if url is not None:
        env['BOX_URL'] = url
    if key is not None:
        env['BOX_KEY'] = key
    env.update(extra or {})
    return env


def box(args, url=None, key=None, config_home=None, stdin=None, timeout=120, extra_env=None,
        binary=False):
    """Runs box; @stdin: bytes/str (or None: /dev/null)."""
    import time
    env = env_for(url, key, config_home, extra_env)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    t = time.time()
    p = subprocess.run([BOX] + list(args), input=data if data is not None else b'',
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout)
    out = p.stdout if binary else p.stdout.decode('utf-8', 'replace')
    return Result(list(args), p.returncode, out, p.stderr.decode('utf-8', 'replace'),
                  time.time() - t)


class Client:
    """box bound to one boxd and key."""

    def __init__(self, d, key):
        self.d = d
        self.key = key

    @property
    def url(self):
        return 'http://127.0.0.1:%d' % self.d.port

    def __call__(self, *args, **kw):
        return box(list(args), url=self.url, key=self.key, **kw)

    def popen(self, args, **kw):
        env = env_for(self.url, self.key, None, kw.pop('extra_env', None))
        return subprocess.Popen([BOX] + list(args), env=env, **kw)


def wait_exit(p, timeout):
    """Waits for a box started with popen (stdout and stderr piped); returns
    (exit status or 'still running' after a kill, its stderr), pipes closed."""
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = 'still running'
    err = p.stderr.read().decode('utf-8', 'replace')
    p.stdout.close()
    p.stderr.close()
    return rc, err


def check(t, r, rc, desc, out=None, err_contains=None):
    """Exit status, and optionally stdout exactly and a piece of stderr."""
    good = r.rc == rc
    if out is not None:
        good = good and r.out == out
    if err_contains is not None:
        good = good and err_contains in r.err
    return t.ok(good, desc, r.describe())
