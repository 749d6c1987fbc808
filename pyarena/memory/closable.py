"""``Closable``: the close() contract shared by Arena and Pool.

``close()`` drops the Python object's hold on its C allocator (arrays
already handed out keep it alive, see pyarena/_native/glue_handle.c); later calls raise
``StateError`` naming the object; ``with`` closes on exit; closing twice is
fine.
"""
from ..errors import StateError

__all__ = ["Closable"]


class Closable:
    """Subclasses set ``_kind`` ("arena", "pool"), ``_closed`` and define
    ``_drop()`` (what close() drops)."""

    _kind = "allocator"
    _closed = False

    def _check_open(self):
        if self._closed:
            raise StateError(f"{self._kind} is closed")

    def close(self):
        """Drop this object's hold on the C allocator.  Arrays already
        handed out stay valid (they keep the memory alive); further calls
        raise StateError.  Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._drop()

    def _drop(self):
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
