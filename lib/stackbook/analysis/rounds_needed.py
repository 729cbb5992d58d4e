"""How many more rounds an undecided comparison needs, at its current estimate and spread.

An interval on one degree of freedom is wide mostly because Student's t is: at 97.5% the t factor
is 25.5 on one degree of freedom and 6.2 on two, so one more round narrows it about fivefold
(and the square root of the rounds adds to that). A reader told "undecided: add repetitions" is
owed the number. The estimate keeps the ratio and the log-scale spread the interval implies, and
finds the fewest added rounds whose interval would clear the margin (ahead) or fit inside it (no
difference); it is an estimate, since the next rounds move the ratio and the spread too."""
from __future__ import annotations

import math

from scipy import stats

MOST_ROUNDS = 20  # beyond this the estimate sits on the margin's edge: no count is worth quoting


def df_per_round(paired: bool, pooled_loads: int) -> int:
    """Degrees of freedom one more round adds: one per pooled load when the rounds pair, one per
    arm and pooled load when the two arms' spreads are taken apart (Welch)."""
    return max(1, pooled_loads) * (1 if paired else 2)


def rounds_to_decide(lo: float, hi: float, min_effect: float, confidence: float, dof: float,
                     rounds: int, df_step: int) -> int | None:
    """The fewest further rounds after which the interval, at today's ratio and spread, lies wholly
    beyond ±min_effect or wholly inside it; None when more than MOST_ROUNDS would be needed."""
    if not (lo and hi and lo > 0 and hi > 0 and dof and dof > 0 and rounds >= 1):
        return None
    centre, half = (math.log(hi) + math.log(lo)) / 2, (math.log(hi) - math.log(lo)) / 2
    edge = math.log(1 + min_effect)
    need = abs(abs(centre) - edge)  # the half-width that would decide it, either way
    if need <= 0:
        return None
    spread = half * math.sqrt(rounds) / float(stats.t.ppf(0.5 + confidence / 2, dof))
    for more in range(1, MOST_ROUNDS + 1):
        df = dof + more * df_step
        if float(stats.t.ppf(0.5 + confidence / 2, df)) * spread / math.sqrt(rounds + more) < need:
            return more
    return None


def undecided_words(lo: float, hi: float, min_effect: float, confidence: float, dof: float | None,
                    rounds: int, df_step: int) -> tuple[str, str]:
    """What an undecided sentence adds: its degrees of freedom (inside the parenthesis) and the
    advice after it, with the rounds that would decide it at this estimate."""
    if not dof:
        return "", "add repetitions"
    degrees = f", on {dof:g} degree{'' if dof == 1 else 's'} of freedom"
    more = rounds_to_decide(lo, hi, min_effect, confidence, dof, rounds, df_step)
    if more is None:
        return degrees, (f"add repetitions (at this estimate even {MOST_ROUNDS} more rounds would not decide it: "
                         "the ratio sits near the margin's edge)")
    return degrees, (f"add repetitions: about {more} more round{'' if more == 1 else 's'} would decide it at this "
                     "estimate")
