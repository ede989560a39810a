#!/usr/bin/env python3
"""Integration tests of the guest agent's interactive operations, driving
`box-agent --connect` over its protocol (doc/AGENT-PROTOCOL.md).

Usage: agent-test.py BOX_AGENT [unittest args]. Runs as root (the agent
runs as root on the host here); every test works inside a temporary
directory it creates, never on system paths.
"""
import io
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boxagent as ba  # noqa: E402

AGENT = None
NOBODY = pwd.getpwnam("nobody")


def slurp(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


class AgentCase(unittest.TestCase):
    hello_first = True
    extra_args = []

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="box-agent-test-")
        # a cleanup, so that it runs after those of later mounts (LIFO)
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        os.chmod(self.tmp, 0o755)
        self.api = os.path.join(self.tmp, "run", "api.sock")
        self.hooks = os.path.join(self.tmp, "hooks")
        os.mkdir(self.hooks)
        sp = os.path.join(self.tmp, "host.sock")
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(sp)
        ls.listen(1)
        self.log = open(os.path.join(self.tmp, "agent.log"), "wb")
        self.proc = subprocess.Popen([AGENT, "--connect", sp, "--api-socket", self.api, "--hooks-dir", self.hooks] + self.extra_args,
                                     stderr=self.log)
        ls.settimeout(10)
        c, _ = ls.accept()
        ls.close()
        self.a = ba.Agent(c)
        if self.hello_first:
            self.a.hello()

    def tearDown(self):
        try:
            for s in self.a.request("sessions", timeout=5)["sessions"]:
                if not s["exited"]:
                    try:
                        self.a.request("session-signal", session=s["id"], signal="KILL", timeout=5)
                    except ba.AgentError:
                        pass
        except Exception:
            pass
        self.a.sock.close()
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()
        if sys.exc_info()[0] is not None or os.environ.get("AGENT_TEST_LOG"):
            with open(self.log.name, errors="replace") as f:
                sys.stderr.write(f.read())

    # -- helpers --
    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def wait_for(self, cond, timeout=10, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = cond()
            if v:
                return v
            time.sleep(0.02)
        self.fail("timed out waiting for " + what)

    def session(self, sid):
        for s in self.a.request("sessions")["sessions"]:
            if s["id"] == sid:
                return s
        return None

    def assertAgentError(self, code, op, **kw):
        with self.assertRaises(ba.AgentError) as cm:
            self.a.request(op, **kw)
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        return cm.exception

    def write_file(self, path, data, **kw):
        chan, r = self.a.open("fs-write", path=path, **kw)
        credit = [ba.WINDOW]
        self.a.send_data(chan, data, credit)
        self.a.send(ba.EOF, 0, chan)
        res = self.a.collect(chan)
        self.assertTrue(res["closed"])
        return res["events"][-1]

    def read_file(self, path, **kw):
        chan, r = self.a.open("fs-read", path=path, **kw)
        res = self.a.collect(chan)
        self.assertIn(1, res["eof"])
        return r, res["data"][1]


class Sessions(AgentCase):
    def test_stream_and_exit(self):
        chan, r = self.a.open("exec", argv=["sh", "-c", "echo out; echo err >&2; echo out2; exit 3"],
                              user="root", session="s-stream0001")
        self.assertEqual(r["session"], "s-stream0001")
        self.assertGreater(r["pid"], 0)
        res = self.a.collect(chan)
        self.assertEqual(res["data"][1], b"out\nout2\n")
        self.assertEqual(res["data"][2], b"err\n")
        self.assertEqual(res["events"][-1]["event"], "exit")
        self.assertEqual(res["events"][-1]["code"], 3)
        s = self.session("s-stream0001")
        self.assertTrue(s["exited"])
        self.assertEqual(s["exit_code"], 3)
        self.assertFalse(s["attached"])
        self.assertEqual(s["cmd"], ["sh", "-c", "echo out; echo err >&2; echo out2; exit 3"])
        self.assertEqual(s["output_start"], 0)
        self.assertEqual(s["output_end"], 13)
        self.assertLess(abs(s["started_at"] - time.time() * 1000), 60000)

    def test_bad_requests(self):
        self.assertAgentError("invalid", "exec", chan=50, argv=["true"], session="bad")
        self.assertAgentError("invalid", "exec", chan=50, argv=["true"], session="s-UPPERCASE1")
        self.assertAgentError("invalid", "exec", chan=50, argv=["true"], detachable=True)
        self.assertAgentError("invalid", "exec", chan=50, argv=["true"], session="s-aaaaaaaaaa", limit=5)
        self.a.open("exec", argv=["sleep", "5"], user="root", session="s-dupdupdup1")
        self.assertAgentError("invalid", "exec", chan=51, argv=["true"], user="root", session="s-dupdupdup1")
        self.assertAgentError("not_found", "attach", chan=52, session="s-nosuchone1")
        self.assertAgentError("not_found", "session-signal", session="s-nosuchone1", signal="TERM")
        self.assertAgentError("invalid", "session-signal", session="s-dupdupdup1", signal="NOSUCH")
        for bad in ("RTMIN+0", "RTMIN-1", "RTMAX+1", "RTMIN+99", "RTMIN+", "RTMINX", "RTMAX-01"):
            self.assertAgentError("invalid", "session-signal", session="s-dupdupdup1", signal=bad)
        self.assertAgentError("invalid", "attach", chan=53, session="s-dupdupdup1", offset=-1)

    def test_detach_reattach_offsets(self):
        flag = self.path("go")
        chan, r = self.a.open("exec", argv=["sh", "-c", 'printf abcdefghij; while [ ! -e "$1" ]; do sleep 0.02; done; printf KLMNO',
                                            "sh", flag], user="root", session="s-detach0001", detachable=True)
        res = self.a.collect(chan, until=lambda res: len(res["data"][1]) >= 10)
        self.assertEqual(res["data"][1], b"abcdefghij")
        self.a.send(ba.CLOSE, 0, chan)
        self.assertEqual(self.a.collect(chan)["closed"], True)
        s = self.session("s-detach0001")
        self.assertFalse(s["exited"])
        self.assertFalse(s["attached"])
        # re-attach from byte 3
        chan, r = self.a.open("attach", session="s-detach0001", offset=3)
        self.assertEqual(r["offset"], 3)
        self.assertFalse(r["exited"])
        res = self.a.collect(chan, until=lambda res: len(res["data"][1]) >= 7)
        self.assertEqual(res["data"][1], b"defghij")
        self.assertTrue(self.session("s-detach0001")["attached"])
        open(flag, "w").close()
        res = self.a.collect(chan)
        self.assertEqual(res["data"][1], b"KLMNO")
        self.assertEqual(res["events"], [{"event": "exit", "code": 0, "timed_out": False,
                                          "stdout_truncated": False, "stderr_truncated": False}])
        # an exited session: replay then exit at once
        chan, r = self.a.open("attach", session="s-detach0001")
        self.assertEqual(r["offset"], 0)
        self.assertTrue(r["exited"])
        res = self.a.collect(chan, timeout=5)
        self.assertEqual(res["data"][1], b"abcdefghijKLMNO")
        self.assertEqual(res["events"][-1]["event"], "exit")
        # beyond the end: starts at the end
        chan, r = self.a.open("attach", session="s-detach0001", offset=1000)
        self.assertEqual(r["offset"], 15)
        res = self.a.collect(chan, timeout=5)
        self.assertEqual(res["data"][1], b"")
        self.assertTrue(res["closed"])

    def test_detached_never_blocks_and_older_offset(self):
        total = 3 * 1024 * 1024 + 12345
        chan, r = self.a.open("exec", argv=["sh", "-c", "head -c %d /dev/zero | tr '\\0' x; printf END" % total],
                              user="root", session="s-bigoutput1", detachable=True)
        self.a.send(ba.CLOSE, 0, chan)  # detach at once: nobody reads
        self.wait_for(lambda: self.session("s-bigoutput1")["exited"], what="the detached session to exit")
        s = self.session("s-bigoutput1")
        self.assertEqual(s["output_end"], total + 3)
        self.assertEqual(s["output_start"], total + 3 - (1 << 20))
        chan, r = self.a.open("attach", session="s-bigoutput1", offset=5)
        self.assertEqual(r["offset"], total + 3 - (1 << 20))  # older than kept: the oldest kept byte
        res = self.a.collect(chan)
        self.assertEqual(len(res["data"][1]), 1 << 20)
        self.assertTrue(res["data"][1].endswith(b"xxxEND"))

    def test_attached_slow_reader_loses_nothing(self):
        total = 5 * 1024 * 1024
        chan, r = self.a.open("exec", argv=["head", "-c", str(total), "/dev/urandom"], user="root",
                              session="s-slowreader")
        time.sleep(0.5)  # no credit returned meanwhile: the process must wait, not drop
        s = self.session("s-slowreader")
        self.assertFalse(s["exited"])
        self.assertLessEqual(s["output_end"], (1 << 20) + 65536 + ba.WINDOW)
        res = self.a.collect(chan)
        self.assertEqual(len(res["data"][1]), total)
        self.assertEqual(res["events"][-1]["code"], 0)

    def test_sighup_on_close_of_non_detachable(self):
        mark = self.path("hup")
        chan, r = self.a.open("exec", argv=["sh", "-c", 'trap "echo hup > $1; exit 7" HUP; echo ready; while :; do sleep 0.05; done',
                                            "sh", mark], user="root", session="s-hupclose01")
        self.a.collect(chan, until=lambda res: b"ready" in res["data"][1])
        self.a.send(ba.CLOSE, 0, chan)
        self.assertTrue(self.a.collect(chan)["closed"])
        self.wait_for(lambda: os.path.exists(mark) and slurp(mark) == "hup\n", what="SIGHUP")
        self.wait_for(lambda: self.session("s-hupclose01")["exited"], what="exit")
        self.assertEqual(self.session("s-hupclose01")["exit_code"], 7)

    def test_host_reconnect(self):
        hup = self.path("hup")
        c1, r1 = self.a.open("exec", argv=["sh", "-c", "echo one; while :; do sleep 0.05; done"], user="root",
                             session="s-survivor01", detachable=True)
        c2, r2 = self.a.open("exec", argv=["sh", "-c", 'trap "echo hup > $1; exit 1" HUP; echo two; while :; do sleep 0.05; done',
                                           "sh", hup], user="root", session="s-hungup0001")
        self.a.collect(c1, until=lambda res: res["data"][1])
        self.a.collect(c2, until=lambda res: res["data"][1])
        self.a.hello()  # a new host connection: the old channels are gone
        self.wait_for(lambda: os.path.exists(hup), what="SIGHUP of the non-detachable session")
        self.wait_for(lambda: self.session("s-hungup0001")["exited"], what="its exit")
        s = self.session("s-survivor01")
        self.assertFalse(s["exited"])
        self.assertFalse(s["attached"])
        chan, r = self.a.open("attach", session="s-survivor01", chan=c1)  # the old id is free again
        res = self.a.collect(chan, until=lambda res: res["data"][1])
        self.assertEqual(res["data"][1], b"one\n")
        self.a.request("session-signal", session="s-survivor01", signal="TERM")
        res = self.a.collect(chan)
        self.assertEqual(res["events"][-1]["code"], 143)
        self.assertEqual(res["events"][-1]["signal"], 15)
        self.assertAgentError("conflict", "session-signal", session="s-survivor01", signal="TERM")

    def test_real_time_signals(self):
        # kill -l's names for them: RTMIN+n and RTMAX-n
        got = self.path("rt")
        prog = ("import signal, sys, time\n"
                "def h(n, f):\n"
                "    open(sys.argv[1], 'a').write('%d\\n' % n)\n"
                "for s in (signal.SIGRTMIN + 2, signal.SIGRTMAX - 3, signal.SIGRTMIN):\n"
                "    signal.signal(s, h)\n"
                "print('ready', flush=True)\n"
                "while True: time.sleep(0.05)\n")
        chan, r = self.a.open("exec", argv=[sys.executable, "-c", prog, got], user="root",
                              session="s-realtime01", detachable=True)
        self.a.collect(chan, until=lambda res: b"ready" in res["data"][1])
        for name in ("RTMIN+2", "SIGRTMAX-3", "RTMIN"):
            self.a.request("session-signal", session="s-realtime01", signal=name)
            time.sleep(0.2)
        self.wait_for(lambda: os.path.exists(got) and len(slurp(got).split()) == 3, what="three signals")
        self.assertEqual([int(x) for x in slurp(got).split()],
                         [signal.SIGRTMIN + 2, signal.SIGRTMAX - 3, signal.SIGRTMIN])
        self.a.request("session-signal", session="s-realtime01", signal="KILL")

    def test_tty_session(self):
        chan, r = self.a.open("exec", argv=["sh", "-c", "stty size; read x; echo got:$x; stty size"], user="root",
                              session="s-ttytty0001", tty=True, cols=100, rows=30)
        res = self.a.collect(chan, until=lambda res: b"30 100" in res["data"][1])
        self.a.send_json(chan, {"op": "resize", "cols": 120, "rows": 40})
        time.sleep(0.1)
        self.a.send(ba.DATA, 0, chan, b"hello\n")
        res2 = self.a.collect(chan)
        out = res["data"][1] + res2["data"][1]
        self.assertIn(b"got:hello", out)
        self.assertIn(b"40 120", out)
        self.assertEqual(res2["data"][2], b"")
        self.assertTrue(self.session("s-ttytty0001")["tty"])

    def test_two_attachments_and_stdin(self):
        chan, r = self.a.open("exec", argv=["cat"], user="root", session="s-catcat0001", detachable=True)
        c2, r2 = self.a.open("attach", session="s-catcat0001")
        self.a.send(ba.DATA, 0, chan, b"from one\n")
        for c in (chan, c2):
            res = self.a.collect(c, until=lambda res: b"one" in res["data"][1])
            self.assertEqual(res["data"][1], b"from one\n")
        self.a.send(ba.DATA, 0, c2, b"from two\n")
        self.a.send(ba.EOF, 0, c2)
        for c in (chan, c2):
            res = self.a.collect(c)
            self.assertEqual(res["data"][1], b"from two\n")
            self.assertEqual(res["events"][-1]["code"], 0)

    def test_detach_all(self):
        mark = self.path("hup")
        c1, _ = self.a.open("exec", argv=["sh", "-c", "echo d; while :; do sleep 0.05; done"], user="root",
                            session="s-keeprun001", detachable=True)
        c2, _ = self.a.open("exec", argv=["sh", "-c", 'trap "touch $1; exit 1" HUP; echo n; while :; do sleep 0.05; done',
                                          "sh", mark], user="root", session="s-endshup001")
        c3, _ = self.a.exec_start(["sleep", "30"], user="root")
        self.a.collect(c1, until=lambda res: res["data"][1])
        self.a.collect(c2, until=lambda res: res["data"][1])
        r = self.a.request("detach-all")
        self.assertEqual(r["closed"], 3)
        self.assertEqual(r["hung_up"], 2)
        for c in (c1, c2, c3):
            self.assertTrue(self.a.collect(c, timeout=5)["closed"])
        self.wait_for(lambda: os.path.exists(mark), what="SIGHUP")
        self.assertFalse(self.session("s-keeprun001")["exited"])


class SessionRetention(AgentCase):
    extra_args = ["--session-keep-ms", "1500"]

    def test_exited_sessions_expire(self):
        chan, r = self.a.open("exec", argv=["sh", "-c", "echo bye"], user="root", session="s-expiring01")
        self.a.collect(chan)
        t0 = time.monotonic()
        s = self.session("s-expiring01")
        self.assertTrue(s["exited"])
        # still there with its output
        chan, r = self.a.open("attach", session="s-expiring01")
        self.assertEqual(self.a.collect(chan)["data"][1], b"bye\n")
        self.wait_for(lambda: self.session("s-expiring01") is None, what="the session to be forgotten")
        self.assertGreater(time.monotonic() - t0, 1.0)
        self.assertAgentError("not_found", "attach", chan=chan, session="s-expiring01")
        # a running session is never forgotten
        chan, r = self.a.open("exec", argv=["sleep", "3"], user="root", session="s-stillhere1", detachable=True)
        self.a.send(ba.CLOSE, 0, chan)
        time.sleep(2)
        self.assertIsNotNone(self.session("s-stillhere1"))


class Files(AgentCase):
    def test_basic_ops(self):
        d = self.path("d")
        r = self.a.request("fs-mkdir", path=d, mode="0750")
        self.assertEqual(r["stat"]["type"], "dir")
        self.assertEqual(r["stat"]["mode"], "0750")
        self.assertEqual(r["stat"]["path"], d)
        self.assertEqual(r["stat"]["name"], "d")
        self.assertAgentError("already_exists", "fs-mkdir", path=d)
        self.assertEqual(self.a.request("fs-mkdir", path=d, parents=True)["stat"]["mode"], "0750")
        self.assertAgentError("not_found", "fs-mkdir", path=self.path("x", "y"))
        r = self.a.request("fs-mkdir", path=self.path("x", "y", "z") + "//", parents=True, mode=0o700)
        self.assertEqual(r["stat"]["path"], self.path("x", "y", "z"))
        self.assertEqual(r["stat"]["mode"], "0700")
        self.assertAgentError("invalid", "fs-mkdir", path="relative/path")
        self.assertAgentError("invalid", "fs-mkdir", path=d + "2", mode="0999")
        with open(self.path("d", "b.txt"), "w") as f:
            f.write("hello")
        os.symlink("b.txt", self.path("d", "a-link"))
        r = self.a.request("fs-stat", path=self.path("d", "a-link"))
        self.assertEqual(r["stat"]["type"], "symlink")
        self.assertEqual(r["stat"]["target"], "b.txt")
        st = self.a.request("fs-stat", path=self.path("d", "b.txt"))["stat"]
        self.assertEqual((st["type"], st["size"], st["mode"]), ("file", 5, "0644"))
        self.assertRegex(st["mtime"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertNotIn("target", st)
        self.assertEqual(self.a.request("fs-stat", path="/")["stat"]["name"], "/")
        self.assertAgentError("not_found", "fs-stat", path=self.path("nope"))
        entries = self.a.request("fs-list", path=d)["entries"]
        self.assertEqual([e["name"] for e in entries], ["a-link", "b.txt"])
        self.assertEqual(entries[1]["path"], self.path("d", "b.txt"))
        self.assertAgentError("invalid", "fs-list", path=self.path("d", "b.txt"))
        r = self.a.request("fs-rename", **{"from": self.path("d", "b.txt"), "to": self.path("d", "c.txt")})
        self.assertEqual(r["stat"]["name"], "c.txt")
        self.assertAgentError("not_found", "fs-rename", **{"from": self.path("d", "b.txt"), "to": self.path("d", "e")})
        self.assertAgentError("conflict", "fs-delete", path=d)
        self.a.request("fs-delete", path=self.path("d", "a-link"))
        self.assertTrue(os.path.exists(self.path("d", "c.txt")))  # the link, not its target
        self.a.request("fs-delete", path=self.path("x"), recursive=True)
        self.assertFalse(os.path.exists(self.path("x")))
        self.assertAgentError("not_found", "fs-delete", path=self.path("x"))
        self.assertAgentError("unknown_user", "fs-stat", path=d, user="no-such-user-here")

    def test_paths_are_normalised(self):
        # "." and ".." are resolved by name before anything is done, so a
        # base name is never "..": deleting "<dir>/a/.." deletes <dir>, not
        # what lies around it
        tree = self.path("norm", "tree")
        os.makedirs(os.path.join(tree, "a"))
        os.makedirs(self.path("norm", "beside"))
        r = self.a.request("fs-stat", path=tree + "/./a/../a/")
        self.assertEqual(r["stat"]["path"], os.path.join(tree, "a"))
        self.assertEqual(self.a.request("fs-stat", path="/..")["stat"]["path"], "/")
        self.assertEqual(self.a.request("fs-stat", path="/tmp/../..//.")["stat"]["path"], "/")
        self.assertAgentError("invalid", "fs-delete", path="/tmp/..", recursive=True)
        self.assertAgentError("invalid", "fs-delete", path="/.", recursive=True)
        self.a.request("fs-delete", path=os.path.join(tree, "a", ".."), recursive=True)
        self.assertFalse(os.path.exists(tree))
        self.assertTrue(os.path.isdir(self.path("norm", "beside")))
        # rename: a directory onto a file, or onto a non-empty directory
        os.makedirs(self.path("norm", "d1"))
        os.makedirs(self.path("norm", "d2", "x"))
        with open(self.path("norm", "f"), "w") as f:
            f.write("f")
        self.assertAgentError("conflict", "fs-rename", **{"from": self.path("norm", "d1"), "to": self.path("norm", "f")})
        self.assertAgentError("conflict", "fs-rename", **{"from": self.path("norm", "f"), "to": self.path("norm", "d2")})
        self.assertAgentError("conflict", "fs-rename", **{"from": self.path("norm", "d1"), "to": self.path("norm", "d2")})
        self.assertAgentError("not_found", "fs-rename", **{"from": self.path("norm", "f", "x"), "to": self.path("norm", "g")})
        self.assertEqual(slurp(self.path("norm", "f")), "f")

    def mount(self, fstype, *opts, at=None):
        m = at or self.path("mnt-" + fstype)
        os.makedirs(m)
        if subprocess.run(["mount", "-t", fstype, *opts, "boxtest", m], stderr=subprocess.DEVNULL).returncode != 0:
            self.skipTest("cannot mount a %s here" % fstype)
        self.addCleanup(subprocess.run, ["umount", m])
        return m

    def test_rename_across_file_systems(self):
        # as mv(1) does: a copy (modes, times, symlinks) then the original goes
        m = self.mount("tmpfs")
        src = self.path("mv-src")
        os.makedirs(os.path.join(src, "sub"))
        with open(os.path.join(src, "a"), "w") as f:
            f.write("aaa")
        os.chmod(os.path.join(src, "a"), 0o640)
        os.utime(os.path.join(src, "a"), (1000000000, 1000000000))
        with open(os.path.join(src, "sub", "b"), "w") as f:
            f.write("bbb")
        os.chmod(os.path.join(src, "sub"), 0o750)
        os.symlink("a", os.path.join(src, "ln"))
        r = self.a.request("fs-rename", **{"from": src, "to": os.path.join(m, "moved")})
        self.assertEqual(r["stat"]["path"], os.path.join(m, "moved"))
        self.assertFalse(os.path.exists(src))
        moved = os.path.join(m, "moved")
        self.assertEqual(slurp(os.path.join(moved, "a")), "aaa")
        self.assertEqual(stat.S_IMODE(os.lstat(os.path.join(moved, "a")).st_mode), 0o640)
        self.assertEqual(os.lstat(os.path.join(moved, "a")).st_mtime, 1000000000)
        self.assertEqual(stat.S_IMODE(os.lstat(os.path.join(moved, "sub")).st_mode), 0o750)
        self.assertEqual(slurp(os.path.join(moved, "sub", "b")), "bbb")
        self.assertEqual(os.readlink(os.path.join(moved, "ln")), "a")
        self.assertEqual(sorted(os.listdir(m)), ["moved"])
        # a file onto a file: replaced
        f = self.path("mv-file")
        with open(f, "w") as fh:
            fh.write("new")
        self.a.request("fs-rename", **{"from": f, "to": os.path.join(moved, "a")})
        self.assertEqual(slurp(os.path.join(moved, "a")), "new")
        self.assertFalse(os.path.exists(f))
        # a directory onto a file: refused, nothing moved
        os.makedirs(self.path("mv-dir"))
        self.assertAgentError("conflict", "fs-rename", **{"from": self.path("mv-dir"), "to": os.path.join(moved, "a")})
        # what cannot be copied (a FIFO): refused, nothing left half made
        os.mkfifo(self.path("mv-dir", "fifo"))
        self.assertAgentError("invalid", "fs-rename", **{"from": self.path("mv-dir"), "to": os.path.join(m, "d2")})
        self.assertEqual(sorted(os.listdir(m)), ["moved"])
        self.assertEqual(os.listdir(self.path("mv-dir")), ["fifo"])
        # and as a user: the copy is theirs
        pub = self.path("mv-pub")
        os.makedirs(pub)
        os.chmod(pub, 0o777)
        os.chmod(m, 0o777)
        with open(os.path.join(pub, "mine"), "w") as fh:
            fh.write("x")
        os.chmod(os.path.join(pub, "mine"), 0o666)
        self.a.request("fs-rename", user="nobody", **{"from": os.path.join(pub, "mine"), "to": os.path.join(m, "theirs")})
        self.assertEqual(os.lstat(os.path.join(m, "theirs")).st_uid, NOBODY.pw_uid)

    def test_recursive_delete_stops_at_a_mount(self):
        m = self.mount("tmpfs", at=self.path("tree", "mnt"))
        with open(os.path.join(m, "precious"), "w") as f:
            f.write("keep")
        e = self.assertAgentError("conflict", "fs-delete", path=self.path("tree"), recursive=True)
        self.assertIn("mnt", e.message)
        self.assertEqual(slurp(os.path.join(m, "precious")), "keep")

    def test_list_with_channel(self):
        d = self.path("many")
        os.mkdir(d)
        for i in range(9000):
            open(os.path.join(d, "file-with-a-longish-name-%05d" % i), "w").close()
        self.assertAgentError("too_large", "fs-list", path=d)
        chan, r = self.a.open("fs-list", path=d)
        res = self.a.collect(chan)
        lines = res["data"][1].decode().splitlines()
        self.assertEqual(len(lines), 9000)
        self.assertEqual(json.loads(lines[0])["name"], "file-with-a-longish-name-00000")
        self.assertIn(1, res["eof"])

    def test_write_read(self):
        data = os.urandom(3 * 1024 * 1024 + 7)
        p = self.path("sub", "deeper", "f.bin")
        self.assertAgentError("not_found", "fs-write", chan=90, path=p)
        ev = self.write_file(p, data, mkdir=True)
        self.assertEqual(ev["event"], "done")
        self.assertEqual(ev["stat"]["size"], len(data))
        self.assertEqual(ev["stat"]["mode"], "0644")
        with open(p, "rb") as f:
            self.assertEqual(f.read(), data)
        r, got = self.read_file(p)
        self.assertEqual(r["stat"]["size"], len(data))
        self.assertEqual(r["length"], len(data))  # a real file system: the size is the length
        self.assertEqual(got, data)
        # /proc says 0 for a file that holds something: no length, read to its end
        r, got = self.read_file("/proc/self/status")
        self.assertNotIn("length", r)
        self.assertIn(b"Name:", got)
        os.chmod(p, 0o600)
        self.assertEqual(self.write_file(p, b"x")["stat"]["mode"], "0600")  # an existing file keeps its mode
        self.assertEqual(self.write_file(p, b"y", mode="0755")["stat"]["mode"], "0755")
        self.assertEqual(self.write_file(self.path("empty"), b"")["stat"]["size"], 0)
        self.assertAgentError("invalid", "fs-write", chan=91, path=self.path("sub"))
        self.assertAgentError("invalid", "fs-read", chan=92, path=self.path("sub"))
        self.assertAgentError("not_found", "fs-read", chan=93, path=self.path("nope"))
        self.assertEqual(sorted(os.listdir(self.path("sub", "deeper"))), ["f.bin"])  # no temporary files left

    def test_write_atomic_under_concurrent_reader(self):
        p = self.path("atomic")
        contents = [b"a" * (2 << 20), b"b" * (3 << 20) + b"END"]
        self.write_file(p, contents[0])
        stop = threading.Event()
        seen = {"reads": 0, "bad": None}

        def reader():
            while not stop.is_set():
                with open(p, "rb") as f:
                    d = f.read()
                seen["reads"] += 1
                if d not in contents:
                    seen["bad"] = len(d)
                    return
        t = threading.Thread(target=reader)
        t.start()
        try:
            for i in range(12):
                self.write_file(p, contents[(i + 1) % 2])
        finally:
            stop.set()
            t.join()
        self.assertIsNone(seen["bad"], "a reader saw a file of %s bytes" % seen["bad"])
        self.assertGreater(seen["reads"], 5)

    def test_write_abandoned(self):
        p = self.path("keep")
        with open(p, "wb") as f:
            f.write(b"old")
        chan, r = self.a.open("fs-write", path=p)
        self.a.send(ba.DATA, 0, chan, b"new partial")
        self.a.send(ba.CLOSE, 0, chan)
        self.assertTrue(self.a.collect(chan)["closed"])
        time.sleep(0.2)
        self.assertEqual(slurp(p, "rb"), b"old")
        self.wait_for(lambda: os.listdir(self.tmp).count("keep") == 1 and
                      not [n for n in os.listdir(self.tmp) if ".box-" in n], what="the temporary file to go")

    def test_write_on_a_full_file_system(self):
        # the agent writes into the worker's file itself on tmpfs: a failed
        # write reaches the host as the worker's error
        m = self.mount("tmpfs", "-o", "size=256k")
        p = os.path.join(m, "f")
        with open(p, "wb") as f:
            f.write(b"old")
        chan, r = self.a.open("fs-write", path=p)
        credit = [ba.WINDOW]
        try:
            self.a.send_data(chan, os.urandom(1 << 20), credit)
            self.a.send(ba.EOF, 0, chan)
        except EOFError:
            pass  # the agent gave up before all was sent
        res = self.a.collect(chan)
        self.assertTrue(res["closed"])
        self.assertEqual(res["events"][-1]["event"], "error", res["events"])
        self.assertIn("No space left", res["events"][-1]["error"]["message"])
        self.assertEqual(res["events"][-1]["error"]["code"], "conflict")  # the state, not a bug
        self.assertEqual(slurp(p, "rb"), b"old")
        self.assertEqual(os.listdir(m), ["f"])
        # and the file system takes a write that fits
        self.assertEqual(self.write_file(p, b"new")["event"], "done")
        self.assertEqual(slurp(p, "rb"), b"new")

    def test_write_into_memory(self):
        # on tmpfs the agent writes the data itself, elsewhere the worker
        # does (the other tests, unless the test directory is on tmpfs)
        m = self.mount("tmpfs")
        p = os.path.join(m, "f")
        data = os.urandom(3 << 20)
        ev = self.write_file(p, data, mode="0600")
        self.assertEqual(ev["event"], "done")
        self.assertEqual(ev["stat"]["mode"], "0600")
        self.assertEqual(slurp(p, "rb"), data)

    def test_write_data_before_the_reply(self):
        # DATA may follow the request at once: it is held until the file
        # is open, then written in order
        for d in (self.tmp, self.mount("tmpfs")):
            p = os.path.join(d, "early")
            chan = 77
            rid = self.a.next_id
            self.a.next_id += 1
            self.a.send_json(0, {"id": rid, "op": "fs-write", "chan": chan, "path": p})
            for i in range(8):
                self.a.send(ba.DATA, 0, chan, bytes([65 + i]) * 1000)
            self.a.send(ba.EOF, 0, chan)
            res = self.a.collect(chan)
            self.assertEqual(res["events"][-1]["event"], "done", res["events"])
            self.assertEqual(slurp(p, "rb"), b"".join(bytes([65 + i]) * 1000 for i in range(8)))
            self.a.pending = [f for f in self.a.pending if f[2] != 0]

    def test_users(self):
        pub = self.path("pub")
        os.mkdir(pub)
        os.chmod(pub, 0o1777)
        priv = self.path("priv")
        os.mkdir(priv, 0o700)
        secret = self.path("secret")
        with open(secret, "w") as f:
            f.write("s")
        os.chmod(secret, 0o600)
        # as nobody: the kernel says no
        e = self.assertAgentError("permission_denied", "fs-write", chan=70, path=self.path("nobody-file"), user="nobody")
        self.assertIn("Permission denied", e.message)
        self.assertAgentError("permission_denied", "fs-read", chan=71, path=secret, user="nobody")
        self.assertAgentError("permission_denied", "fs-stat", path=os.path.join(priv, "x"), user="nobody")
        self.assertAgentError("permission_denied", "fs-list", path=priv, user="nobody")
        self.assertAgentError("permission_denied", "fs-mkdir", path=os.path.join(priv, "d"), user="nobody")
        self.assertAgentError("permission_denied", "fs-delete", path=secret, user="nobody")
        self.assertAgentError("permission_denied", "fs-tar-put", chan=72, path=os.path.join(priv, "t"), user="nobody")
        self.assertTrue(os.path.exists(secret))
        # allowed: created as nobody
        ev = self.write_file(os.path.join(pub, "n.txt"), b"n", user="nobody")
        self.assertEqual(ev["event"], "done")
        self.assertEqual(os.stat(os.path.join(pub, "n.txt")).st_uid, NOBODY.pw_uid)
        self.a.request("fs-mkdir", path=os.path.join(pub, "nd"), user="nobody")
        self.assertEqual(os.stat(os.path.join(pub, "nd")).st_uid, NOBODY.pw_uid)
        # without user: root, and a root write over a user's file keeps its owner
        self.write_file(os.path.join(pub, "r.txt"), b"r")
        self.assertEqual(os.stat(os.path.join(pub, "r.txt")).st_uid, 0)
        self.write_file(os.path.join(pub, "n.txt"), b"replaced")
        self.assertEqual(os.stat(os.path.join(pub, "n.txt")).st_uid, NOBODY.pw_uid)
        # sticky directory: nobody may not delete root's file
        self.assertAgentError("permission_denied", "fs-delete", path=os.path.join(pub, "r.txt"), user="nobody")

    def make_tree(self, root):
        os.makedirs(os.path.join(root, "a", "b"))
        os.makedirs(os.path.join(root, "empty"))
        with open(os.path.join(root, "a", "b", "f.txt"), "w") as f:
            f.write("deep")
        with open(os.path.join(root, "top.bin"), "wb") as f:
            f.write(os.urandom(100000))
        long_dir = os.path.join(root, "l" * 90, "m" * 90)
        os.makedirs(long_dir)
        with open(os.path.join(long_dir, "n" * 150), "w") as f:
            f.write("long")
        os.symlink("a/b/f.txt", os.path.join(root, "link"))
        os.chmod(os.path.join(root, "a", "b", "f.txt"), 0o640)
        # modes beyond the permissions, and one without write permission
        for name, mode in (("setuid", 0o4755), ("readonly", 0o444)):
            with open(os.path.join(root, name), "w") as f:
                f.write(name)
            os.chmod(os.path.join(root, name), mode)
        os.mkfifo(os.path.join(root, "fifo"))
        # names beyond ASCII (pax headers carry them as UTF-8)
        os.makedirs(os.path.join(root, "caf\u00e9"))
        with open(os.path.join(root, "caf\u00e9", "\u20ac \u65e5\u672c.txt"), "w") as f:
            f.write("utf8")
        # holes, one at the end (tar --sparse writes it as a sparse entry)
        with open(os.path.join(root, "sparse.bin"), "wb") as f:
            f.write(b"head")
            f.seek(3 << 20)
            f.write(b"tail")
            f.truncate(4 << 20)

    def tree(self, root):
        out = {}
        for dp, dns, fns in os.walk(root):
            for n in dns + fns:
                p = os.path.join(dp, n)
                rel = os.path.relpath(p, root)
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    out[rel] = ("link", os.readlink(p))
                elif stat.S_ISDIR(st.st_mode):
                    out[rel] = ("dir", stat.S_IMODE(st.st_mode))
                elif stat.S_ISREG(st.st_mode):
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), slurp(p, "rb"))
        return out

    def tar_get(self, path, **kw):
        chan, r = self.a.open("fs-tar-get", path=path, **kw)
        res = self.a.collect(chan)
        self.assertIn(1, res["eof"])
        return res["data"][1], res["events"][-1]

    def tar_put(self, path, data, **kw):
        chan, r = self.a.open("fs-tar-put", path=path, **kw)
        credit = [ba.WINDOW]
        try:
            self.a.send_data(chan, data, credit)
            self.a.send(ba.EOF, 0, chan)
        except EOFError:
            pass
        res = self.a.collect(chan)
        self.assertTrue(res["closed"])
        return res["events"][-1]

    def test_tar_roundtrip(self):
        src = self.path("src")
        self.make_tree(src)
        data, done = self.tar_get(src)
        self.assertEqual(done["event"], "done")
        self.assertEqual(done["skipped"], 1)  # the FIFO
        names = tarfile.open(fileobj=io.BytesIO(data)).getnames()
        self.assertIn("a/b/f.txt", names)
        self.assertIn("link", names)
        self.assertNotIn("fifo", names)
        self.assertFalse([n for n in names if n.startswith("/") or n.startswith("..")])
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            self.assertEqual(t.extractfile("a/b/f.txt").read(), b"deep")
            self.assertEqual(t.getmember("link").linkname, "a/b/f.txt")
        done = self.tar_put(self.path("dst", "x"), data)
        self.assertEqual(done["event"], "done")
        expect = self.tree(src)
        self.assertEqual(self.tree(self.path("dst", "x")), expect)
        self.assertEqual(expect["setuid"][1], 0o4755)
        # again over what is there: every file replaced, the same tree
        with open(self.path("dst", "x", "readonly"), "w") as f:
            f.write("changed")
        done = self.tar_put(self.path("dst", "x"), data)
        self.assertEqual(done["event"], "done")
        self.assertEqual(self.tree(self.path("dst", "x")), expect)
        # a single file
        data, done = self.tar_get(os.path.join(src, "top.bin"))
        self.assertEqual(tarfile.open(fileobj=io.BytesIO(data)).getnames(), ["top.bin"])
        # an archive made by tar(1) with ./ names, extracted as nobody
        pub = self.path("pub")
        os.mkdir(pub, 0o777)
        os.chmod(pub, 0o777)
        gnu = subprocess.run(["tar", "-C", src, "--sparse", "--exclude=./fifo", "-cf", "-", "."], check=True,
                             stdout=subprocess.PIPE).stdout
        self.assertTrue(tarfile.open(fileobj=io.BytesIO(gnu)).getmember("./sparse.bin").issparse())
        done = self.tar_put(os.path.join(pub, "t"), gnu, user="nobody")
        self.assertEqual(done["event"], "done", done)
        self.assertEqual(self.tree(os.path.join(pub, "t")), expect)
        self.assertEqual(os.lstat(os.path.join(pub, "t", "a", "b", "f.txt")).st_uid, NOBODY.pw_uid)

    def evil_tar(self, members):
        bio = io.BytesIO()
        with tarfile.open(fileobj=bio, mode="w", format=tarfile.PAX_FORMAT) as t:
            for name, typ, arg in members:
                m = tarfile.TarInfo(name)
                m.type = typ
                if typ == tarfile.REGTYPE:
                    m.size = len(arg)
                    t.addfile(m, io.BytesIO(arg))
                else:
                    m.linkname = arg
                    t.addfile(m)
        return bio.getvalue()

    def test_tar_traversal_refused(self):
        outside = self.path("outside")
        os.mkdir(outside)
        with open(os.path.join(outside, "victim"), "w") as f:
            f.write("original")
        dst = self.path("dst")
        cases = [
            ("dotdot", [("ok.txt", tarfile.REGTYPE, b"fine"), ("../outside/evil", tarfile.REGTYPE, b"x")]),
            ("deep-dotdot", [("a/b/../../../outside/evil", tarfile.REGTYPE, b"x")]),
            ("absolute", [(os.path.join(outside, "evil"), tarfile.REGTYPE, b"x")]),
            ("symlink-then-file", [("ln", tarfile.SYMTYPE, outside), ("ln/evil", tarfile.REGTYPE, b"x")]),
            ("relative-symlink-then-file", [("d/", tarfile.DIRTYPE, ""), ("d/ln", tarfile.SYMTYPE, "../../outside"),
                                            ("d/ln/evil", tarfile.REGTYPE, b"x")]),
            ("symlink-then-dir", [("ln2", tarfile.SYMTYPE, outside), ("ln2/sub/", tarfile.DIRTYPE, "")]),
            ("hardlink-outside", [("hl", tarfile.LNKTYPE, "../outside/victim")]),
            ("hardlink-absolute", [("hl2", tarfile.LNKTYPE, os.path.join(outside, "victim"))]),
            ("symlink-then-overwrite", [("victim", tarfile.SYMTYPE, os.path.join(outside, "victim")),
                                        ("victim", tarfile.REGTYPE, b"overwritten")]),
        ]
        for name, members in cases:
            with self.subTest(name):
                data = self.evil_tar(members)
                ev = self.tar_put(dst, data)
                if name == "symlink-then-overwrite":
                    # replacing the link is fine: the file lands inside
                    self.assertEqual(ev["event"], "done")
                    self.assertEqual(slurp(os.path.join(dst, "victim"), "rb"), b"overwritten")
                    self.assertFalse(os.path.islink(os.path.join(dst, "victim")))
                else:
                    self.assertEqual(ev["event"], "error", ev)
                    self.assertEqual(ev["error"]["code"], "invalid", ev)
                self.assertEqual(sorted(os.listdir(outside)), ["victim"])
                self.assertEqual(slurp(os.path.join(outside, "victim")), "original")
                if name != "symlink-then-overwrite":
                    # a refusal changes nothing: dst, made for it, is gone
                    self.assertFalse(os.path.exists(dst))
        self.assertEqual(sorted(os.listdir(dst)), ["victim"])
        # a symlink already in the directory is not followed either
        os.symlink(outside, os.path.join(dst, "preexisting"))
        ev = self.tar_put(dst, self.evil_tar([("preexisting/evil", tarfile.REGTYPE, b"x")]))
        self.assertEqual(ev["error"]["code"], "invalid")
        self.assertEqual(sorted(os.listdir(outside)), ["victim"])
        # garbage and truncated archives
        ev = self.tar_put(dst, b"\x01" * 1024)
        self.assertEqual(ev["error"]["code"], "invalid")
        good = self.evil_tar([("t.txt", tarfile.REGTYPE, b"z" * 5000)])
        ev = self.tar_put(dst, good[:1500])
        self.assertEqual(ev["error"]["code"], "invalid")
        self.assertIn("truncated", ev["error"]["message"].lower())
        self.assertEqual(sorted(os.listdir(dst)), ["preexisting", "victim"])

    def test_tar_refused_changes_nothing(self):
        def snapshot(root):
            out = {}
            for dirpath, dirs, files in os.walk(root):
                for n in dirs + files:
                    p = os.path.join(dirpath, n)
                    st = os.lstat(p)
                    out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, st.st_ino,
                                                     slurp(p, "rb") if stat.S_ISREG(st.st_mode) else
                                                     os.readlink(p) if stat.S_ISLNK(st.st_mode) else None)
            return out
        dst = self.path("keep")
        os.makedirs(os.path.join(dst, "d", "inner"))
        os.chmod(os.path.join(dst, "d"), 0o750)
        with open(os.path.join(dst, "f"), "w") as f:
            f.write("old f")
        with open(os.path.join(dst, "d", "g"), "w") as f:
            f.write("old g")
        os.symlink("f", os.path.join(dst, "ln"))
        before = snapshot(dst)
        evil = ("../escape", tarfile.REGTYPE, b"x")
        cases = [
            # new entries beside, inside and below existing ones, replacements
            # of a file, a symlink and a file by a directory, then a refusal
            ("new and replaced", [("new.txt", tarfile.REGTYPE, b"n"), ("d/", tarfile.DIRTYPE, ""),
                                  ("d/g", tarfile.REGTYPE, b"new g"), ("d/inner/deep/x", tarfile.REGTYPE, b"x"),
                                  ("f", tarfile.REGTYPE, b"new f"), ("ln", tarfile.SYMTYPE, "elsewhere"),
                                  ("nd/", tarfile.DIRTYPE, ""), ("nd/y", tarfile.REGTYPE, b"y"),
                                  ("f", tarfile.REGTYPE, b"twice"), ("hl", tarfile.LNKTYPE, "d/g"), evil]),
            ("a file replaced by a directory", [("f/", tarfile.DIRTYPE, ""), ("f/z", tarfile.REGTYPE, b"z"), evil]),
            ("a directory in the way", [("new2", tarfile.REGTYPE, b"2"), ("d", tarfile.REGTYPE, b"clash")]),
            ("not a tar at all", None),
            ("truncated", [("big", tarfile.REGTYPE, b"b" * 20000)]),
        ]
        for name, members in cases:
            with self.subTest(name):
                data = b"\x02" * 2048 if members is None else self.evil_tar(members)
                if name == "truncated":
                    data = data[:8000]
                ev = self.tar_put(dst, data)
                self.assertEqual(ev["event"], "error", ev)
                self.assertEqual(snapshot(dst), before, "refused (%s): nothing changed" % ev["error"]["message"])
        # the target made for the tar goes too, with the parents made for it
        ev = self.tar_put(self.path("made", "for", "it"), self.evil_tar([("a", tarfile.REGTYPE, b"a"), evil]))
        self.assertEqual(ev["event"], "error")
        self.assertFalse(os.path.exists(self.path("made")))
        ev = self.tar_put(os.path.join(dst, "sub", "new"), b"\x02" * 2048)
        self.assertEqual(ev["event"], "error")
        self.assertEqual(snapshot(dst), before)
        # a full file system midway: all of it undone
        m = self.mount("tmpfs", "-o", "size=256k")
        with open(os.path.join(m, "f"), "w") as f:
            f.write("old")
        ev = self.tar_put(m, self.evil_tar([("f", tarfile.REGTYPE, b"new"), ("a", tarfile.REGTYPE, b"a" * 100000),
                                            ("b", tarfile.REGTYPE, b"b" * 400000)]))
        self.assertEqual(ev["error"]["code"], "conflict", ev)
        self.assertEqual(sorted(os.listdir(m)), ["f"])
        self.assertEqual(slurp(os.path.join(m, "f")), "old")
        # and a good one replaces, leaving no backups behind
        ev = self.tar_put(dst, self.evil_tar([("f", tarfile.REGTYPE, b"new f"), ("ln", tarfile.SYMTYPE, "d")]))
        self.assertEqual(ev["event"], "done", ev)
        self.assertEqual(slurp(os.path.join(dst, "f")), "new f")
        self.assertEqual(os.readlink(os.path.join(dst, "ln")), "d")
        self.assertEqual(sorted(os.listdir(dst)), ["d", "f", "ln"])

    def test_watch(self):
        d = self.path("w")
        os.mkdir(d)
        chan, r = self.a.open("fs-watch", path=d, recursive=True)

        def expect(kind, path):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                t, s, ch, p = self.a.next_frame(chan, 10)
                self.assertEqual(t, ba.CTRL)
                m = json.loads(p)
                if m == {"event": "fs", "type": kind, "path": path}:
                    return
            self.fail("no %s event for %s" % (kind, path))
        f = os.path.join(d, "f")
        with open(f, "w") as fh:
            expect("create", f)
            fh.write("x")
            fh.flush()
            expect("write", f)
        os.chmod(f, 0o600)
        expect("chmod", f)
        os.rename(f, os.path.join(d, "g"))
        expect("rename", f)
        expect("create", os.path.join(d, "g"))
        os.unlink(os.path.join(d, "g"))
        expect("remove", os.path.join(d, "g"))
        sub = os.path.join(d, "sub")
        os.mkdir(sub)
        expect("create", sub)
        time.sleep(0.1)
        open(os.path.join(sub, "inner"), "w").close()
        expect("create", os.path.join(sub, "inner"))
        # a tree that is there before its directory's watch: made elsewhere
        # and moved in (as mkdir -p and tar x race the watch), each entry
        # gets a create, and the tree is watched from then on
        elsewhere = self.path("elsewhere")
        os.makedirs(os.path.join(elsewhere, "x", "y"))
        open(os.path.join(elsewhere, "x", "y", "z"), "w").close()
        os.rename(elsewhere, os.path.join(d, "moved"))
        for p in ("moved", "moved/x", "moved/x/y", "moved/x/y/z"):
            expect("create", os.path.join(d, p))
        open(os.path.join(d, "moved", "x", "y", "later"), "w").close()
        expect("create", os.path.join(d, "moved", "x", "y", "later"))
        shutil.rmtree(d)
        expect("remove", d)
        res = self.a.collect(chan, timeout=10)
        self.assertTrue(res["closed"])
        self.assertAgentError("not_found", "fs-watch", chan=chan, path=d)


class Ports(AgentCase):
    def test_ports_listing(self):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        port = ls.getsockname()[1]
        ports = self.a.request("ports")["ports"]
        mine = [p for p in ports if p["port"] == port]
        self.assertEqual(mine, [{"port": port, "address": "127.0.0.1", "pid": os.getpid()}])
        self.assertEqual(ports, sorted(ports, key=lambda p: (p["port"], p["address"])))
        # a listener started by a session names it (a child of the session's shell)
        chan, r = self.a.open("exec", argv=["python3", "-c", "import socket,sys,time\n"
                                            "s=socket.socket(socket.AF_INET6);s.bind(('::1',0));s.listen(1)\n"
                                            "print(s.getsockname()[1],flush=True);time.sleep(30)"],
                              user="root", session="s-listener01")
        res = self.a.collect(chan, until=lambda res: b"\n" in res["data"][1])
        sport = int(res["data"][1])
        entry = [p for p in self.a.request("ports")["ports"] if p["port"] == sport]
        self.assertEqual(entry, [{"port": sport, "address": "::1", "pid": r["pid"], "session": "s-listener01"}])
        ls.close()

    def test_connect_echo(self):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        port = ls.getsockname()[1]

        def echo():
            c, _ = ls.accept()
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
            c.shutdown(socket.SHUT_WR)
            c.close()
        t = threading.Thread(target=echo)
        t.start()
        chan, r = self.a.open("port-connect", port=port)
        self.assertEqual(r["chan"], chan)
        data = os.urandom(2 * 1024 * 1024)
        got = {"res": None}

        def rx():
            got["res"] = self.a.collect(chan)
        # send and receive at once (the echo fills both windows)
        credit = [ba.WINDOW]
        off = 0
        received = b""
        eof_sent = False
        while True:
            while off < len(data) and credit[0] > 0:
                n = min(32768, credit[0], len(data) - off)
                self.a.send(ba.DATA, 0, chan, data[off:off + n])
                off += n
                credit[0] -= n
            if off == len(data) and not eof_sent:
                self.a.send(ba.EOF, 0, chan)
                eof_sent = True
            ty, s, ch, p = self.a.next_frame(chan)
            if ty == ba.DATA:
                self.assertEqual(s, 1)
                received += p
                self.a.send(ba.CREDIT, 0, chan, struct.pack("<I", len(p)))
            elif ty == ba.CREDIT:
                credit[0] += struct.unpack("<I", p)[0]
            elif ty == ba.EOF:
                self.assertEqual(s, 1)
            elif ty == ba.CLOSE:
                break
        t.join()
        self.assertEqual(received, data)
        ls.close()
        # nothing listens there now
        self.assertAgentError("port_closed", "port-connect", chan=chan, port=port)
        self.assertAgentError("invalid", "port-connect", chan=chan, port=70000)


class ApiSocket(AgentCase):
    def test_accept_and_round_trip(self):
        st = os.stat(self.api)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o666)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(self.api)).st_mode), 0o755)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(self.api)
        ev = self.a.event("accept")
        chan = ev["chan"]
        self.assertGreaterEqual(chan, 1 << 31)
        self.assertEqual(ev["peer_pid"], os.getpid())
        self.assertEqual(ev["peer_uid"], 0)
        c.sendall(b"GET /self HTTP/1.1\r\nHost: box\r\n\r\n")
        res = self.a.collect(chan, until=lambda res: b"\r\n\r\n" in res["data"][1])
        self.assertEqual(res["data"][1], b"GET /self HTTP/1.1\r\nHost: box\r\n\r\n")
        body = b'{"name":"me"}'
        self.a.send(ba.DATA, 0, chan, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        self.a.send(ba.EOF, 0, chan)
        got = b""
        c.settimeout(10)
        while True:
            d = c.recv(4096)
            if not d:
                break
            got += d
        self.assertTrue(got.endswith(body))
        c.close()
        res = self.a.collect(chan)
        self.assertIn(1, res["eof"])
        self.assertTrue(res["closed"])
        # a second connection gets another channel
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(self.api)
        self.assertNotEqual(self.a.event("accept")["chan"], chan)
        c.close()


class ApiSocketBeforeHello(AgentCase):
    hello_first = False

    def test_waits_for_the_host(self):
        self.wait_for(lambda: os.path.exists(self.api), what="the socket")
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(self.api)  # completes: the connection waits in the backlog
        c.sendall(b"early")
        time.sleep(0.3)
        self.a.hello()
        ev = self.a.event("accept")
        res = self.a.collect(ev["chan"], until=lambda res: res["data"][1])
        self.assertEqual(res["data"][1], b"early")
        c.close()


class Hooks(AgentCase):
    def hook(self, name, body, mode=0o755):
        p = os.path.join(self.hooks, name)
        with open(p, "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(p, mode)

    def test_presuspend(self):
        self.hook("10-ok", "echo ok > %s" % self.path("ran-10"))
        self.hook("20-fail", "exit 1")
        self.hook("30-sleep", "echo $$ > %s; exec sleep 30" % self.path("pid-30"))
        self.hook("40-late", "touch %s" % self.path("ran-40"))
        self.hook("05-not-executable", "touch %s" % self.path("ran-05"), mode=0o644)
        self.hook(".hidden", "touch %s" % self.path("ran-hidden"))
        t0 = time.monotonic()
        rid = self.a.next_id
        self.a.send_json(0, {"id": rid, "op": "presuspend", "timeout_ms": 1000})
        self.a.next_id += 1
        # the agent keeps serving while the hooks run
        p0 = time.monotonic()
        self.a.request("ping")
        self.assertLess(time.monotonic() - p0, 0.5)
        while True:
            ty, s, ch, p = self.a.next_frame(0, 10)
            m = json.loads(p)
            if m.get("id") == rid:
                break
        took = time.monotonic() - t0
        self.assertTrue(m["ok"], m)
        self.assertEqual((m["ran"], m["failed"], m["timed_out"], m["skipped"]), (3, 1, 1, 1))
        self.assertGreater(took, 0.9)
        self.assertLess(took, 3)
        self.assertTrue(os.path.exists(self.path("ran-10")))
        for n in ("ran-40", "ran-05", "ran-hidden"):
            self.assertFalse(os.path.exists(self.path(n)), n)
        pid = int(slurp(self.path("pid-30")))
        self.wait_for(lambda: not os.path.exists("/proc/%d" % pid) or
                      slurp("/proc/%d/stat" % pid).split()[2] == "Z", what="the hook to be killed")
        # defaults: nothing there, and a bad timeout
        shutil.rmtree(self.hooks)
        self.assertEqual(self.a.request("presuspend")["ran"], 0)
        self.assertAgentError("invalid", "presuspend", timeout_ms=0)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: agent-test.py BOX_AGENT [unittest args]")
    AGENT = os.path.abspath(sys.argv.pop(1))
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (the agent switches users)")
        sys.exit(0)
    unittest.main(verbosity=2)
