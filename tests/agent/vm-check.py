#!/usr/bin/env python3
"""Boot the base image with raw QEMU (as images/smoke.py does) and check the
agent's interactive operations in PID-1 mode, inside a real guest: sessions,
files as the box user, tar, ports and port-connect, the in-sandbox socket
from a guest process (curl --unix-socket), presuspend hooks, detach-all.

Usage: vm-check.py IMAGE_DIR [--accel tcg|kvm]   (IMAGE_DIR from images/build-base.sh)
Prints PASS/FAIL per check; exits non-zero on any failure.
"""
import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "images"))
import boxagent as ba  # noqa: E402
import smoke  # noqa: E402  (qemu_cmd)

failures = []


def check(name, cond, detail=""):
    print("%s %s%s" % ("PASS" if cond else "FAIL", name, (" (" + str(detail) + ")") if detail else ""), flush=True)
    if not cond:
        failures.append(name)


def write(a, path, data, **kw):
    chan, r = a.open("fs-write", path=path, **kw)
    a.send_data(chan, data, [ba.WINDOW])
    a.send(ba.EOF, 0, chan)
    return a.collect(chan)["events"][-1]


def run(a, argv, user="root", **kw):
    return a.exec_run(argv, user=user, **kw)


def checks(a):
    st = a.request("fs-stat", path="/run/box/api.sock")["stat"]
    check("api socket 0666", st["type"] == "other" and st["mode"] == "0666", st)
    check("api socket dir 0755", a.request("fs-stat", path="/run/box")["stat"]["mode"] == "0755")

    # sessions as box: detach, re-attach with an offset
    chan, r = a.open("exec", argv=["sh", "-c", "id -u; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo done"],
                     session="s-vmcheck001", detachable=True)
    res = a.collect(chan, until=lambda res: b"\n" in res["data"][1])
    check("session runs as box", res["data"][1] == b"1000\n", res["data"][1])
    a.send(ba.CLOSE, 0, chan)
    a.collect(chan)
    s = [x for x in a.request("sessions")["sessions"] if x["id"] == "s-vmcheck001"][0]
    check("detached session keeps running", not s["exited"] and not s["attached"], s)
    run(a, ["touch", "/tmp/go"])
    chan, r = a.open("attach", session="s-vmcheck001", offset=2)
    res = a.collect(chan)
    check("re-attach replays from the offset", r["offset"] == 2 and res["data"][1] == b"00\ndone\n", res["data"][1])

    # files as box
    ev = write(a, "/home/box/note.txt", b"hi from the host\n", user="box")
    check("fs-write as box", ev.get("event") == "done" and ev["stat"]["size"] == 17, ev)
    r = run(a, ["stat", "-c", "%U %a", "/home/box/note.txt"])
    check("written file belongs to box, 0644", r["stdout"] == b"box 644\n", r["stdout"])
    try:
        a.open("fs-write", path="/root/nope", user="box")
        check("fs-write to /root as box refused", False)
    except ba.AgentError as e:
        check("fs-write to /root as box refused", e.code == "permission_denied", e.code)
    chan, r = a.open("fs-tar-get", path="/etc/apt")
    res = a.collect(chan)
    names = tarfile.open(fileobj=io.BytesIO(res["data"][1])).getnames()
    check("tar-get of /etc/apt", 1 in res["eof"] and "sources.list.d/" in [n + "/" for n in names] or
          any(n.startswith("apt.conf.d") for n in names), names[:5])
    chan, r = a.open("fs-tar-put", path="/home/box/t/u", user="box")
    a.send_data(chan, res["data"][1], [ba.WINDOW])
    a.send(ba.EOF, 0, chan)
    ev = a.collect(chan)["events"][-1]
    check("tar-put as box", ev.get("event") == "done", ev)
    r = run(a, ["sh", "-c", "diff -r /etc/apt /home/box/t/u && stat -c %U /home/box/t/u"])
    check("tar round trip in the guest", r["code"] == 0 and r["stdout"] == b"box\n", r["stdout"] + r["stderr"])

    # ports: a server started by a session, then connect to it
    chan, r = a.open("exec", argv=["python3", "-m", "http.server", "8123", "--bind", "127.0.0.1"],
                     session="s-vmhttp0001", cwd="/home/box")
    port = None
    for _ in range(100):
        ports = a.request("ports")["ports"]
        port = [p for p in ports if p["port"] == 8123]
        if port:
            break
        time.sleep(0.1)
    check("ports lists the session's listener", port and port[0]["address"] == "127.0.0.1" and
          port[0].get("session") == "s-vmhttp0001", port)
    pc, r = a.open("port-connect", port=8123)
    a.send(ba.DATA, 0, pc, b"GET /note.txt HTTP/1.0\r\n\r\n")
    a.send(ba.EOF, 0, pc)  # half-close: the channel ends once both sides did
    res = a.collect(pc)
    check("port-connect HTTP round trip", res["data"][1].startswith(b"HTTP/1.0 200") and
          res["data"][1].endswith(b"hi from the host\n"), res["data"][1][:40])
    a.request("session-signal", session="s-vmhttp0001", signal="INT")
    try:
        a.open("port-connect", port=8124)
        check("port_closed", False)
    except ba.AgentError as e:
        check("port_closed", e.code == "port_closed", e.code)

    # the in-sandbox socket from a guest process, as box
    chan, r = a.open("exec", argv=["curl", "-s", "--unix-socket", "/run/box/api.sock", "http://ignored/self"],
                     session="s-vmcurl0001")
    ev = a.event("accept")
    check("accept event", ev["chan"] >= 1 << 31 and ev["peer_uid"] == 1000, ev)
    req = a.collect(ev["chan"], until=lambda res: b"\r\n\r\n" in res["data"][1])
    check("request reaches the host", req["data"][1].startswith(b"GET /self HTTP/1.1\r\n"), req["data"][1][:30])
    body = b'{"name":"vmcheck"}'
    a.send(ba.DATA, 0, ev["chan"], b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    a.send(ba.EOF, 0, ev["chan"])
    res = a.collect(chan)
    check("curl gets the host's answer", res["data"][1] == body, res["data"][1])
    a.collect(ev["chan"])

    # presuspend hooks
    write(a, "/var/lib/box/hooks/presuspend.d/10-mark", b"#!/bin/sh\ntouch /tmp/hooked\n", mode="0755")
    write(a, "/var/lib/box/hooks/presuspend.d/20-slow", b"#!/bin/sh\nsleep 10\n", mode="0755")
    t = time.monotonic()
    r = a.request("presuspend", timeout_ms=1500)
    took = time.monotonic() - t
    check("presuspend", (r["ran"], r["failed"], r["timed_out"]) == (2, 0, 1) and took < 5, "%s %.1f s" % (r, took))
    check("hook ran as root", run(a, ["stat", "-c", "%U", "/tmp/hooked"])["stdout"] == b"root\n")

    # watch, then detach-all before a "checkpoint"
    wc, r = a.open("fs-watch", path="/tmp")
    run(a, ["touch", "/tmp/watched"])
    m = json.loads(a.next_frame(wc)[3])
    check("watch event", m == {"event": "fs", "type": "create", "path": "/tmp/watched"}, m)
    c1, r = a.open("exec", argv=["sleep", "60"], session="s-vmdetach01", detachable=True)
    c2, r = a.open("exec", argv=["sleep", "60"], session="s-vmhangup01")
    r = a.request("detach-all")
    check("detach-all", r["closed"] == 3 and r["hung_up"] == 1, r)
    time.sleep(0.5)
    ss = {x["id"]: x for x in a.request("sessions")["sessions"]}
    check("detachable survives detach-all", not ss["s-vmdetach01"]["exited"])
    check("non-detachable ends with SIGHUP", ss["s-vmhangup01"]["exited"] and ss["s-vmhangup01"]["exit_code"] == 129,
          ss["s-vmhangup01"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("image")
    ap.add_argument("--accel", default="tcg")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="box-vmcheck-")
    disk = os.path.join(work, "disk.img")
    sock = os.path.join(work, "agent.sock")
    subprocess.run(["cp", "--sparse=always", os.path.join(args.image, "rootfs.ext4"), disk], check=True)
    log = open(os.path.join(work, "console.log"), "wb")
    vm = subprocess.Popen(smoke.qemu_cmd(args.image, disk, sock, args.accel), stdin=subprocess.DEVNULL,
                          stdout=log, stderr=subprocess.STDOUT)
    try:
        a = ba.connect_unix(sock, timeout=30)
        a.wait_ready(timeout=120)
        a.hello()
        checks(a)
        a.request("poweroff")
        vm.wait(timeout=30)
    except Exception as e:
        check("no exception", False, repr(e))
    finally:
        if vm.poll() is None:
            vm.kill()
            vm.wait()
        log.close()
        if failures:
            with open(os.path.join(work, "console.log"), errors="replace") as f:
                sys.stderr.write(f.read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
