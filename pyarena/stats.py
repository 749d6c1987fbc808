"""Statistics as plain data: dataclasses over the C stats structs."""
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ArenaStats:
    """A snapshot of an :class:`~pyarena.Arena` (bytes unless noted)."""

    reserved: int   #: obtained from the OS or the caller's buffer
    used: int       #: consumed by live allocations, padding included
    requested: int  #: asked for by live allocations
    padding: int    #: used - requested: alignment waste
    peak: int       #: highest ``used`` so far
    count: int      #: live allocations
    chunks: int     #: chunks in use
    spare: int      #: bytes of spare chunks kept for reuse (in reserved)
    capacity: int   #: hard limit, 0 = unlimited
    alignment: int  #: granularity

    @classmethod
    def from_c(cls, st):
        return cls(**{f.name: int(getattr(st, f.name)) for f in fields(cls)})

    @property
    def padding_ratio(self):
        """Fraction of used bytes lost to alignment."""
        return self.padding / self.used if self.used else 0.0

    def as_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}
