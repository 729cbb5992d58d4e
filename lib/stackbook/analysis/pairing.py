"""Which rounds a pair of arms is compared over at one load: the interleaved design pairs them
round by round, so drift a round shares cancels; a repetition a rule discarded for one arm drops
only that round, at that load, from the pair."""
from __future__ import annotations

import pandas as pd


def pairable_rounds(ga: pd.DataFrame, gb: pd.DataFrame) -> list[int] | None:
    """The rounds a pair is compared over at one load, paired: every round when both arms kept
    the same ones, else the rounds both kept, where at least two are left (a repetition a rule
    discarded for one arm drops that round from the pair at that load only). None: not pairable."""
    if "repetition" not in ga or "repetition" not in gb or ga.empty:
        return None
    if list(ga["repetition"]) == list(gb["repetition"]):
        return list(ga["repetition"])
    both = sorted(set(ga["repetition"]) & set(gb["repetition"]))
    return both if len(both) >= 2 else None


def rounds_left_out(ga: pd.DataFrame, gb: pd.DataFrame, rounds: list[int], a: str, b: str) -> str:
    """What pairing left out at this load, in words ("" when nothing)."""
    gone = [f"{arm}'s repetition {int(r)}" for arm, g in ((a, ga), (b, gb))
            for r in g["repetition"] if r not in rounds]
    return (f", over the rounds both kept ({', '.join(str(int(r)) for r in rounds)}; left out: "
            f"{', '.join(gone)}, whose partner was discarded)") if gone else ""
