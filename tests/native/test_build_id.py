"""The GNU build ID read from an ELF file's notes (what identifies the C
core a compiled model's layouts were packed by)."""
import re
import shutil
import struct
import subprocess

from pyarena._native import _cffi
from pyarena._native.build_id import gnu_build_id
from pyarena._native.paths import core_digest


def _note(name, kind, desc):
    pad = lambda b: b + b"\0" * (-len(b) % 4)   # noqa: E731
    return struct.pack("<III", len(name), len(desc), kind) + pad(name) + pad(desc)


def _elf(notes, phnum_extra=0):
    """A minimal ELF64 little-endian file: a header, a LOAD and a NOTE
    program header, the notes after them."""
    phoff, phentsize, phnum = 64, 56, 2 + phnum_extra
    notes_at = phoff + phentsize * phnum
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", head, 0x20, phoff)
    struct.pack_into("<HH", head, 0x36, phentsize, phnum)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, notes_at, notes_at, 4096)
    note = struct.pack("<IIQQQQQQ", 4, 4, notes_at, 0, 0, len(notes), len(notes), 4)
    extra = b"".join(struct.pack("<IIQQQQQQ", 6, 4, 0, 0, 0, 0, 0, 8)
                     for _ in range(phnum_extra))
    return bytes(head) + load + note + extra + notes


def test_build_id_of_a_made_file(tmp_path):
    p = tmp_path / "lib.so"
    notes = _note(b"GNU\0", 1, b"\0" * 16) + _note(b"GNU\0", 3, bytes(range(20)))
    p.write_bytes(_elf(notes, phnum_extra=1))
    assert gnu_build_id(p) == bytes(range(20)).hex()


def test_no_build_id(tmp_path):
    p = tmp_path / "lib.so"
    p.write_bytes(_elf(_note(b"XYZ\0", 3, b"\1\2\3\4")))   # another owner's note
    assert gnu_build_id(p) is None
    p.write_bytes(b"not an ELF file at all" * 4)
    assert gnu_build_id(p) is None
    p.write_bytes(_elf(_note(b"GNU\0", 3, bytes(range(20))))[:130])   # notes cut off
    assert gnu_build_id(p) is None


def test_build_id_matches_readelf():
    readelf = shutil.which("readelf")
    # binutils gives the linker that built the extension and readelf alike
    assert readelf is not None, "readelf (binutils) not found beside the linker"
    out = subprocess.run([readelf, "-n", _cffi.__file__], capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    assert gnu_build_id(_cffi.__file__) == (m.group(1) if m else None)


def test_core_digest_names_the_build():
    got = core_digest()
    found = gnu_build_id(_cffi.__file__)
    if found:
        assert got == f"build-id:{found}"
    else:               # no build ID: the file's CRC-32
        assert got.startswith("crc32:")
    assert re.fullmatch(r"(build-id:[0-9a-f]+|crc32:[0-9a-f]{8})", got)
