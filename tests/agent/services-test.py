#!/usr/bin/env python3
"""The guest agent's supervised services (agent/services.c), driving
`box-agent --connect --services-dir DIR` over its protocol: definitions on
disk, start order, the crash rule, stop with a grace period, restarts,
delete, boot start and rotating logs (doc/AGENT-PROTOCOL.md, "Services").

Usage: services-test.py BOX_AGENT [unittest args]. Runs as root (the agent
switches users); everything lives in a temporary directory.
"""
import json
import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boxagent as ba  # noqa: E402
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "agent_test", os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent-test.py"))
at = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(at)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


class ServiceCase(at.AgentCase):
    def put(self, name, **d):
        d.setdefault("user", "root")
        return self.a.request("service-put", name=name, timeout=30, **{"def": d})["service"]

    def slurp_log(self, name):
        try:
            with open(os.path.join(self.log_dir, name + ".log"), "rb") as f:
                return f.read()
        except OSError:
            return b""

    def get(self, name):
        return self.a.request("service-get", name=name)["service"]

    def tearDown(self):
        try:
            for s in self.a.request("service-list", timeout=5)["services"]:
                self.a.request("service-delete", name=s["name"], timeout=10)
        except Exception:
            pass
        super().tearDown()

    def follow_triggered(self, name, body):
        """Service @name prints "first", then runs the shell @body each time
        the test touches the returned trigger file; a follow (tail 5) of it
        that got "first": (trigger, chan, what it got)."""
        trig = os.path.join(self.tmp, "go")
        self.put(name, cmd=["sh", "-c", "echo first; while :; do if [ -e %s ]; then rm %s; %s; fi; "
                            "sleep 0.05; done" % (trig, trig, body)])
        self.wait_for(lambda: self.slurp_log(name) == b"first\n", what="the first line")
        chan, r = self.a.open("service-logs", name=name, tail=5, follow=True)
        res = self.a.collect(chan, timeout=10, until=lambda x: x["data"][1] == b"first\n")
        return trig, chan, res

    def follow_worker(self):
        """The pid of the agent's one forked child that is the agent itself
        (the follow worker; services exec other programs)."""
        exe = os.path.realpath(at.AGENT)
        with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
            for pid in map(int, f.read().split()):
                try:
                    if os.path.realpath("/proc/%d/exe" % pid) == exe:
                        return pid
                except OSError:
                    pass
        return None

    def worker_live(self, pid):
        """The worker handed the follow to the agent: it waits in read() on
        its result socket (fd 3) for the agent to hand it back."""
        nr = 63 if os.uname().machine == "aarch64" else 0
        try:
            with open("/proc/%d/syscall" % pid) as f:
                w = f.read().split()
        except OSError:
            return False
        return len(w) > 1 and w[0] == str(nr) and int(w[1], 16) == 3

    def worker_read_bytes(self, pid):
        with open("/proc/%d/io" % pid) as f:
            return int(next(x for x in f if x.startswith("rchar:")).split()[1])


def make_setup(base):
    # AgentCase.setUp spawns the agent with self.extra_args; the directory
    # is only known once tmp exists, so the agent is started from a tmp
    # made first
    orig = at.AgentCase.setUp

    def setUp(self):
        import tempfile
        pre = tempfile.mkdtemp(prefix="box-svc-test-")
        self.addCleanup(__import__("shutil").rmtree, pre, ignore_errors=True)
        self.svc_dir = os.path.join(pre, "services")
        self.log_dir = os.path.join(pre, "var", "log", "box")  # made by the agent
        os.mkdir(self.svc_dir)
        self.prepare(self.svc_dir)
        self.extra_args = ["--services-dir", self.svc_dir, "--service-logs-dir", self.log_dir,
                           "--service-log-bytes", str(getattr(self, "log_bytes", 65536)),
                           "--service-grace-ms", "1000"]
        orig(self)
    return setUp


class Services(ServiceCase):
    setUp = make_setup(None)

    def prepare(self, d):
        with open(os.path.join(d, "early.json"), "w") as f:
            json.dump({"cmd": ["sleep", "600"], "user": "root"}, f)
        with open(os.path.join(d, "bad name!.json"), "w") as f:
            f.write("{}")
        with open(os.path.join(d, "broken.json"), "w") as f:
            f.write("{\"cmd\": 3}")

    def test_boot_start_and_list(self):
        s = self.wait_for(lambda: self.get("early")["state"] == "running" and self.get("early"),
                          what="the boot service")
        self.assertTrue(alive(s["pid"]))
        self.assertEqual(s["cmd"], ["sleep", "600"])
        self.assertEqual(s["restarts"], 0)
        self.assertGreater(s["started_at"], (time.time() - 60) * 1000)
        names = [x["name"] for x in self.a.request("service-list")["services"]]
        self.assertEqual(names, ["early"])  # the bad ones are ignored

    def test_put_runs_and_writes_definition(self):
        s = self.put("web", cmd=["sh", "-c", "echo out; echo err >&2; echo \"$FOO $BAR $HOME $USER\"; exec sleep 600"],
                     env={"FOO": "own"}, cwd="/", http_port=8080)
        self.assertEqual(s["state"], "running")
        self.assertTrue(alive(s["pid"]))
        self.assertEqual(s["http_port"], 8080)
        self.assertEqual(s["env"], {"FOO": "own"})
        with open(os.path.join(self.svc_dir, "web.json")) as f:
            self.assertEqual(json.load(f)["cmd"][0], "sh")
        self.wait_for(lambda: b"root" in self.slurp_log("web"), what="the log")
        self.assertEqual(self.slurp_log("web"), b"out\nerr\nown  /root root\n")
        # the process group: a new session of its own
        with open("/proc/%d/stat" % s["pid"]) as f:
            self.assertEqual(int(f.read().split()[4]), s["pid"])

    def test_sandbox_env(self):
        self.a.request("set-env", env={"BAR": "sandbox", "FOO": "sandbox"})
        self.put("envy", cmd=["sh", "-c", "echo \"$FOO $BAR\"; exec sleep 600"], env={"FOO": "own"})
        self.wait_for(lambda: self.slurp_log("envy").endswith(b"\n"), what="the log")
        self.assertEqual(self.slurp_log("envy"), b"own sandbox\n")

    def test_hold(self):
        # set-env with hold (the host withholds the sandbox env for a pause
        # or a snapshot): nothing starts, or it would keep the empty env,
        # until a set-env brings the env back
        self.a.request("set-env", env={}, hold=True)
        s = self.put("held", cmd=["sh", "-c", "echo \"[$FOO]\"; exec sleep 600"])
        self.assertEqual(s["state"], "starting")
        time.sleep(1.5)
        self.assertEqual(self.get("held")["state"], "starting")
        self.assertEqual(self.slurp_log("held"), b"")
        self.a.request("set-env", env={"FOO": "back"})
        self.wait_for(lambda: self.get("held")["state"] == "running", what="running once the env is back")
        self.wait_for(lambda: self.slurp_log("held").endswith(b"\n"), what="the log")
        self.assertEqual(self.slurp_log("held"), b"[back]\n")

    def test_bad_definitions(self):
        self.assertAgentError("invalid", "service-put", name="x", **{"def": {"cmd": []}})
        self.assertAgentError("invalid", "service-put", name="x", **{"def": {"cmd": ["a"], "nope": 1}})
        self.assertAgentError("invalid", "service-put", name="-x", **{"def": {"cmd": ["a"]}})
        self.assertAgentError("invalid", "service-put", name="x", **{"def": {"cwd": "/"}})
        self.assertAgentError("not_found", "service-get", name="x")
        self.assertFalse(os.path.exists(os.path.join(self.svc_dir, "x.json")))

    def test_needs_order(self):
        self.a.request("service-stop", name="early")
        web = self.put("web", cmd=["sleep", "600"], needs=["early"])
        self.assertEqual(web["state"], "starting")
        self.assertNotIn("pid", web)
        time.sleep(0.5)
        self.assertEqual(self.get("web")["state"], "starting")
        self.assertEqual(self.a.request("service-start", name="early")["service"]["state"], "running")
        self.wait_for(lambda: self.get("web")["state"] == "running", what="web to follow early")

    def test_stop_start_restart(self):
        s = self.put("t", cmd=["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"])
        pid = s["pid"]
        self.wait_for(lambda: self.slurp_log("t").startswith(b"ready"), what="the trap")
        t0 = time.monotonic()
        st = self.a.request("service-stop", name="t")["service"]
        took = time.monotonic() - t0
        self.assertEqual(st["state"], "stopped")
        self.assertNotIn("pid", st)
        self.assertNotIn("started_at", st)
        self.assertGreater(took, 0.9)  # SIGTERM ignored: SIGKILL after the grace period
        self.assertFalse(alive(pid))
        st = self.a.request("service-start", name="t")["service"]
        self.assertEqual(st["state"], "running")
        st2 = self.a.request("service-restart", name="t")["service"]
        self.assertEqual(st2["state"], "running")
        self.assertNotEqual(st2["pid"], st["pid"])
        self.assertFalse(alive(st["pid"]))
        self.assertEqual(st2["restarts"], 2)

    def test_crash_loop(self):
        t0 = time.monotonic()
        self.put("bad", cmd=["sh", "-c", "echo try; exit 3"])
        s = self.wait_for(lambda: self.get("bad")["state"] == "crashed" and self.get("bad"),
                          timeout=40, what="crashed")
        took = time.monotonic() - t0
        # pauses 1 + 2 + 4 + 8 s between the 5 tries
        self.assertGreater(took, 14.5)
        self.assertLess(took, 25)
        self.assertEqual(s["restarts"], 4)
        self.assertNotIn("pid", s)
        log = self.slurp_log("bad")
        self.assertEqual(log.count(b"try\n"), 5)
        self.assertIn(b"crashed", log)
        time.sleep(1.5)
        self.assertEqual(self.get("bad")["restarts"], 4)  # no more tries
        self.assertEqual(self.a.request("service-start", name="bad")["service"]["restarts"], 5)

    def test_delete(self):
        s = self.put("gone", cmd=["sleep", "600"])
        r = self.a.request("service-delete", name="gone")
        self.assertTrue(r["ok"])
        self.assertFalse(alive(s["pid"]))
        self.assertFalse(os.path.exists(os.path.join(self.svc_dir, "gone.json")))
        self.assertAgentError("not_found", "service-get", name="gone")

    def test_replace_restarts(self):
        s = self.put("r", cmd=["sleep", "600"])
        s2 = self.put("r", cmd=["sleep", "601"])
        self.assertEqual(s2["state"], "running")
        self.assertNotEqual(s2["pid"], s["pid"])
        self.assertFalse(alive(s["pid"]))
        self.assertEqual(s2["cmd"], ["sleep", "601"])

    def test_log_rotation(self):
        # 64 KiB files here (--service-log-bytes): 300 KiB of output
        self.put("loud", cmd=["sh", "-c", "i=0; while [ $i -lt 3000 ]; do printf '%099d\\n' $i; i=$((i+1)); done; exec sleep 600"])
        log = os.path.join(self.log_dir, "loud.log")

        self.wait_for(lambda: self.slurp_log("loud").endswith(b"%099d\n" % 2999), timeout=30,
                      what="the output")
        sizes = [os.path.getsize(log + s) for s in ("", ".1", ".2")]
        self.assertTrue(all(0 < n <= 65536 for n in sizes), sizes)
        self.assertEqual(sizes[1], 65536)
        self.assertEqual(sizes[2], 65536)
        self.assertFalse(os.path.exists(log + ".3"))
        # write order kept across files: .2, .1, then the current one
        data = b""
        for suffix in (".2", ".1", ""):
            with open(log + suffix, "rb") as f:
                data += f.read()
        self.assertTrue(data.endswith(b"".join(b"%099d\n" % i for i in range(2000, 3000))))


    # ---- service-logs (agent/logs.c) ----

    def logs(self, name, **kw):
        chan, r = self.a.open("service-logs", name=name, **kw)
        res = self.a.collect(chan)
        self.assertTrue(res["closed"])
        self.assertIn(1, res["eof"])
        return res["data"][1]

    def assert_tail_and_follow(self, name, want):
        """All of the log, from a tail and from a follow, is @want."""
        self.assertEqual(self.logs(name, tail=10000), want)
        chan, r = self.a.open("service-logs", name=name, tail=10000, follow=True)
        res = self.a.collect(chan, timeout=20, until=lambda x: len(x["data"][1]) >= len(want))
        self.assertFalse(res["closed"])
        self.assertEqual(res["data"][1], want)
        self.a.send(ba.CLOSE, 0, chan)
        self.assertTrue(self.a.collect(chan, timeout=10)["closed"])

    def test_logs_tail_across_rotated_files(self):
        self.put("loud", cmd=["sh", "-c", "i=0; while [ $i -lt 3000 ]; do printf '%099d\\n' $i; i=$((i+1)); done; exec sleep 600"])
        self.wait_for(lambda: self.slurp_log("loud").endswith(b"%099d\n" % 2999), timeout=30,
                      what="the output")
        lines = lambda a, b: b"".join(b"%099d\n" % i for i in range(a, b))  # noqa: E731
        # 1000 lines of 100 bytes span .log.1 and .log (64 KiB files)
        self.assertEqual(self.logs("loud", tail=1000), lines(2000, 3000))
        self.assertEqual(self.logs("loud", tail=1500), lines(1500, 3000))
        self.assertEqual(self.logs("loud"), lines(2900, 3000))  # default 100
        self.assertEqual(self.logs("loud", tail=1), lines(2999, 3000))
        self.assertEqual(self.logs("loud", tail=0), b"")
        # more than the files hold: all of .2, .1 and .log
        data = b""
        for suffix in (".2", ".1", ""):
            with open(os.path.join(self.log_dir, "loud.log" + suffix), "rb") as f:
                data += f.read()
        self.assertEqual(self.logs("loud", tail=10000), data)

    def test_logs_errors_and_long_lines(self):
        self.assertAgentError("not_found", "service-logs", chan=401, name="nope")
        self.assertAgentError("invalid", "service-logs", chan=402, name="../x")
        self.put("w", cmd=["sh", "-c", "printf 'a\\nb'; head -c 40000 /dev/zero | tr '\\0' x; echo; echo end; exec sleep 600"])
        self.wait_for(lambda: self.slurp_log("w").endswith(b"end\n"), what="the output")
        self.assertAgentError("invalid", "service-logs", chan=403, name="w", tail=10001)
        self.assertAgentError("invalid", "service-logs", chan=404, name="w", tail=-1)
        # a line beyond 16 KiB is cut there (its newline kept)
        self.assertEqual(self.logs("w", tail=2), b"b" + b"x" * 16383 + b"\nend\n")
        self.assertEqual(self.logs("w", tail=3), b"a\nb" + b"x" * 16383 + b"\nend\n")

    def test_logs_cut_lines_through_the_buffer(self):
        # the worker gathers its output in 64 KiB (logs.c, emit): long lines
        # around the 16 KiB cut, empty ones and short ones, spanning that
        # buffer, the 64 KiB reads and two log files, come out cut alike
        # from a tail and from a follow
        lens = [16383, 16384, 16385, 40000, 5, 0, 0, 30000, 20000, 1, 16384]
        script = "; ".join("head -c %d /dev/zero | tr '\\0' %s; echo" % (n, "abcdefghijk"[i])
                           for i, n in enumerate(lens))
        self.put("long", cmd=["sh", "-c", script + "; echo end; exec sleep 600"])
        self.wait_for(lambda: self.slurp_log("long").endswith(b"end\n"), timeout=30, what="the output")
        data = b""
        for suffix in (".2", ".1", ""):
            try:
                with open(os.path.join(self.log_dir, "long.log" + suffix), "rb") as f:
                    data += f.read()
            except FileNotFoundError:
                pass
        self.assertEqual(len(data), sum(lens) + len(lens) + 4)  # nothing rotated out
        want = b"".join(b"abcdefghijk"[i:i + 1] * min(n, 16384) + b"\n" for i, n in enumerate(lens)) + b"end\n"
        self.assert_tail_and_follow("long", want)

    def test_logs_short_runs_straight_and_long_lines_cut(self):
        # runs of short lines go from the read buffer to the pipe as they
        # are (logs.c, emit_chunk), long lines through the cut: mixed, and
        # a long line whose start ends a run and whose rest is in the next
        # read (here the next log file), from a tail and from a follow
        def run(a, b):
            return "printf '%%099d\\n' $(seq %d %d)" % (a, b - 1)

        def long(n, c):
            return "head -c %d /dev/zero | tr '\\0' %s; echo" % (n, c)

        # in 64 KiB files: "c" starts 10070 bytes before the end of .log.1
        parts = [(run, 0, 100), (long, 20000, "a"), (run, 100, 300), (long, 20000, "b"),
                 (run, 300, 810), (long, 40000, "c"), (run, 810, 860), (long, 16384, "d"),
                 (run, 860, 910)]
        want = b""
        for f, x, y in parts:
            want += (b"".join(b"%099d\n" % i for i in range(x, y)) if f is run
                     else y.encode() * min(x, 16384) + b"\n")
        want += b"end\n"
        script = "; ".join(f(x, y) for f, x, y in parts)
        self.put("mixed", cmd=["sh", "-c", script + "; echo end; exec sleep 600"])
        self.wait_for(lambda: self.slurp_log("mixed").endswith(b"end\n"), timeout=30, what="the output")
        self.assert_tail_and_follow("mixed", want)

    def test_logs_follow_across_rotations(self):
        trig, chan, res = self.follow_triggered(
            "burst", "i=0; while [ $i -lt 2000 ]; do printf '%099d\\n' $i; i=$((i+1)); done")
        open(trig, "w").close()
        want = b"first\n" + b"".join(b"%099d\n" % i for i in range(2000))
        res2 = self.a.collect(chan, timeout=30, until=lambda x: len(x["data"][1]) >= len(want) - 6)
        self.assertFalse(res2["closed"])
        self.assertEqual(res["data"][1] + res2["data"][1], want)  # 200 KB: three rotations
        self.assertTrue(os.path.exists(os.path.join(self.log_dir, "burst.log.2")))
        # the host ends it
        self.a.send(ba.CLOSE, 0, chan)
        self.assertTrue(self.a.collect(chan, timeout=10)["closed"])

    # ---- live followers (agent/logs-live.c) ----

    def test_logs_live_follow_through_rotations(self):
        # a caught-up follower gets the bytes from the agent as it writes
        # them: the worker reads no file meanwhile, and nothing is lost or
        # doubled at the switch nor through four rotations (64 KiB files)
        trig, chan, res = self.follow_triggered(
            "live", "i=0; while [ $i -lt 3000 ]; do printf '%099d\\n' $i; i=$((i+1)); done")
        pid = self.follow_worker()
        self.assertIsNotNone(pid)
        self.wait_for(lambda: self.worker_live(pid), what="the worker to hand the follow over")
        before = self.worker_read_bytes(pid)
        open(trig, "w").close()
        want = b"first\n" + b"".join(b"%099d\n" % i for i in range(3000))
        res2 = self.a.collect(chan, timeout=30, until=lambda x: len(x["data"][1]) >= len(want) - 6)
        self.assertEqual(res["data"][1] + res2["data"][1], want)
        self.assertTrue(os.path.exists(os.path.join(self.log_dir, "live.log.2")))
        # the follower kept up: the bytes came from the agent, not the file
        self.assertLess(self.worker_read_bytes(pid) - before, 300000 // 2)
        self.wait_for(lambda: self.worker_live(pid), what="the worker to stay handed over")
        # more after a pause, still live, still whole
        open(trig, "w").close()
        res3 = self.a.collect(chan, timeout=30, until=lambda x: len(x["data"][1]) >= len(want) - 6)
        self.assertEqual(res3["data"][1], want[6:])
        self.a.send(ba.CLOSE, 0, chan)
        self.assertTrue(self.a.collect(chan, timeout=10)["closed"])

    def test_logs_follow_flow_control(self):
        # a service printing as fast as it can, a host that returns no credit
        self.put("fast", cmd=["sh", "-c", "exec yes 0123456789abcdefghijklmnopqrstuvwxyz"])
        chan, r = self.a.open("service-logs", name="fast", tail=0, follow=True)
        got = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                t, s, ch, p = self.a.next_frame(chan, timeout=max(0.01, deadline - time.monotonic()))
            except Exception:
                break
            self.assertNotEqual(t, ba.CLOSE)
            if t == ba.DATA:
                got += len(p)
        self.assertGreater(got, 0)
        self.assertLessEqual(got, ba.WINDOW)  # never more than the credit
        # other work of the agent is not starved meanwhile
        t0 = time.monotonic()
        self.a.request("ping", timeout=5)
        out = self.a.exec_run(["echo", "hi"], user="root")
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(out["stdout"], b"hi\n")
        # credit back: it flows again
        self.a.send(ba.CREDIT, 0, chan, struct.pack("<I", 65536))
        res = self.a.collect(chan, timeout=10, credit=False, until=lambda x: len(x["data"][1]) > 0)
        self.assertGreater(len(res["data"][1]), 0)
        self.assertLessEqual(len(res["data"][1]), 65536)
        self.a.send(ba.CLOSE, 0, chan)
        self.a.request("service-stop", name="fast", timeout=20)


class LiveFollowFallback(ServiceCase):
    """A live follower the host stops draining goes back to the file and
    comes back live once caught up (1 MiB log files: a stall of a window's
    worth stays within the kept files)."""
    log_bytes = 1 << 20
    setUp = make_setup(None)

    def prepare(self, d):
        pass

    def test_logs_slow_follower_falls_back_to_the_file(self):
        n = 200000  # 1.3 MB of numbered lines, more than the window
        trig, chan, res = self.follow_triggered("seq", "seq 1 %d" % n)
        got = res["data"][1]
        pid = self.follow_worker()
        self.wait_for(lambda: self.worker_live(pid), what="the worker to hand the follow over")
        r0 = self.worker_read_bytes(pid)
        open(trig, "w").close()
        # no credit: the window runs out, and the follower goes back to its
        # worker, which reads the rest from the file into its pipe (and then
        # waits for the pipe to drain), not into a buffer of the agent
        stalled = self.a.collect(chan, timeout=20, credit=False,
                                 until=lambda x: len(x["data"][1]) >= ba.WINDOW)["data"][1]
        self.assertEqual(len(stalled), ba.WINDOW)
        self.wait_for(lambda: self.slurp_log("seq").endswith(b"%d\n" % n), timeout=30, what="the output")
        self.a.request("ping", timeout=5)  # the agent goes on meanwhile
        got += stalled
        # credit back: the rest comes from the file
        self.a.send(ba.CREDIT, 0, chan, struct.pack("<I", len(stalled)))
        want = b"first\n" + b"".join(b"%d\n" % i for i in range(1, n + 1))
        got += self.a.collect(chan, timeout=30,
                              until=lambda x: len(got) + len(x["data"][1]) >= len(want))["data"][1]
        self.assertEqual(len(got), len(want))
        self.assertTrue(got == want, "lost or doubled bytes at the switches")
        # it fell back: the worker read (from the file) at least the write
        # that found no room (seq writes 4 KiB at a time); what was written
        # after its next offer the agent may have read itself (the gap)
        r1 = self.worker_read_bytes(pid)
        self.assertGreaterEqual(r1 - r0, 1000)
        # caught up again: live again (the next burst is not read from the file)
        self.wait_for(lambda: self.worker_live(pid), what="the worker to hand over again")
        open(trig, "w").close()
        more = self.a.collect(chan, timeout=30, until=lambda x: len(x["data"][1]) >= len(want) - 6)["data"][1]
        self.assertTrue(more == want[6:], "lost or doubled bytes")
        self.assertLess(self.worker_read_bytes(pid) - r1, (len(want) - 6) // 2)
        self.a.send(ba.CLOSE, 0, chan)
        self.assertTrue(self.a.collect(chan, timeout=10)["closed"])

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: services-test.py BOX_AGENT [unittest args]")
    at.AGENT = os.path.abspath(sys.argv.pop(1))
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (the agent switches users)")
        sys.exit(0)
    unittest.main(verbosity=2)
