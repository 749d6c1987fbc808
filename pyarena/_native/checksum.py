"""The C core's CRC-32C (``pa_crc32c``, checksum.c): the checksum of a
compiled model's arrays, computed where the bytes lie (a mapped file's
pages, a NumPy array) without a copy.  Thin: one call; ``data`` any
C-contiguous buffer."""
from . import ffi, lib

__all__ = ["crc32c"]


def crc32c(data, crc=0):
    """CRC-32C of ``data``'s bytes, continuing ``crc`` (0 to start)."""
    view = memoryview(data)
    if view.nbytes == 0:
        return crc
    return lib.pa_crc32c(ffi.from_buffer(view.cast("B")), view.nbytes, crc)
