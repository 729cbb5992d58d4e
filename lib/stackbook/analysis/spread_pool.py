"""Which loads share one run-to-run spread.

Pooling the spread of repetition estimates over a run's loads buys degrees of freedom (two
repetitions at three loads give three instead of one), but it assumes every load varies alike. One
odd repetition at one load (a cold cache, a busy neighbour) then widens every load's interval, and
a difference measured to 1% elsewhere comes out undecided. So a load's spread joins the pool only
when it is consistent with the others: each load's variance is set against the pooled variance of
the other loads with an F test (leave-one-out, so an outlier cannot inflate its own reference); the
most extreme load whose one-sided p-value is below `POOLING_TEST_LEVEL` divided by the number of
loads tested (Bonferroni) is set apart, and the test repeats on the rest. The level is liberal on
purpose: with two repetitions a load's variance has one degree of freedom and the F test little
power, and the two errors are not alike: setting a load apart wrongly widens that load's interval
(it stays valid); pooling it wrongly hides a real difference at every load. A load set apart keeps
its own repetitions' spread: its interval is valid but wide, and it says why. Setting a load apart
never narrows its own interval; it stops that load from widening the others'.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

POOLING_TEST_LEVEL = 0.20


@dataclass(frozen=True)
class SetApart:
    """A load whose spread the others' did not support: the F ratio of its variance to theirs."""
    key: object
    f_ratio: float
    p_value: float
    threshold: float
    tested: int = 1  # loads the test ran over: the threshold is POOLING_TEST_LEVEL shared among them

    def text(self) -> str:
        """In words: how much more this load varies, how likely that were it alike, and the bar,
        the one pooling level shared over the loads tested."""
        what = f"load {self.key:g}'s" if isinstance(self.key, (int, float)) else f"{self.key}'s"
        return (f"{what} spread set apart (variance {self.f_ratio:,.0f}× the other loads': a {_share(self.p_value)} "
                f"chance were it alike, under the pooling test's bar of {_share(POOLING_TEST_LEVEL)} shared over "
                f"{self.tested} loads, {_share(self.threshold)} each): its own repetitions only")


def _share(p: float) -> str:
    return f"{100 * p:.2g}%"


@dataclass(frozen=True)
class SpreadPlan:
    """Per key (a load): the log spread and degrees of freedom its interval uses, which keys were
    pooled, and which were set apart and why."""
    spread: dict = field(default_factory=dict)       # key -> (sd or None, df)
    pooled: tuple = ()
    set_apart: tuple[SetApart, ...] = ()

    def of(self, key) -> tuple[float | None, int]:
        return self.spread.get(key, (None, 0))


def _ss(c: np.ndarray) -> float:
    return float(((c - c.mean()) ** 2).sum()) if c.size else 0.0


def _df(c: np.ndarray) -> int:
    return max(0, c.size - 1)


def _pool(cells: dict, keys) -> tuple[float | None, int]:
    df = sum(_df(cells[k]) for k in keys)
    return (math.sqrt(sum(_ss(cells[k]) for k in keys) / df), df) if df else (None, 0)


def _most_extreme(cells: dict, keys: list, level: float) -> SetApart | None:
    """The load whose variance the others' pooled variance explains least, if the F test sets it
    apart at the Bonferroni-corrected level."""
    tested = [k for k in keys if _df(cells[k])]
    if len(tested) < 2:
        return None
    threshold = level / len(tested)
    worst = None
    for k in tested:
        rest = [j for j in tested if j != k]
        sd_rest, df_rest = _pool(cells, rest)
        var_k = _ss(cells[k]) / _df(cells[k])
        if not sd_rest:  # the others agree exactly: no variance to test against
            continue
        f = var_k / sd_rest ** 2
        p = float(stats.f.sf(f, _df(cells[k]), df_rest))
        if p < threshold and (worst is None or f > worst.f_ratio):
            worst = SetApart(k, f, p, threshold, len(tested))
    return worst


def plan_spread(cells: dict, level: float | None = None) -> SpreadPlan:
    """Per key of `cells` (arrays of log estimates, one per repetition): the spread its interval
    uses. Keys consistent with each other share one pooled spread; a key set apart uses its own.
    `level` 0 pools every key (the rule before keys could be set apart)."""
    level = POOLING_TEST_LEVEL if level is None else level
    cells = {k: np.asarray(v, float) for k, v in cells.items()}
    keys = [k for k, c in cells.items() if c.size]
    apart = []
    while level and (found := _most_extreme(cells, keys, level)) is not None:
        apart.append(found)
        keys.remove(found.key)
    pooled = _pool(cells, keys)
    spread = {k: pooled for k in keys}
    spread |= {a.key: _pool(cells, [a.key]) for a in apart}
    return SpreadPlan(spread, tuple(keys), tuple(apart))
