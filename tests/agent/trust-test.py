#!/usr/bin/env python3
"""The guest agent's trust-ca op (the secrets broker's CA), driving the real
`box-agent --connect --trust-root DIR` over its protocol: the CA file, the
copy for update-ca-certificates and the marked block in the system bundle,
a rotation replacing the block, idempotence, and refused input changing
nothing.

Usage: trust-test.py BOX_AGENT [unittest args].
"""
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boxagent as ba  # noqa: E402

AGENT = None
BUNDLE = "etc/ssl/certs/ca-certificates.crt"
CA = "etc/box/ca.pem"
COPY = "usr/local/share/ca-certificates/box-broker.crt"
BEGIN = "# box broker CA (begin)\n"
END = "# box broker CA (end)\n"
SYSTEM = ("# a system CA\n-----BEGIN CERTIFICATE-----\nU1lTVEVN\n"
          "-----END CERTIFICATE-----\n")


def pem(body):
    return "-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n" % body


def slurp(path):
    with open(path) as f:
        return f.read()


class TrustCa(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="box-trust-test-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.root = os.path.join(self.tmp, "root")
        os.makedirs(os.path.join(self.root, "etc/ssl/certs"))
        with open(self.path(BUNDLE), "w") as f:
            f.write(SYSTEM)
        sp = os.path.join(self.tmp, "host.sock")
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(sp)
        ls.listen(1)
        self.log = open(os.path.join(self.tmp, "agent.log"), "wb")
        self.proc = subprocess.Popen([AGENT, "--connect", sp, "--trust-root", self.root,
                                      "--api-socket", os.path.join(self.tmp, "api.sock"),
                                      "--hooks-dir", os.path.join(self.tmp, "hooks")],
                                     stderr=self.log)
        ls.settimeout(10)
        c, _ = ls.accept()
        ls.close()
        self.a = ba.Agent(c)
        self.a.hello()

    def tearDown(self):
        self.a.sock.close()
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()

    def path(self, rel):
        return os.path.join(self.root, rel)

    def files(self):
        return {rel: slurp(self.path(rel)) if os.path.exists(self.path(rel)) else None
                for rel in (BUNDLE, CA, COPY)}

    def assertRefused(self, value):
        before = self.files()
        with self.assertRaises(ba.AgentError) as cm:
            self.a.request("trust-ca", pem=value)
        self.assertEqual(cm.exception.code, "invalid", cm.exception.message)
        self.assertEqual(self.files(), before)

    def test_installs_replaces_and_is_idempotent(self):
        one = pem("T05F")
        self.a.request("trust-ca", pem=one)
        self.assertEqual(slurp(self.path(CA)), one)
        self.assertEqual(slurp(self.path(COPY)), one)
        self.assertEqual(slurp(self.path(BUNDLE)), SYSTEM + BEGIN + one + END)
        for rel in (CA, COPY, BUNDLE):
            self.assertEqual(stat.S_IMODE(os.stat(self.path(rel)).st_mode), 0o644, rel)
        self.assertEqual(stat.S_IMODE(os.stat(self.path("etc/box")).st_mode), 0o755)
        # the same again changes nothing, and writes nothing (same inodes:
        # every file is replaced by a rename when written)
        inodes = {rel: os.stat(self.path(rel)).st_ino for rel in (CA, COPY, BUNDLE)}
        self.a.request("trust-ca", pem=one)
        self.assertEqual(slurp(self.path(BUNDLE)), SYSTEM + BEGIN + one + END)
        self.assertEqual({rel: os.stat(self.path(rel)).st_ino for rel in (CA, COPY, BUNDLE)},
                         inodes)
        # a file that differs is written again, the others are left alone
        with open(self.path(COPY), "w") as f:
            f.write(pem("T1RIRVI="))
        self.a.request("trust-ca", pem=one)
        self.assertEqual(slurp(self.path(COPY)), one)
        self.assertNotEqual(os.stat(self.path(COPY)).st_ino, inodes[COPY])
        self.assertEqual(os.stat(self.path(CA)).st_ino, inodes[CA])
        # a rotation: the new CA in place of the old one, two blocks, no final newline
        two = pem("VFdP") + "\n" + pem("VEhSRUU=").rstrip("\n")
        self.a.request("trust-ca", pem=two)
        self.assertEqual(slurp(self.path(CA)), two + "\n")
        self.assertEqual(slurp(self.path(BUNDLE)), SYSTEM + BEGIN + two + "\n" + END)
        self.assertEqual(sorted(os.listdir(self.path("etc/ssl/certs"))), ["ca-certificates.crt"])

    def test_bundle_without_final_newline_or_missing(self):
        with open(self.path(BUNDLE), "w") as f:
            f.write(SYSTEM.rstrip("\n"))
        self.a.request("trust-ca", pem=pem("T05F"))
        self.assertEqual(slurp(self.path(BUNDLE)), SYSTEM + BEGIN + pem("T05F") + END)
        shutil.rmtree(self.path("etc/ssl"))
        self.a.request("trust-ca", pem=pem("VFdP"))
        self.assertEqual(slurp(self.path(BUNDLE)), BEGIN + pem("VFdP") + END)

    def test_refused(self):
        self.a.request("trust-ca", pem=pem("T05F"))
        body = "QUFB" * 16
        big = pem("\n".join([body] * (16 * 1024 // len(body) + 1)))
        self.assertGreater(len(big), 16 * 1024)
        for value in ["", "not a pem", pem("T05F").replace("CERTIFICATE", "PRIVATE KEY"),
                      pem("T05F") + "trailing", pem("T0 5F"), pem("T05F\u00e9"),
                      pem("T05F\x00"), "-----BEGIN CERTIFICATE-----\nT05F\n",
                      pem("T05F") + BEGIN, big, 5, None]:
            self.assertRefused(value)
        with self.assertRaises(ba.AgentError):
            self.a.request("trust-ca")
        # just under the limit is taken
        fits = pem("\n".join([body] * ((16 * 1024 - 60) // (len(body) + 1))))
        self.assertLessEqual(len(fits), 16 * 1024)
        self.a.request("trust-ca", pem=fits)
        self.assertEqual(slurp(self.path(CA)), fits)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: trust-test.py BOX_AGENT [unittest args]")
    AGENT = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
