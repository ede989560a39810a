#!/usr/bin/env python3
"""Write a cpio "newc" archive (an initramfs) from a list of entries.

Usage: mkcpio.py OUT ENTRY...
  ENTRY is  dir:PATH:MODE  |  file:PATH:MODE:SOURCE  |  symlink:PATH:TARGET
All entries are owned by root. No external cpio tool is needed.
"""
import os
import sys


def header(ino, mode, nlink, size, name):
    fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name) + 1, 0]
    return b"070701" + b"".join(b"%08X" % f for f in fields)


def pad(n):
    return b"\0" * ((4 - n % 4) % 4)


def main():
    out, entries = sys.argv[1], sys.argv[2:]
    buf = bytearray()
    ino = 1
    for e in entries:
        kind, rest = e.split(":", 1)
        if kind == "dir":
            path, mode = rest.split(":")
            data, m = b"", 0o040000 | int(mode, 8)
            nlink = 2
        elif kind == "file":
            path, mode, src = rest.split(":", 2)
            with open(src, "rb") as f:
                data = f.read()
            m, nlink = 0o100000 | int(mode, 8), 1
        elif kind == "symlink":
            path, target = rest.split(":", 1)
            data, m, nlink = target.encode(), 0o120777, 1
        else:
            sys.exit("bad entry " + e)
        name = path.lstrip("/").encode()
        h = header(ino, m, nlink, len(data), name) + name + b"\0"
        buf += h + pad(len(h)) + data + pad(len(data))
        ino += 1
    h = header(0, 0, 1, 0, b"TRAILER!!!") + b"TRAILER!!!\0"
    buf += h + pad(len(h))
    buf += b"\0" * ((512 - len(buf) % 512) % 512)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf)
    os.rename(tmp, out)


if __name__ == "__main__":
    main()
