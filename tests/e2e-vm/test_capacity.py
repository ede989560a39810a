#!/usr/bin/env python3
# vm: "what a node has room for".  boxd runs with
#   [plugin.libvirt] max_memory_mib=3000 max_cpus=4
# A create that does not fit is refused with 503 capacity and Retry-After
# and leaves nothing behind (no record, no VM, no tap; an event
# sandbox.deleted reason capacity); once room is made, the same create works.
#
# The libvirt plugin counts the memory QEMUs really hold (a fork shares the
# template's pages until it writes them, which is how a 24 GiB host holds
# 100 idle 2 GiB sandboxes), so the first sandbox is made to use 1400 MiB
# before the second 2048 MiB create is tried.

import time

import vmtest
from vmtest import VmBoxd, Tap, run, sh, state, wait_event, reason_of

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t, config={'plugin.libvirt': {'max_memory_mib': '3000', 'max_cpus': '4'}})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
FILL_MIB = 1400


def snapshot():
    """What a refused create must not change."""
    r = d.request('GET', '/v1/sandboxes', token=KEY)
    return {'sandboxes': sorted(x['id'] for x in (r[2] or {}).get('sandboxes', [])),
            'vm records': sorted(d.vm_records()),
            'net records': sorted(k for k in d.net_records() if k.startswith('sb-'))}


def refused(t, body, desc, ev):
    before = snapshot()
    doms = set(vmtest.all_domains())
    r = d.request('POST', '/v1/sandboxes', body, token=KEY, timeout=120)
    t.error(r, 503, 'capacity', desc)
    ra = r[1].get('retry-after', '')
    t.ok(ra.isdigit() and int(ra) > 0, '%s: Retry-After in seconds (%r)' % (desc, ra))
    t.eq(snapshot(), before, '%s: nothing left behind (list, VM and network records)' % desc)
    new = [x for x in set(vmtest.all_domains()) - doms if x not in d.pool_domains()]
    t.eq(new, [], '%s: no new sandbox domain' % desc)
    e = ev.wait_for(lambda x: x.get('event') == 'sandbox.deleted', 5)
    t.eq(reason_of(e), 'capacity', '%s: event sandbox.deleted reason capacity' % desc)
    if body.get('name'):
        t.error(d.request('GET', '/v1/sandboxes/%s' % body['name'], token=KEY), 404, 'not_found',
                '%s: the name is not taken' % desc)


def test_capacity(t):
    ev = d.events(KEY)
    t.ok(ev.wait_connected(5) and ev.status == 200, 'event stream open')
    refused(t, {'name': 'too-big', 'resources': {'memory_mib': 4096}}, 'create of 4096 MiB on a 3000 MiB node', ev)
    refused(t, {'name': 'too-many-cpus', 'resources': {'cpus': 6}}, 'create of 6 CPUs on a 4 CPU node', ev)

    with clock('create first (2048 MiB)'):
        first = d.create_sandbox(KEY, {'name': 'first', 'resources': {'memory_mib': 2048}})
    t.eq(first.get('state'), 'running', 'first sandbox (2 CPUs, 2048 MiB) created')
    r = d.request('POST', '/v1/sandboxes', {'name': 'idle-second', 'resources': {'memory_mib': 2048}},
                  token=KEY, timeout=120)
    t.comment('a second 2048 MiB create while the first uses little memory: %d %s'
              % (r[0], r[3][:200].decode('utf-8', 'replace')))
    if r[0] == 201:
        t.status(d.request('DELETE', '/v1/sandboxes/idle-second', token=KEY), 204, 'delete it again')
        ev.wait_for(lambda x: x.get('event') == 'sandbox.deleted', 5)

    refused(t, {'name': 'cpus', 'resources': {'cpus': 3}}, 'create of 3 CPUs while 2 of 4 run', ev)

    with clock('fill %d MiB in the first sandbox' % FILL_MIB):
        r = sh(d, KEY, 'first', 'setsid python3 -c "import time; b = b\'x\' * (%d << 20); '
                                'open(\'/tmp/filled\', \'w\').close(); time.sleep(3600)" '
                                '</dev/null >/dev/null 2>&1 & '
                                'while [ ! -e /tmp/filled ]; do sleep 0.2; done; echo filled' % FILL_MIB,
               timeout_s=300, timeout=320)
    t.eq((r.status, r.out), (200, 'filled\n'), 'the first sandbox holds %d MiB' % FILL_MIB)
    rss = d.qemu_rss_mib(first['id'])
    t.comment('first sandbox\'s QEMU: %s MiB private resident' % rss)

    refused(t, {'name': 'second', 'resources': {'memory_mib': 2048}},
            'second 2048 MiB create while the first holds %d MiB' % FILL_MIB, ev)
    t.eq(state(d, KEY, 'first'), 'running', 'the first sandbox still runs')
    r = run(d, KEY, 'first', ['test', '-e', '/tmp/filled'])
    t.eq((r.status, r.exit_code), (200, 0), 'and still works')

    t.status(d.request('DELETE', '/v1/sandboxes/first', token=KEY), 204, 'delete the first sandbox')
    with clock('create second after the delete'):
        r = d.request('POST', '/v1/sandboxes', {'name': 'second', 'resources': {'memory_mib': 2048}},
                      token=KEY, timeout=120)
    t.status(r, 201, 'the same create once the first is gone')
    t.eq((r[2] or {}).get('state'), 'running', 'second sandbox running')
    r = run(d, KEY, 'second', ['true'])
    t.eq((r.status, r.exit_code), (200, 0), 'it runs commands')
    ev.close()
    t.status(d.request('DELETE', '/v1/sandboxes/second', token=KEY), 204, 'delete the second sandbox')
    d.stop()


if __name__ == '__main__':
    vmtest.main(t, clock, test_capacity)
