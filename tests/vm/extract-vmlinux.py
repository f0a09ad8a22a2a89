#!/usr/bin/env python3
"""Writes the uncompressed kernel (an ELF with a PVH entry) out of a Debian vmlinuz.

qemu boots it directly with -kernel, skipping the decompressor, which under TCG takes seconds.
Usage: extract-vmlinux.py VMLINUZ OUT
"""
import lzma
import sys

XZ_MAGIC = b"\xfd7zXZ\x00"
ELF_MAGIC = b"\x7fELF"

data = open(sys.argv[1], "rb").read()
start = data.find(XZ_MAGIC)
while start >= 0:
    try:
        out = lzma.LZMADecompressor().decompress(data[start:])
    except lzma.LZMAError:
        out = b""
    if out.startswith(ELF_MAGIC):
        open(sys.argv[2], "wb").write(out)
        sys.exit(0)
    start = data.find(XZ_MAGIC, start + 1)
sys.exit(f"{sys.argv[1]}: no xz-compressed ELF kernel inside")
