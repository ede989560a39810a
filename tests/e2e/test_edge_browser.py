#!/usr/bin/env python3
# e2e: the edge in a real browser (issue 15 item 7).  Headless Chromium
# (Debian's chromium) trusts boxd's CA the way a person's browser would: the
# CA is added to a throw-away NSS database ($HOME/.pki/nssdb, HOME a temp
# directory) with certutil; no certificate errors are ignored.  boxd runs
# with --sandbox-domain box.localhost (Chromium resolves *.localhost to
# loopback, no DNS set-up) on the dummy hypervisor whose agent is the real
# guest agent on this host, so the sandbox's port is a server on 127.0.0.1
# here: a page, and a WebSocket echo.
#
# Driven over the DevTools protocol (a small client on tests/e2e/wsclient.py):
# the private port URL with ?box_token= answers 302 to the URL without it,
# the cookie is set (HttpOnly, Secure, SameSite=Lax), the page arrives and
# its server never saw the key, a load without the token works (the
# cookie), and a WebSocket opened by the page echoes.  Then, as the check
# that these steps can fail: with the cookies cleared the same load is 401
# and the page's WebSocket does not open.

import base64
import hashlib
import http.server
import json
import os
import shutil
import socketserver
import struct
import subprocess
import threading
import time
import urllib.request

import boxtest
import wsclient
from boxtest import Tap
from test_edge import start_edge_boxd

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
CERTUTIL = shutil.which('certutil')
DOMAIN = 'box.localhost'
TITLE = 'box browser test'


class Page(http.server.BaseHTTPRequestHandler):
    """The server "in the sandbox": a page that shows what it received, and
    a WebSocket echo (RFC 6455, unmasked frames back) on any upgrade."""
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.headers.get('Upgrade', '').lower() == 'websocket':
            self.echo()
            return
        seen = {'path': self.path, 'cookie': self.headers.get('Cookie', ''),
                'authorization': self.headers.get('Authorization', '')}
        body = ('<!DOCTYPE html><html><head><title>%s</title></head><body>'
                '<pre id="seen">%s</pre></body></html>' % (
                    TITLE, json.dumps(seen).replace('&', '&amp;').replace('<', '&lt;'))).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/html; charset=utf-8')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def echo(self):
        accept = base64.b64encode(hashlib.sha1(
            (self.headers['Sec-WebSocket-Key'] + wsclient.GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header('Upgrade', 'websocket')
        self.send_header('Connection', 'Upgrade')
        self.send_header('Sec-WebSocket-Accept', accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        rfile = self.rfile
        while True:
            head = rfile.read(2)
            if len(head) < 2:
                return
            op, n = head[0] & 0x0f, head[1] & 0x7f
            if n == 126:
                n = struct.unpack('!H', rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack('!Q', rfile.read(8))[0]
            mask = rfile.read(4) if head[1] & 0x80 else b'\0\0\0\0'
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(rfile.read(n)))
            if op == 0x8:
                self.wfile.write(b'\x88\x00')
                return
            if op in (0x1, 0x2):
                reply = ('echo:' + data.decode()).encode() if op == 0x1 else data
                size = (struct.pack('!B', len(reply)) if len(reply) < 126
                        else struct.pack('!BH', 126, len(reply)))
                self.wfile.write(bytes([0x80 | op]) + size + reply)
                self.wfile.flush()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Cdp:
    """A DevTools protocol session on one page target."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.events = []

    def _recv(self, deadline):
        op, data = self.ws.recv(timeout=max(0.1, deadline - time.time()))
        if op != wsclient.OP_TEXT:
            raise wsclient.ConnectionClosed('DevTools ended')
        return json.loads(data)

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        self.ws.send_json({'id': self.next_id, 'method': method, 'params': params or {}})
        deadline = time.time() + timeout
        while True:
            msg = self._recv(deadline)
            if msg.get('id') == self.next_id:
                if 'error' in msg:
                    raise RuntimeError('%s: %s' % (method, msg['error']))
                return msg.get('result', {})
            self.events.append(msg)

    def wait_event(self, name, timeout=30):
        deadline = time.time() + timeout
        while True:
            for i, msg in enumerate(self.events):
                if msg.get('method') == name:
                    del self.events[i]
                    return msg.get('params', {})
            self.events.append(self._recv(deadline))

    def navigate(self, url):
        """Loads @url; returns the document's responses (redirects first) as
        (status, url) and the final location."""
        self.events = []
        self.call('Page.navigate', {'url': url})
        self.wait_event('Page.loadEventFired')
        chain = []
        for msg in self.events:
            p = msg.get('params', {})
            if msg.get('method') == 'Network.requestWillBeSent' and p.get('type') == 'Document' \
                    and p.get('redirectResponse'):
                chain.append((p['redirectResponse']['status'], p['redirectResponse']['url']))
            if msg.get('method') == 'Network.responseReceived' and p.get('type') == 'Document':
                chain.append((p['response']['status'], p['response']['url']))
        return chain, self.eval('location.href')

    def eval(self, expression, timeout=30):
        result = self.call('Runtime.evaluate', {'expression': expression, 'awaitPromise': True,
                                                'returnByValue': True}, timeout=timeout)
        if 'exceptionDetails' in result:
            raise RuntimeError('evaluate: %s' % result['exceptionDetails'])
        return result['result'].get('value')


WS_SCRIPT = '''new Promise(resolve => {
  const ws = new WebSocket('wss://' + location.host + '/ws');
  const timer = setTimeout(() => resolve('timeout'), 10000);
  ws.onopen = () => ws.send('hello from the page');
  ws.onmessage = e => { clearTimeout(timer); ws.close(); resolve('message:' + e.data); };
  ws.onerror = () => { clearTimeout(timer); resolve('error'); };
})'''


def start_chromium(tmp, cafile):
    home = os.path.join(tmp, 'home')
    nssdb = os.path.join(home, '.pki', 'nssdb')
    os.makedirs(nssdb)
    subprocess.run([CERTUTIL, '-d', 'sql:' + nssdb, '-N', '--empty-password'], check=True)
    subprocess.run([CERTUTIL, '-d', 'sql:' + nssdb, '-A', '-t', 'C,,', '-n', 'boxd CA',
                    '-i', cafile], check=True)
    profile = os.path.join(tmp, 'profile')
    env = dict(os.environ, HOME=home)
    env.pop('http_proxy', None)
    env.pop('https_proxy', None)
    log = open(os.path.join(tmp, 'chromium.log'), 'w')
    args = [CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
            '--no-default-browser-check', '--disable-extensions', '--disable-sync',
            '--disable-background-networking', '--disable-component-update',
            '--password-store=basic', '--use-mock-keychain',
            '--user-data-dir=' + profile, '--remote-debugging-port=0', 'about:blank']
    proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    port_file = os.path.join(profile, 'DevToolsActivePort')
    deadline = time.time() + 30
    port = None
    while time.time() < deadline and proc.poll() is None:
        try:
            with open(port_file) as f:
                port = int(f.readline().strip())
            break
        except (OSError, ValueError):
            time.sleep(0.1)
    if port is None:
        proc.kill()
        raise RuntimeError('chromium did not start (see %s)' % log.name)
    with urllib.request.urlopen('http://127.0.0.1:%d/json/list' % port, timeout=10) as r:
        targets = json.load(r)
    page = [x for x in targets if x.get('type') == 'page'][0]
    path = page['webSocketDebuggerUrl'].split('/', 3)[3]
    ws = wsclient.connect('127.0.0.1', port, '/' + path, timeout=30)
    return proc, Cdp(ws)


def test_browser(t):
    if CHROMIUM is None or CERTUTIL is None:
        t.skip('the edge in a browser', 'needs chromium and certutil (dev/deps.sh)')
        return
    started = start_edge_boxd(t, 'the edge in a browser', ['--sandbox-domain', DOMAIN])
    if started is None:
        return
    d, edge_port, tmp = started
    key = d.project_with_key('acme')
    web_port = boxtest.free_port()
    d.create_sandbox(key, {'name': 'web'})
    srv = Server(('127.0.0.1', web_port), Page)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    origin = 'https://%d--web--acme.%s:%d' % (web_port, DOMAIN, edge_port)
    cafile = os.path.join(d.data_dir, 'tls', 'ca.pem')

    proc, cdp = start_chromium(tmp, cafile)
    try:
        cdp.call('Page.enable')
        cdp.call('Network.enable')
        # A load right after Chromium starts can end on its error page
        # before any request reaches the edge (seen once in CI, in the
        # sanitizer build's parallel run: most likely the profile's NSS
        # database with boxd's CA not read yet).  Load a page of the edge
        # until one arrives (any answer: this one is 401), then the flows.
        deadline = time.time() + 20
        tries = 0
        while time.time() < deadline:
            tries += 1
            chain, _href = cdp.navigate('%s/warm-up' % origin)
            if chain:
                break
            time.sleep(0.2)
        t.comment('the edge answered the browser after %d load(s): %s' % (tries, chain))

        with t.section('the token flow'):
            chain, href = cdp.navigate('%s/start?a=1&box_token=%s&b=2' % (origin, key))
            t.eq(chain, [(302, '%s/start?a=1&box_token=%s&b=2' % (origin, key)),
                         (200, '%s/start?a=1&b=2' % origin)],
                 '?box_token= answers 302 to the URL without it, then the page (200)')
            t.eq(href, '%s/start?a=1&b=2' % origin, 'the browser is at the URL without the key')
            t.eq(cdp.eval('document.title'), TITLE, 'the page arrived (its certificate trusted)')
            seen = json.loads(cdp.eval('document.getElementById("seen").textContent'))
            t.eq(seen.get('path'), '/start?a=1&b=2', 'the server got the path without the key')
            t.ok(key not in json.dumps(seen), 'the key never reached the server', seen)
            cookies = [c for c in cdp.call('Network.getCookies', {'urls': [origin + '/']})['cookies']
                       if c['name'] == 'box_token']
            t.eq([(c['value'], c['httpOnly'], c['secure'], c.get('sameSite'), c['path'],
                   c['domain']) for c in cookies],
                 [(key, True, True, 'Lax', '/', '%d--web--acme.%s' % (web_port, DOMAIN))],
                 'the box_token cookie: HttpOnly, Secure, SameSite=Lax, Path=/, this host only')

        with t.section('the cookie'):
            chain, href = cdp.navigate(origin + '/again')
            t.eq(chain, [(200, origin + '/again')], 'a load without the token: 200 (the cookie)')
            t.eq(cdp.eval('document.title'), TITLE, '... the page')
            seen = json.loads(cdp.eval('document.getElementById("seen").textContent'))
            t.ok(key not in json.dumps(seen) and 'box_token' not in seen.get('cookie', ''),
                 'the cookie was stripped before the server', seen)
            t.eq(cdp.eval(WS_SCRIPT), 'message:echo:hello from the page',
                 'a WebSocket opened by the page echoes through the edge')

        with t.section('without the cookie (the check can fail)'):
            cdp.call('Network.clearBrowserCookies')
            chain, href = cdp.navigate(origin + '/again')
            t.eq(chain, [(401, origin + '/again')], 'the cookies cleared: the same load is 401')
            t.ok(cdp.eval(WS_SCRIPT) != 'message:echo:hello from the page',
                 '... and the page\'s WebSocket does not get through')
    finally:
        try:
            cdp.call('Browser.close', timeout=5)
        except Exception:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        srv.shutdown()
    d.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    tap = Tap()
    boxtest.main(tap, test_browser)
