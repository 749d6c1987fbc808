"""The GNU build ID of a shared library: the linker's hash of what it
linked, stored in an ELF note near the start of the file.

Reading it takes a few small reads (the ELF header, the program headers,
the note segments), where a checksum of the whole library reads every
byte of it: what a compiled model asks at every load to know whether
this build of the C core packed its layouts (``paths.core_digest``).
None for a file that is not a 64-bit little-endian ELF or has no build ID
(the caller then checksums the file).
"""
import struct

__all__ = ["gnu_build_id"]

_PT_NOTE = 4
_NT_GNU_BUILD_ID = 3
_MAX_NOTES = 1 << 16        # a note segment larger than this is not read


def _notes(data):
    """(name, type, desc) of each note in ``data`` (one note segment)."""
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from("<III", data, pos)
        name_at = pos + 12
        desc_at = name_at + (-(-namesz // 4) * 4)
        end = desc_at + (-(-descsz // 4) * 4)
        if desc_at + descsz > len(data):
            return
        yield data[name_at:name_at + namesz], kind, data[desc_at:desc_at + descsz]
        pos = end


def gnu_build_id(path):
    """The build ID of the ELF file at ``path`` as a hex string, or None
    (see the module docstring).  OSError when the file cannot be read."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:6] != b"\x7fELF\x02\x01":   # ELF64, little-endian
            return None
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        if phentsize < 56 or not 0 < phnum < 4096:
            return None
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        for i in range(len(table) // phentsize):
            p_type, = struct.unpack_from("<I", table, i * phentsize)
            if p_type != _PT_NOTE:
                continue
            offset, = struct.unpack_from("<Q", table, i * phentsize + 8)
            size, = struct.unpack_from("<Q", table, i * phentsize + 32)
            if size > _MAX_NOTES:
                continue
            f.seek(offset)
            for name, kind, desc in _notes(f.read(size)):
                if kind == _NT_GNU_BUILD_ID and name == b"GNU\0" and desc:
                    return desc.hex()
    return None
