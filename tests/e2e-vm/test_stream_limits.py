#!/usr/bin/env python3
# vm: the per-key limits of open WebSockets and exec sessions (doc/API.md,
# "Quotas and limits", "Per key: open streams") on a real sandbox, with
# boxd configured small (key_max_websockets=3, key_max_sessions=2): the
# stream past a limit is refused with 409 conflict before any upgrade and
# starts nothing, closing one gives its place back, and another key of the
# same project has its own count.  (The event-stream limit, the same
# mechanism, is tested without VMs in tests/e2e/test_limits.py.)

import time

import streamtest
from streamtest import attach_ws, exec_ws, refused, sessions, ws
from filetest import guest
import vmtest
from vmtest import Tap, VmBoxd

MAX_WS = 3
MAX_SESSIONS = 2
SB = 'lim-box'

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t, config={'boxd': {'key_max_websockets': str(MAX_WS),
                               'key_max_sessions': str(MAX_SESSIONS)}})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('limits'))
SECOND = vmtest.setup_or_bail(d, lambda: d.make_key('limits', name='second')['secret'])
with clock('create'):
    vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': SB}))

EXEC = '/v1/sandboxes/%s/exec' % SB
WATCH = '/v1/sandboxes/%s/fs/watch?path=/tmp' % SB
SESSIONS_FULL = 'too many open exec sessions: a key may have at most %d at once' % MAX_SESSIONS
WEBSOCKETS_FULL = 'too many open WebSockets: a key may have at most %d at once' % MAX_WS


def session_ids():
    _r, by_id = sessions(d, KEY, SB)
    return sorted(by_id)


def retry_open(fn, seconds=10):
    """A stream whose place was just given back: boxd sees the close
    within a moment; (socket or None, last refusal)."""
    end = time.time() + seconds
    last = None
    while time.time() < end:
        try:
            return fn(), None
        except streamtest.wsclient.HTTPRefused as e:
            last = (e.status, e.json)
            time.sleep(0.2)
    return None, last


def test_limits(t):
    # a detachable session left unattached, to attach to below
    w = exec_ws(d, KEY, SB, ['sleep', '600'], detachable=True)
    sid = w.recv_json(60).get('session')
    w.close()
    t.ok(bool(sid), 'a detachable session to attach to', sid)

    # two sessions: a new one and an attach
    first, last = retry_open(lambda: exec_ws(d, KEY, SB, ['sleep', '600']))
    t.ok(first is not None, 'first exec session opens', last)
    t.eq(first.recv_json(60).get('type'), 'started', 'it started')
    attached = attach_ws(d, KEY, SB, sid)
    before = session_ids()

    # the third: refused as plain HTTP, for both ways of opening one
    t.error(refused(d, KEY, EXEC, cmd=['touch', '/tmp/refused']), 409, 'conflict',
            'a third exec session of the key is 409', message_contains=SESSIONS_FULL)
    t.error(refused(d, KEY, '%s/sessions/%s' % (EXEC, sid)), 409, 'conflict',
            'so is a third attach', message_contains=SESSIONS_FULL)
    t.eq(session_ids(), before, 'the refusals started no session')
    r = guest(d, SECOND, SB, 'test -e /tmp/refused && echo yes || echo no')
    t.eq(r.out, 'no\n', 'the refused command did not run')

    # another key of the project counts on its own
    other = exec_ws(d, SECOND, SB, ['echo', 'other'])
    frames = streamtest.Frames(other, timeout=60)
    t.eq((frames.exit_code(), frames.out()), (0, b'other\n'),
         'another key runs an exec session meanwhile')

    # WebSockets: the two sessions and one watch make three; a fourth is refused
    watch = ws(d, KEY, WATCH)
    t.error(refused(d, KEY, WATCH), 409, 'conflict',
            'a fourth WebSocket of the key (a watch) is 409', message_contains=WEBSOCKETS_FULL)
    second_watch = ws(d, SECOND, WATCH)
    t.ok(second_watch is not None, 'another key opens a watch meanwhile')
    second_watch.close()

    # closing one gives its place back: a session, then a WebSocket
    first.close()
    again, last = retry_open(lambda: exec_ws(d, KEY, SB, ['echo', 'again']))
    t.ok(again is not None, 'once one session closed, a new one opens', last)
    if again is not None:
        frames = streamtest.Frames(again, timeout=60)
        t.eq((frames.exit_code(), frames.out()), (0, b'again\n'), 'and runs')
    watch.close()
    attached.close()
    w2, last = retry_open(lambda: ws(d, KEY, WATCH))
    t.ok(w2 is not None, 'once the watch and the attach closed, a watch opens again', last)
    if w2 is not None:
        w2.close()


vmtest.main(t, clock, test_limits)
