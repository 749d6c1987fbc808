"""``Policy``: how a :class:`~pyarena.Pool` carves and caches memory.

A plain frozen dataclass, validated when it is made, so a bad value fails
at the line that wrote it with a message naming it (not later inside the
C pool).  Every field maps to one field of ``pa_pool_config_t``; the
defaults are the C defaults.

Sizes are bytes.  ``None`` means "the default" for the geometry fields and
"none / unbounded" for ``limit`` and ``cache_budget``.
"""
from dataclasses import asdict, dataclass, replace
from typing import Optional, Tuple

import numpy as np

from ..errors import InvalidArgumentError
from .args import SIZE_MAX, as_pow2, as_size

__all__ = ["Policy", "MODES", "GROWTHS", "RELEASES"]

KiB = 1 << 10
MiB = 1 << 20

#: mode name -> PA_POOL_* value
MODES = {"hybrid": 0, "slab-only": 1, "buddy-only": 2}
_MODE_ALIASES = {"slab": "slab-only", "slab_only": "slab-only",
                 "buddy": "buddy-only", "buddy_only": "buddy-only"}
#: growth name -> PA_GROW_* value
GROWTHS = {"pow2": 0, "requested": 1, "none": 2}
#: release name -> PA_RELEASE_* value
RELEASES = {"unmap": 0, "decommit": 1}
MAX_CLASSES = 48
MAX_SEQUENCES = 64  #: PA_LEARN_MAX_SEQUENCES


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


#: the largest slab class the C pool takes (PA_SLOT_MAX_REQ, csrc/slab.h)
MAX_CLASS = 0x3FFFFFFF
#: the largest buddy region (csrc/buddy.c)
MAX_REGION = 1 << 30
_DEFAULT_REGION = MiB


def _int(policy, name, low=0, optional=False):
    """Field ``name`` checked and stored as a plain int (any integral value
    is accepted: NumPy integers too)."""
    v = as_size(getattr(policy, name), f"Policy.{name}", low, optional)
    object.__setattr__(policy, name, v)
    return v


def _pow2(policy, name, low, high):
    v = as_pow2(getattr(policy, name), f"Policy.{name}", low, high)
    object.__setattr__(policy, name, v)
    return v


@dataclass(frozen=True)
class Policy:
    """Pool policy.  All fields are keyword arguments with C defaults.

    * ``mode`` -- "hybrid" (slab classes up to ``slab_max``, buddy blocks
      between ``slab_max`` and ``large_threshold`` -- none with the
      defaults, both 16 KiB -- and a page-run zone above), "slab-only" or
      "buddy-only".
    * ``alignment`` -- granularity of every block: a power of two in
      [8, 4096].
    * ``size_classes`` -- custom slab classes (strictly increasing
      multiples of ``alignment``, at most 48), or None for generated ones:
      ``fine_classes`` classes per power of two (1, 2, 4 or 8) up to
      ``slab_max`` (None = 16 KiB).
    * ``large_threshold`` -- hybrid: blocks above it go to the large zone
      (None = 16 KiB, at most ``buddy_region``).
    * ``high_watermark`` / ``low_watermark`` -- when reserved bytes exceed
      the high mark, free chunks are released down to the low mark (low
      defaults to high).
    * ``growth`` -- "pow2" (each new chunk doubles), "requested" (just
      enough) or "none" (one chunk of ``chunk_size``, or of ``limit``).
    * ``limit`` -- hard limit on reserved bytes (None = none).
    * ``cache_budget`` -- the reclamation budget: bytes freed blocks may
      hold in the deferred caches before they are coalesced (None =
      unbounded, 0 = cache nothing; default 16 MiB).
    * ``release`` -- what trimming does with a free chunk: "unmap" it or
      "decommit" it (madvise; it stays mapped for reuse).
    * ``chunk_size``, ``slab_size``, ``buddy_region`` -- geometry (None =
      1 MiB, 64 KiB, 1 MiB).
    * ``learn`` -- learn the step (default True): once :meth:`Pool.step`
      marks step ends, each step's allocation sequence is recorded, and a
      sequence seen ``learn_repeats`` times (default 2) is planned and
      served at planned offsets from one region shared by up to
      ``learn_sequences`` learned sequences (default 16, at most 64).  A
      step with more than ``learn_max_events`` allocations + frees
      (default 65536) is not learned.
    * ``auto_step`` -- also treat "live bytes back at the step's starting
      level" as a step end (default False: only :meth:`Pool.step`).
    * ``huge_pages`` -- back the heap with transparent huge pages once
      16 MiB of it are committed (default False): fewer TLB misses on a
      large, randomly used pool, at a few ms per 2 MiB while it grows and
      with every committed byte resident (docs/pool.md).
    """

    mode: str = "hybrid"
    alignment: int = 64
    size_classes: Optional[Tuple[int, ...]] = None
    fine_classes: int = 4
    slab_max: Optional[int] = None
    large_threshold: Optional[int] = None
    high_watermark: Optional[int] = None
    low_watermark: Optional[int] = None
    growth: str = "requested"
    limit: Optional[int] = None
    cache_budget: Optional[int] = 16 * MiB
    release: str = "unmap"
    chunk_size: Optional[int] = None
    slab_size: Optional[int] = None
    buddy_region: Optional[int] = None
    learn: bool = True
    learn_repeats: int = 2
    learn_sequences: int = 16
    learn_max_events: int = 65536
    auto_step: bool = False
    huge_pages: bool = False

    def __post_init__(self):
        mode = _MODE_ALIASES.get(self.mode, self.mode)
        if mode not in MODES:
            raise InvalidArgumentError(
                f"Policy.mode must be one of {sorted(MODES)}, not {self.mode!r}")
        object.__setattr__(self, "mode", mode)
        _pow2(self, "alignment", 8, 4096)
        if self.growth not in GROWTHS:
            raise InvalidArgumentError(
                f"Policy.growth must be one of {sorted(GROWTHS)}, not {self.growth!r}")
        if self.release not in RELEASES:
            raise InvalidArgumentError(
                f"Policy.release must be one of {sorted(RELEASES)}, not {self.release!r}")
        if isinstance(self.fine_classes, np.integer):
            object.__setattr__(self, "fine_classes", int(self.fine_classes))
        if self.fine_classes not in (1, 2, 4, 8) or not _is_int(self.fine_classes):
            raise InvalidArgumentError(
                f"Policy.fine_classes must be 1, 2, 4 or 8 (classes per power of "
                f"two), not {self.fine_classes!r}")
        if self.size_classes is not None:
            self._check_classes()
        _int(self, "slab_max", 1, optional=True)
        if self.slab_max is not None and self.slab_max % self.alignment:
            raise InvalidArgumentError(
                f"Policy.slab_max {self.slab_max} is not a multiple of the "
                f"alignment {self.alignment}")
        _int(self, "slab_size", 1, optional=True)
        if self.slab_size is not None and self.slab_size % (4 * KiB):
            raise InvalidArgumentError(
                f"Policy.slab_size {self.slab_size} is not a multiple of 4 KiB")
        if self.buddy_region is not None:
            _pow2(self, "buddy_region", 64 * KiB, MAX_REGION)
        _int(self, "large_threshold", 1, optional=True)
        region = self.buddy_region or MiB
        if self.large_threshold is not None and self.large_threshold > region:
            raise InvalidArgumentError(
                f"Policy.large_threshold {self.large_threshold} exceeds the buddy "
                f"region ({region} bytes)")
        _int(self, "chunk_size", 1, optional=True)
        _int(self, "limit", 1, optional=True)
        _int(self, "cache_budget", 0, optional=True)
        _int(self, "high_watermark", 1, optional=True)
        _int(self, "low_watermark", 0, optional=True)
        if self.high_watermark is None and self.low_watermark is not None:
            raise InvalidArgumentError(
                "Policy.low_watermark needs a high_watermark")
        if (self.high_watermark is not None and self.low_watermark is not None
                and self.low_watermark > self.high_watermark):
            raise InvalidArgumentError(
                f"Policy.low_watermark {self.low_watermark} is above "
                f"high_watermark {self.high_watermark}")
        for name in ("learn", "auto_step", "huge_pages"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgumentError(
                    f"Policy.{name} must be True or False, not {getattr(self, name)!r}")
        _int(self, "learn_repeats", 1)
        if self.learn_repeats > 1 << 20:
            raise InvalidArgumentError(
                f"Policy.learn_repeats {self.learn_repeats!r} is above 2**20")
        _int(self, "learn_sequences", 1)
        if self.learn_sequences > MAX_SEQUENCES:
            raise InvalidArgumentError(
                f"Policy.learn_sequences must be in [1, {MAX_SEQUENCES}], not "
                f"{self.learn_sequences!r}")
        _int(self, "learn_max_events", 1)
        if self.growth == "none" and not (self.chunk_size or self.limit):
            raise InvalidArgumentError(
                "Policy.growth='none' needs a chunk_size or a limit (the pool's "
                "only chunk)")
        if (self.limit is not None and self.chunk_size is not None
                and self.chunk_size > self.limit):
            raise InvalidArgumentError(
                f"Policy.chunk_size {self.chunk_size} exceeds the limit {self.limit}")
        self._check_fits()

    def _check_fits(self):
        """With growth='none' the pool's only chunk must hold one buddy
        region (hybrid with a buddy zone, buddy-only) and one slab: else
        every request they serve fails, e.g. every one in (slab_max,
        large_threshold] in a hybrid pool of one 64 KiB chunk."""
        if self.growth != "none":
            return
        cap = self.chunk_size or self.limit
        need, field = self.slab_size or 64 * KiB, "slab_size"
        if self.mode != "slab-only":
            threshold = self.large_threshold or 16 * KiB
            if self.mode == "buddy-only" or threshold > (self.slab_max or 16 * KiB):
                region = self.buddy_region or _DEFAULT_REGION
                if region > need:
                    need, field = region, "buddy_region"
        if need > cap:
            raise InvalidArgumentError(
                f"Policy: growth='none' with a {cap:,}-byte chunk cannot hold one "
                f"{field.replace('_', ' ')} ({need:,} bytes), so every request it serves "
                f"would fail; give a chunk_size (or limit) of at least {need:,} or a "
                f"smaller {field}")

    def _check_classes(self):
        try:
            classes = tuple(self.size_classes)
        except TypeError:
            raise InvalidArgumentError(
                f"Policy.size_classes must be a sequence of ints, not "
                f"{self.size_classes!r}") from None
        if not classes:
            raise InvalidArgumentError("Policy.size_classes is empty (use None "
                                       "for the generated classes)")
        if len(classes) > MAX_CLASSES:
            raise InvalidArgumentError(
                f"Policy.size_classes has {len(classes)} classes, at most "
                f"{MAX_CLASSES} are supported")
        prev = 0
        classes = tuple(int(c) if isinstance(c, np.integer) else c for c in classes)
        for c in classes:
            if not _is_int(c) or c <= 0 or c % self.alignment:
                raise InvalidArgumentError(
                    f"Policy.size_classes: {c!r} is not a positive multiple of the "
                    f"alignment {self.alignment}")
            if c > MAX_CLASS:
                raise InvalidArgumentError(
                    f"Policy.size_classes: {c:,} is above the largest slab class "
                    f"({MAX_CLASS:,} bytes); larger blocks go to the buddy or large zone")
            if c <= prev:
                raise InvalidArgumentError(
                    f"Policy.size_classes must be strictly increasing: {c} after {prev}")
            prev = c
        object.__setattr__(self, "size_classes", classes)

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def as_dict(self):
        return asdict(self)

    def fill_config(self, cfg):
        """Write this policy into a ``pa_pool_config_t`` (cffi) already
        holding the C defaults."""
        cfg.mode = MODES[self.mode]
        cfg.alignment = self.alignment
        cfg.growth = GROWTHS[self.growth]
        cfg.release = RELEASES[self.release]
        cfg.classes_per_doubling = self.fine_classes
        if self.size_classes is not None:
            cfg.num_classes = len(self.size_classes)
            for i, c in enumerate(self.size_classes):
                cfg.classes[i] = c
        for name in ("slab_max", "slab_size", "buddy_region", "large_threshold",
                     "chunk_size"):
            v = getattr(self, name)
            if v is not None:
                setattr(cfg, name, v)
        cfg.limit = self.limit or 0
        if self.high_watermark is not None:
            cfg.high_watermark = self.high_watermark
            low = self.low_watermark
            cfg.low_watermark = self.high_watermark if low is None else low
        cfg.learn = int(self.learn)
        cfg.learn_repeats = self.learn_repeats
        cfg.learn_sequences = self.learn_sequences
        cfg.learn_max_events = self.learn_max_events
        cfg.auto_step = int(self.auto_step)
        cfg.huge_pages = int(self.huge_pages)
        if self.cache_budget is None:
            cfg.cache_budget = SIZE_MAX
        else:
            # C reads 0 as "the default"; one byte caches nothing.
            cfg.cache_budget = self.cache_budget or 1
        return cfg
