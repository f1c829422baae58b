# Copyright: (c) 2026, bwtune developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Which GPU targets a CUDA shared library carries, read from its ELF fatbinary sections.

nvcc puts device code into the `.nv_fatbin` section (relocatable device code into
`__nv_relfatbin`) as one or more fatbinary blobs:

  blob header (16 bytes):  u32 magic 0xBA55ED50, u16 version, u16 header size, u64 body size
  entry header (>= 64):    u16 kind (1 PTX, 2 cubin), u16 version, u32 header size,
                           u64 payload size, ..., u32 arch at 28 (90, 100, 120),
                           u64 flags at 40

In the flags, 0x100000 marks arch-specific code (sm_120a) and 0x200000 family code
(sm_100f); 0x8000 / 0x2000 mark a compressed payload. The layout and flag bits were read
off libraries built with nvcc 13.0 for sm_90a, sm_100a, sm_100f, sm_120, sm_120a and
compute_120 (tests/unit/facts/test_fatbin.py rebuilds them). Only headers are read, payloads
are skipped, so a 1 GB library costs a few thousand small reads.
"""

from __future__ import annotations

import os
import struct

FATBIN_MAGIC = 0xBA55ED50
SECTIONS = (".nv_fatbin", "__nv_relfatbin")
KIND_PTX = 1
KIND_CUBIN = 2
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000
FLAG_COMPRESSED = 0x8000 | 0x2000


class FatbinError(ValueError):
    """A file that is not an ELF shared library this reader understands."""


def _elf_sections(f) -> dict[str, tuple[int, int]]:
    """{section name: (file offset, size)} of a 64- or 32-bit little-endian ELF file."""
    ident = f.read(16)
    if ident[:4] != b"\x7fELF":
        raise FatbinError("not an ELF file")
    if ident[5] != 1:
        raise FatbinError("big-endian ELF not supported")
    is64 = ident[4] == 2
    if is64:
        f.seek(0x28)
        (shoff,) = struct.unpack("<Q", f.read(8))
        f.seek(0x3A)
    else:
        f.seek(0x20)
        (shoff,) = struct.unpack("<I", f.read(4))
        f.seek(0x2E)
    shentsize, shnum, shstrndx = struct.unpack("<HHH", f.read(6))
    if shoff == 0 or shnum == 0 or shstrndx >= shnum:
        return {}
    f.seek(shoff)
    raw = f.read(shentsize * shnum)
    headers = []
    for i in range(shnum):
        base = i * shentsize
        if is64:
            name, _t, _fl, _addr, off, size = struct.unpack_from("<IIQQQQ", raw, base)
        else:
            name, _t, _fl, _addr, off, size = struct.unpack_from("<IIIIII", raw, base)
        headers.append((name, off, size))
    _name, stroff, strsize = headers[shstrndx]
    f.seek(stroff)
    strtab = f.read(strsize)
    sections = {}
    for name, off, size in headers:
        end = strtab.find(b"\0", name)
        sections[strtab[name:end].decode("ascii", "replace")] = (off, size)
    return sections


def target_name(kind: int, arch: int, flags: int) -> str:
    """(2, 120, FLAG_ARCH_SPECIFIC) -> 'sm_120a'; (1, 120, 0) -> 'compute_120'."""
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    prefix = "compute" if kind == KIND_PTX else "sm"
    return f"{prefix}_{arch}{suffix}"


def _entries(f, off: int, size: int):
    """Yield (kind, arch, flags) for every entry of every fatbin blob in a section."""
    pos, end = off, off + size
    while pos + 16 <= end:
        f.seek(pos)
        head = f.read(16)
        magic, _ver, hsize, body = struct.unpack("<IHHQ", head)
        if magic != FATBIN_MAGIC:
            pos += 8  # blobs are 8-byte aligned; padding between them is zeros
            continue
        epos, eend = pos + hsize, pos + hsize + body
        while epos + 48 <= eend:
            f.seek(epos)
            e = f.read(48)
            kind, _ev, ehsize, payload = struct.unpack_from("<HHIQ", e, 0)
            if ehsize < 48 or kind not in (KIND_PTX, KIND_CUBIN):
                break
            (arch,) = struct.unpack_from("<I", e, 28)
            (flags,) = struct.unpack_from("<Q", e, 40)
            yield kind, arch, flags
            epos += ehsize + payload
        pos = max(eend, pos + 16)


def library_targets(path: str) -> dict:
    """{'sm': ['sm_100a', 'sm_120a'], 'ptx': ['compute_120'], 'compressed': bool} of one file."""
    sm: set[str] = set()
    ptx: set[str] = set()
    compressed = False
    with open(path, "rb") as f:
        sections = _elf_sections(f)
        for name in SECTIONS:
            if name not in sections:
                continue
            off, size = sections[name]
            for kind, arch, flags in _entries(f, off, size):
                (ptx if kind == KIND_PTX else sm).add(target_name(kind, arch, flags))
                compressed = compressed or bool(flags & FLAG_COMPRESSED)
    return {"sm": sorted(sm, key=_arch_key), "ptx": sorted(ptx, key=_arch_key), "compressed": compressed}


def _arch_key(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name.split("_", 1)[-1] if ch.isdigit())
    return (int(digits or 0), name)


def package_targets(root: str) -> dict:
    """Targets of every shared library under a package directory.

    {'libraries': {relpath: {...}}, 'sm': [...union...], 'ptx': [...], 'errors': {relpath: msg}}
    """
    libraries: dict[str, dict] = {}
    errors: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if not (fn.endswith(".so") or ".so." in fn):
                continue
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, root)
            try:
                libraries[rel] = library_targets(full)
            except (OSError, FatbinError, struct.error) as exc:
                errors[rel] = str(exc) or type(exc).__name__
    sm = sorted({t for lib in libraries.values() for t in lib["sm"]}, key=_arch_key)
    ptx = sorted({t for lib in libraries.values() for t in lib["ptx"]}, key=_arch_key)
    return {"libraries": libraries, "sm": sm, "ptx": ptx, "errors": errors}
