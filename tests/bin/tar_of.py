#!/usr/bin/python3
"""Writes a tar of made-up members, for the archive tests (Python's tarfile).

  tar_of.py OUT.tar [--pax-global] MEMBER...
      MEMBER: NAME=TEXT (a file holding TEXT and a newline) or NAME@TARGET (a hard link to
      the member TARGET). --pax-global writes a PAX archive opening with a global header.
"""
import io
import sys
import tarfile

out, args = sys.argv[1], sys.argv[2:]
pax = "--pax-global" in args
members = [a for a in args if a != "--pax-global"]
opts = {"format": tarfile.PAX_FORMAT, "pax_headers": {"comment": "global"}} if pax else {}
with tarfile.open(out, "w", **opts) as t:
    for m in members:
        if "=" in m:
            name, text = m.split("=", 1)
            data = (text + "\n").encode()
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
        else:
            name, target = m.split("@", 1)
            ti = tarfile.TarInfo(name)
            ti.type = tarfile.LNKTYPE
            ti.linkname = target
            t.addfile(ti)
