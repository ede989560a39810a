#!/usr/bin/env python3
"""Boot the base image with raw QEMU (TCG) and exercise the guest agent.

Usage: smoke.py IMAGE_DIR [--accel tcg|kvm] [--keep]
Prints PASS/FAIL per check and the timings; exits non-zero on any failure.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "agent"))
import boxagent  # noqa: E402

failures = []


def check(name, cond, detail=""):
    print("%s %s%s" % ("PASS" if cond else "FAIL", name, (" (" + detail + ")") if detail else ""), flush=True)
    if not cond:
        failures.append(name)


def qmp(path, *cmds):
    import json as _j
    import socket as _s
    c = _s.socket(_s.AF_UNIX)
    c.connect(path)
    f = c.makefile("rw")
    f.readline()
    out = []
    for cmd in ("qmp_capabilities",) + cmds:
        name, _, arg = cmd.partition(" ")
        msg = {"execute": name}
        if arg:
            msg["arguments"] = _j.loads(arg)
        f.write(_j.dumps(msg) + "\n")
        f.flush()
        while True:
            r = _j.loads(f.readline())
            if "return" in r or "error" in r:
                out.append(r)
                break
    c.close()
    return out


def qemu_cmd(img, disk, sock, accel, mem=1024):
    return ["qemu-system-x86_64", "-accel", accel, "-machine", "q35", "-cpu", "max" if accel == "tcg" else "host",
            "-m", str(mem), "-smp", "2", "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
            "-kernel", os.path.join(img, "vmlinuz"), "-initrd", os.path.join(img, "initrd.img"),
            "-append", "console=ttyS0 panic=-1 quiet box.hostname=smoke",
            "-drive", "file=%s,format=raw,if=virtio,cache=unsafe" % disk,
            "-device", "virtio-serial-pci",
            "-chardev", "socket,id=agent,path=%s,server=on,wait=off" % sock,
            "-device", "virtserialport,chardev=agent,name=org.box.agent.0",
            "-nic", "user,model=virtio-net-pci,mac=52:54:00:12:34:56"]


def timed(fn, n=20):
    ts = []
    for _ in range(n):
        t = time.monotonic()
        fn()
        ts.append((time.monotonic() - t) * 1000)
    ts.sort()
    return statistics.median(ts), ts[int(len(ts) * 0.95) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("image")
    ap.add_argument("--accel", default="tcg")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="box-smoke-")
    disk = os.path.join(work, "disk.img")
    sock = os.path.join(work, "agent.sock")
    subprocess.run(["cp", "--sparse=always", os.path.join(args.image, "rootfs.ext4"), disk], check=True)
    # the runtime grows disks; the agent grows the filesystem at boot
    subprocess.run(["truncate", "-s", "3G", disk], check=True)
    log = open(os.path.join(work, "console.log"), "wb")
    t0 = time.monotonic()
    vm = subprocess.Popen(qemu_cmd(args.image, disk, sock, args.accel) +
                          ["-qmp", "unix:%s,server=on,wait=off" % os.path.join(work, "qmp.sock")], stdin=subprocess.DEVNULL,
                          stdout=log, stderr=subprocess.STDOUT)
    try:
        a = boxagent.connect_unix(sock, timeout=30)
        ready = a.wait_ready(timeout=60)
        boot_ms = (time.monotonic() - t0) * 1000
        check("ready event", ready.get("event") == "ready", "boot-to-ready %.0f ms" % boot_ms)
        h = a.hello()
        check("hello", h.get("version") == 1)
        check("ping", a.request("ping")["ok"])

        r = a.exec_run(["true"])
        check("exec true", r["code"] == 0 and not r["timed_out"])
        r = a.exec_run(["id", "-u"], user="box")
        check("id -u as box = 1000", r["stdout"] == b"1000\n", repr(r["stdout"]))
        r = a.exec_run(["id", "-u"], user="root")
        check("id -u as root = 0", r["stdout"] == b"0\n", repr(r["stdout"]))
        r = a.exec_run(["sudo", "-n", "id", "-u"], user="box")
        check("passwordless sudo", r["stdout"] == b"0\n", repr(r["stdout"] + r["stderr"]))
        r = a.exec_run(["pwd"])
        check("cwd defaults to home", r["stdout"] == b"/home/box\n", repr(r["stdout"]))
        r = a.exec_run(["hostname"])
        check("hostname", r["stdout"] == b"smoke\n", repr(r["stdout"]))
        a.request("set-env", env={"SANDBOX_VAR": "sb", "OVER": "sandbox"})
        r = a.exec_run(["sh", "-c", 'echo "$SANDBOX_VAR $OVER $HOME $USER $LOGNAME $SHELL $LANG $DEBIAN_FRONTEND"'],
                       env={"OVER": "call", "HOME": "/nope"})
        check("env layering", r["stdout"] == b"sb call /home/box box box /bin/bash C.UTF-8 noninteractive\n",
              repr(r["stdout"]))
        r = a.exec_run(["cat"], stdin=b"hello\n" * 100000)
        check("stdin then EOF", r["stdout"] == b"hello\n" * 100000, "%d bytes" % len(r["stdout"]))
        r = a.exec_run(["sh", "-c", "echo out; echo err >&2; exit 3"])
        check("exit code and stderr", r["code"] == 3 and r["stdout"] == b"out\n" and r["stderr"] == b"err\n")
        t = time.monotonic()
        r = a.exec_run(["sleep", "30"], timeout=1)
        check("timeout kills", r["timed_out"] and r["code"] == 137,
              "%s after %.2f s" % (r.get("code"), time.monotonic() - t))
        r = a.exec_run(["sh", "-c", "kill -KILL $$"])
        check("signal-killed = 137", r["code"] == 137 and not r["timed_out"], str(r.get("code")))
        try:
            a.exec_run(["true"], user="nosuchuser")
            check("unknown user", False)
        except boxagent.AgentError as e:
            check("unknown user", e.code == "unknown_user", e.code)
        try:
            a.exec_run(["no-such-program"])
            check("missing executable", False)
        except boxagent.AgentError as e:
            check("missing executable", e.code == "executable_not_found", e.code)
        t = time.monotonic()
        r = a.exec_run(["head", "-c", "20000000", "/dev/zero"])
        big_s = time.monotonic() - t
        check("output truncated at 16 MiB", len(r["stdout"]) == 16 << 20 and r["stdout_truncated"] and r["code"] == 0,
              "%d bytes in %.2f s" % (len(r["stdout"]), big_s))
        r = a.exec_run(["df", "-B1", "--output=size", "/"])
        size = int(r["stdout"].split()[-1]) if r["code"] == 0 else 0
        check("rootfs grown to the disk", size > 2.5 * (1 << 30), "%d bytes" % size)
        r = a.exec_run(["grep", "-cE", "^tmpfs (/tmp|/run|/dev/shm) tmpfs ", "/proc/mounts"])
        check("/tmp, /run and /dev/shm are tmpfs", r["stdout"] == b"3\n", repr(r["stdout"]))
        a.request("configure-network", address="10.0.2.15/24", gateway="10.0.2.2", dns=["10.0.2.3"],
                  mac="52:54:00:ab:cd:ef", hostname="smoke")
        r = a.exec_run(["sh", "-c", "ip -4 -o addr show eth0; ip route; ip -o link show eth0; cat /etc/resolv.conf"])
        out = r["stdout"].decode()
        check("configure-network", "10.0.2.15/24" in out and "default via 10.0.2.2" in out
              and "52:54:00:ab:cd:ef" in out and "nameserver 10.0.2.3" in out, out.replace("\n", " | "))
        a.request("set-time", unix_ns=time.time_ns())
        r = a.exec_run(["date", "+%s"])
        check("set-time", abs(int(r["stdout"]) - time.time()) < 5, r["stdout"].decode().strip())
        a.request("reseed-random", data=boxagent.base64.b64encode(os.urandom(64)).decode())
        check("reseed-random", True)

        # streaming variant: a pty, resize, signal to the process group
        chan, pid = a.exec_start(["sh", "-c", "stty size; read x; echo got $x; sleep 30"], tty=True, cols=100, rows=30)
        out = b""
        a.send(boxagent.DATA, 0, chan, b"abc\n")
        while b"got abc" not in out:
            t_, s_, ch, p = a.frame(20)
            if ch == chan and t_ == boxagent.DATA:
                out += p
                a.send(boxagent.CREDIT, 0, chan, boxagent.struct.pack("<I", len(p)))
        a.send_json(chan, {"op": "signal", "signal": "TERM"})
        code = None
        while True:
            t_, s_, ch, p = a.frame(20)
            if ch == chan and t_ == boxagent.CTRL:
                code = boxagent.json.loads(p)["code"]
            if ch == chan and t_ == boxagent.CLOSE:
                break
        check("streaming pty exec", b"30 100" in out and b"got abc" in out and code == 143, repr(out) + " " + str(code))

        # the host goes away and comes back (as after a restore)
        a.sock.close()
        a = boxagent.connect_unix(sock, timeout=10)
        t = time.monotonic()
        a.hello()
        check("reconnect + hello", a.request("ping")["ok"], "%.0f ms" % ((time.monotonic() - t) * 1000))

        a.exec_run(["sh", "-c", "echo before snapshot > /tmp/marker"])
        ping = timed(lambda: a.request("ping"))
        true = timed(lambda: a.exec_run(["true"]))
        static = timed(lambda: a.exec_run(["/usr/lib/box/box-agent", "--version"]))
        print("\nTIMINGS (%s)" % args.accel)
        print("  boot to ready            %7.0f ms" % boot_ms)
        print("  ping round trip     p50 %7.2f ms  p95 %7.2f ms" % ping)
        print("  exec true           p50 %7.2f ms  p95 %7.2f ms" % true)
        print("  exec static binary  p50 %7.2f ms  p95 %7.2f ms" % static)
        print("  16 MiB output            %7.0f ms" % (big_s * 1000))
        # memory snapshot (migration to a file) and restore into a new QEMU
        qs = os.path.join(work, "qmp.sock")
        state = os.path.join(work, "state.bin")
        qmp(qs, "stop", 'migrate {"uri": "exec:cat > %s"}' % state)
        for _ in range(600):
            st = qmp(qs, "query-migrate")[-1]["return"].get("status")
            if st in ("completed", "failed"):
                break
            time.sleep(0.05)
        check("snapshot saved", st == "completed", st)
        vm.kill()
        vm.wait()
        a.sock.close()
        t = time.monotonic()
        vm = subprocess.Popen(qemu_cmd(args.image, disk, sock, args.accel) +
                              ["-qmp", "unix:%s,server=on,wait=off" % qs, "-incoming", "exec:cat %s" % state],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        a = boxagent.connect_unix(sock, timeout=30)
        for _ in range(600):
            try:
                st = qmp(qs, "query-status")[-1]["return"]["status"]
            except OSError:
                st = "starting"
            if st not in ("inmigrate", "starting"):
                break
            time.sleep(0.02)
        if st != "running":
            qmp(qs, "cont")
        a.hello()
        r = a.exec_run(["cat", "/tmp/marker"])
        check("agent carries on after restore", r["stdout"] == b"before snapshot\n", repr(r["stdout"]))
        print("  restore + hello + exec   %7.0f ms (full migration stream)" % ((time.monotonic() - t) * 1000))
        a.request("poweroff")
    finally:
        try:
            vm.wait(timeout=10)
        except subprocess.TimeoutExpired:
            vm.kill()
        log.close()
        if failures:
            print("console log:", os.path.join(work, "console.log"))
        elif not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n%d failure(s)%s" % (len(failures), (": " + ", ".join(failures)) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
