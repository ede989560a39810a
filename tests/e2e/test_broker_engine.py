#!/usr/bin/env python3
# e2e: the real boxd with a secrets broker: the `testbroker` module
# (tests/engine/broker-test-plugin.c, a recording broker and network), found
# by boxd's loader in a plugin directory made of the build tree's plugins
# and it.  Over HTTP: secrets PUT, used at create and PATCH, deleted in use
# (409), no value in boxd's log; over D-Bus: `boxctl broker rotate-ca`
# (RotateBrokerCa) with and without --json, a bad subcommand (exit 2).  A
# default boxd (broker=auto) loads the real `broker` plugin; one with
# broker=none keeps the secret routes but answers a create or PATCH naming
# secrets 501 unsupported, and rotate-ca fails (org.box.Error.Unsupported,
# exit 1).

import json
import os
import shutil
import tempfile

import boxtest
from boxtest import Boxd, Tap
from test_identity import Bus, boxctl, wait_bus_name

MODULE = os.environ.get('BOX_TESTBROKER_MODULE', '')
VALUE = 'e2e-broker-value-Hq2vNc9'
VALUE2 = 'e2e-broker-value-Tk5wLp3'


def plugin_dir(tmp):
    path = os.path.join(tmp, 'plugins')
    os.mkdir(path)
    for entry in os.listdir(boxtest.PLUGIN_DIR):
        if entry.endswith('.so'):
            os.symlink(os.path.join(boxtest.PLUGIN_DIR, entry), os.path.join(path, entry))
    os.symlink(MODULE, os.path.join(path, 'box-plugin-testbroker.so'))
    return path


def start(t, tmp, bus, conf_lines):
    conf = os.path.join(tmp, 'boxd-%d.conf' % len(os.listdir(tmp)))
    with open(conf, 'w') as f:
        f.write('[boxd]\n%s\n' % conf_lines)
    d = Boxd(t, extra_args=['--config', conf, '--session-bus', '--plugin-dir', plugin_dir(tmp)],
             env=bus.env()).start()
    t.ok(wait_bus_name(bus), 'boxd is on the private bus')
    return d


def test_with_broker(t):
    if not os.path.exists(MODULE):
        t.skip('a boxd with the testbroker module', 'BOX_TESTBROKER_MODULE is not built')
        return
    tmp = tempfile.mkdtemp(prefix='box-e2e-broker-')
    bus = Bus()
    d = None
    try:
        d = start(t, tmp, bus, 'broker=testbroker\nnetwork=testbroker')
        key = d.project_with_key('brk')
        r = d.request('PUT', '/v1/secrets/TOKEN', {'value': VALUE, 'hosts': ['api.example.com']},
                      token=key)
        t.status(r, (200, 201), 'PUT a secret')
        r = d.request('POST', '/v1/sandboxes', {'name': 'user', 'secrets': ['TOKEN']}, token=key)
        t.status(r, 201, 'a sandbox using it is created')
        r = d.request('PUT', '/v1/secrets/TOKEN', {'value': VALUE2, 'hosts': ['api.example.com']},
                      token=key)
        t.status(r, 200, 'its value replaced while the sandbox runs')
        r = d.request('POST', '/v1/sandboxes', {'name': 'other'}, token=key)
        t.status(r, 201, 'a sandbox without secrets')
        r = d.request('PATCH', '/v1/sandboxes/other', {'secrets': ['TOKEN']}, token=key)
        t.status(r, 200, 'PATCH it to use the secret')
        t.error(d.request('DELETE', '/v1/secrets/TOKEN', token=key), 409, 'conflict',
                'deleting a secret in use')

        rc, out, err = boxctl(bus, '--json', 'broker', 'rotate-ca')
        t.ok(rc == 0, 'boxctl --json broker rotate-ca', err)
        rot = json.loads(out) if rc == 0 else {}
        t.eq(rot.get('sandboxes'), 2, 'two awake sandboxes use secrets')
        rc, out, err = boxctl(bus, 'broker', 'rotate-ca')
        t.ok(rc == 0 and 'new CA' in out, 'boxctl broker rotate-ca (text)', out + err)
        rc, out, err = boxctl(bus, 'broker', 'rotate')
        t.eq(rc, 2, 'an unknown broker command is a usage error')

        r = d.request('DELETE', '/v1/sandboxes/other', token=key)
        t.status(r, 204, 'delete a sandbox using secrets')
        d.stop()
        log = d.log_text()
        t.ok('the secrets broker has a new CA' in log, 'the rotation is in boxd\'s log')
        t.ok(VALUE not in log and VALUE2 not in log, 'no secret value in boxd\'s log')
        d = None
    finally:
        if d is not None:
            d.stop()
        bus.close()
        shutil.rmtree(tmp, ignore_errors=True)


def test_default_broker(t):
    """A default boxd (broker=auto, a secret key) loads the `broker` plugin."""
    bus = Bus()
    d = None
    try:
        d = Boxd(t, extra_args=['--session-bus'], env=bus.env()).start()
        t.ok(wait_bus_name(bus), 'a default boxd is on the private bus')
        t.ok(os.path.isfile(os.path.join(d.data_dir, 'broker', 'ca.pem')),
             'its broker CA is in the data directory')
        key = d.project_with_key('dflt')
        r = d.request('PUT', '/v1/secrets/TOKEN', {'value': VALUE, 'hosts': ['api.example.com']},
                      token=key)
        t.status(r, (200, 201), 'PUT a secret')
        r = d.request('POST', '/v1/sandboxes', {'name': 'user', 'secrets': ['TOKEN']}, token=key)
        t.status(r, 201, 'a sandbox using it is created')
        rc, out, err = boxctl(bus, 'broker', 'rotate-ca')
        t.ok(rc == 0 and 'new CA' in out, 'boxctl broker rotate-ca works', out + err)
    finally:
        if d is not None:
            d.stop()
        bus.close()


def test_without_broker(t):
    tmp = tempfile.mkdtemp(prefix='box-e2e-broker-')
    bus = Bus()
    d = None
    try:
        conf = os.path.join(tmp, 'boxd.conf')
        with open(conf, 'w') as f:
            f.write('[boxd]\nbroker=none\n')
        d = Boxd(t, extra_args=['--config', conf, '--session-bus'], env=bus.env()).start()
        t.ok(wait_bus_name(bus), 'boxd without a broker is on the private bus')
        key = d.project_with_key('nobrk')
        r = d.request('PUT', '/v1/secrets/TOKEN', {'value': VALUE, 'hosts': ['api.example.com']},
                      token=key)
        t.status(r, (200, 201), 'the secret routes work without a broker')
        t.status(d.request('GET', '/v1/secrets/TOKEN', token=key), 200, 'GET the secret')
        t.error(d.request('POST', '/v1/sandboxes', {'name': 'user', 'secrets': ['TOKEN']},
                          token=key), 501, 'unsupported', 'a create naming secrets',
                message_contains='brokers no secrets')
        t.status(d.request('GET', '/v1/sandboxes/user', token=key), 404, 'and none was created')
        r = d.request('POST', '/v1/sandboxes', {'name': 'plain'}, token=key)
        t.status(r, 201, 'a sandbox without secrets')
        t.error(d.request('PATCH', '/v1/sandboxes/plain', {'secrets': ['TOKEN']}, token=key),
                501, 'unsupported', 'a PATCH naming secrets', message_contains='broker=none')
        r = d.request('GET', '/v1/sandboxes/plain', token=key)
        t.ok(r[0] == 200 and not r[2].get('secrets'), 'its secrets are unchanged', r[3][:300])
        t.status(d.request('DELETE', '/v1/secrets/TOKEN', token=key), 204,
                 'DELETE the secret')
        rc, out, err = boxctl(bus, 'broker', 'rotate-ca')
        t.ok(rc == 1 and 'no secrets broker' in err, 'boxctl broker rotate-ca fails (exit 1)',
             '%d %s' % (rc, err))
        rc, out, err = boxctl(bus, '--json', 'broker', 'rotate-ca')
        t.ok(rc == 1 and '"unsupported"' in out + err, 'the --json error says unsupported',
             out + err)
    finally:
        if d is not None:
            d.stop()
        bus.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    boxtest.main(Tap(), test_with_broker, test_default_broker, test_without_broker)
