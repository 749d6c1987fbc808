"""Human-readable byte counts for tables and summaries."""


def human_bytes(n):
    """``1536`` -> ``'1.5 KiB'``; bytes below 1 KiB print as ``'512 B'``."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} B" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
