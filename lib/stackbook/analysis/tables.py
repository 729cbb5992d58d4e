"""Tables as a reader sees them: HTML with the unit in every column name and numbers rounded to
what the measurement supports. The notebooks display `readable(frame)`; the frame itself stays
the data (analysis.json and the tests use it unrounded)."""
from __future__ import annotations

import math
import numbers
import re

import pandas as pd

# Suffix of a data column -> its unit, longest first so "_tok_s" wins over "_s".
UNITS = (("_tok_s", "tok/s"), ("_rps", "req/s"), ("_gib", "GiB"), ("_bytes", "bytes"), ("_ms", "ms"),
         ("_s", "s"))
STATISTICS = {"p50", "p90", "p95", "p99", "mean", "std", "min", "max", "ci95", "count"}
ACRONYMS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E", "slo": "SLO", "kv": "KV"}
FRACTIONS = {"slo_attainment": "fraction", "failed_fraction": "fraction"}
NUMERIC_TEXT = re.compile(r"[-+]?[\d,]*\.?\d+%?|–")


def column_title(name) -> str:
    """`ttft_ms_p50` -> `TTFT p50 (ms)`, `output_throughput_tok_s` -> `output throughput (tok/s)`;
    a name that already reads as words (it has a space, or no underscore) is kept as it is."""
    if not isinstance(name, str) or " " in name or "_" not in name:
        return name
    parts = name.split("_")
    stat = parts.pop() if parts[-1] in STATISTICS and len(parts) > 1 else None
    base, unit = "_".join(parts), FRACTIONS.get(name)
    for suffix, u in UNITS:  # the unit may sit inside the name: decode_tok_s_per_stream
        at = (base + "_").find(suffix + "_", 1)
        if at > 0:
            base, unit = base[:at] + base[at + len(suffix):], u
            break
    words = " ".join(ACRONYMS.get(w, w) for w in base.split("_"))
    if stat:
        words += " ±95% CI" if stat == "ci95" else f" {stat}"
    return f"{words} ({unit})" if unit else words


def format_number(v) -> str:
    """Three significant figures without scientific notation; integers and text as they are."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, bool) or not isinstance(v, numbers.Number):
        return str(v)
    if isinstance(v, numbers.Integral) or float(v).is_integer():
        return f"{int(v):,}"
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def formatted(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as text: columns (and index names) titled with units, every cell rounded."""
    out = frame.rename(columns=column_title).map(format_number)
    if not isinstance(out.index, pd.RangeIndex):
        out.index = [format_number(i) if isinstance(i, numbers.Number) else i for i in out.index]
        out.index.name = column_title(frame.index.name) if frame.index.name else None
    return out


class Table:
    """Displays as an HTML table (numbers right-aligned, text left), and as aligned text where only
    text shows."""

    def __init__(self, frame: pd.DataFrame, caption: str | None = None):
        self.frame = frame
        self.caption = caption
        self.text = formatted(frame)

    def _repr_html_(self) -> str:
        styler = self.text.style.map(
            lambda v: f"text-align: {'right' if NUMERIC_TEXT.fullmatch(str(v)) else 'left'}")
        if isinstance(self.frame.index, pd.RangeIndex):
            styler = styler.hide(axis="index")
        if self.caption:
            styler = styler.set_caption(self.caption)
        return styler.to_html()

    def __repr__(self) -> str:
        return self.text.to_string(index=not isinstance(self.frame.index, pd.RangeIndex))


def readable(frame: pd.DataFrame, caption: str | None = None) -> Table:
    """What a notebook displays for a data frame."""
    return Table(frame, caption)


def readable_or_absent(frame: pd.DataFrame, reason: str, caption: str | None = None):
    """The table, or, when it is empty, one line saying why (its report section is then folded)."""
    from stackbook.report_page import Absent

    return Absent(reason) if frame is None or frame.empty else Table(frame, caption)
