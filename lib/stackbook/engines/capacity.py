"""An engine's own limits on what it serves at once, as it reports them: each limit with the value
it was configured with beside it, and the realized capacity as the smallest of them."""
from __future__ import annotations


def parse_int(text: str) -> int:
    return int(text.replace(",", ""))


def capacity_limit(realized, configured, source: str, unit: str = "sequences") -> dict:
    """One of the engine's own limits: the value it reported (None: it reported none), the value
    it was configured with beside it, and where the reported one was read."""
    return {"realized": realized, "configured": configured, "unit": unit,
            "source": source if realized is not None else f"not reported by the engine ({source})"}


def smallest_limit(limits: dict[str, dict]) -> dict:
    """Realized capacity is the smallest of the engine's own limits on sequences served at once
    (its sequence cap, what its KV blocks hold at the served context): a KV pool with room for 22.75
    sequences behind a cap of 4 serves 4. A limit the engine did not report is shown, never used."""
    known = {name: lim["realized"] for name, lim in limits.items()
             if lim["unit"] == "sequences" and isinstance(lim["realized"], (int, float))}
    if not known:
        return {"limits": limits}
    bound = min(known, key=known.get)
    return {"limits": limits, "max_concurrency": known[bound], "max_concurrency_bound_by": bound}
