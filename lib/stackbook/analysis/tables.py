"""Tables as a reader sees them: HTML with the unit in every column name and numbers rounded to
what the measurement supports. The notebooks display `readable(frame)`; the frame itself stays
the data (analysis.json and the tests use it unrounded)."""
from __future__ import annotations

import hashlib
import html
import json
import math
import numbers
import re

import pandas as pd

from stackbook.measure.metric_definitions import acronyms, columns

# Suffix of a data column -> its unit, longest first so "_tok_s" wins over "_s".
UNITS = (("_tok_s", "tok/s"), ("_rps", "req/s"), ("_gib", "GiB"), ("_bytes", "bytes"), ("_ms", "ms"),
         ("_s", "s"))
STATISTICS = {"p50", "p90", "p95", "p99", "mean", "std", "min", "max", "ci95", "count"}
ACRONYMS = {**acronyms(), "slo": "SLO", "kv": "KV"}
FRACTIONS = {"slo_attainment": "fraction", "failed_fraction": "fraction"}
NUMERIC_TEXT = re.compile(r"[-+]?[\d,]*\.?\d+%?|–")
DIGEST = re.compile(r"[0-9a-f]{32,}")  # a sha256 or similar: shown as its first 12 characters
CELL_CHARS = 60  # longer structured values are cut, the whole kept for the hover


def short_cell(v) -> tuple[str, str | None]:
    """A cell as shown, and the whole value where the shown one is shorter (for the hover):
    digests as their first 12 characters, dicts and lists as compact `key: value` text."""
    if isinstance(v, (dict, list, tuple)):
        full = json.dumps(v, default=str)
        text = (", ".join(f"{k}: {x}" for k, x in v.items()) if isinstance(v, dict)
                else ", ".join(map(str, v)))
        text = DIGEST.sub(lambda m: m.group(0)[:12] + "…", text)
        return (text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + "…"), full
    if isinstance(v, str) and DIGEST.search(v):
        return DIGEST.sub(lambda m: m.group(0)[:12] + "…", v), v
    return format_number(v), None


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
    """The frame as text: columns (and index names) titled with units, every cell rounded,
    digests and structured values shortened."""
    out = frame.rename(columns=column_title).map(lambda v: short_cell(v)[0])
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
        hover = self.frame.rename(columns=column_title).map(lambda v: short_cell(v)[1])
        hover.index = self.text.index
        shown = self.text.copy()
        for col in shown.columns:  # the whole value on hover, where the cell shows less
            full = hover[col]
            shown[col] = [f'<span title="{html.escape(f)}">{html.escape(t)}</span>' if isinstance(f, str)
                          else html.escape(t)
                          for t, f in zip(shown[col], full)]
        styler = shown.style.map(
            lambda v: f"text-align: {'right' if NUMERIC_TEXT.fullmatch(str(v)) else 'left'}")
        if isinstance(self.frame.index, pd.RangeIndex):
            styler = styler.hide(axis="index")
        if self.caption:
            styler = styler.set_caption(self.caption)
        # pandas names a table's styles by a random id: one from the content keeps a re-rendered page
        # unchanged where its tables are
        styler = styler.set_uuid(hashlib.sha256(shown.to_json().encode()).hexdigest()[:8])
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


# The side-by-side points in three tables a window can hold: what the point is, its latencies,
# its throughput; each keyed by arm and load.
SIDE_BY_SIDE = {
    "Points: status and size": ("label", "status", "discarded", "discard_rule", "completed"),
    "Latency (ms)": columns(("ttft_ms", "p50", "p99", "mean", "ci95"), ("tpot_ms", "p50", "mean", "ci95"),
                            ("e2e_ms", "p50", "p95", "p99", "mean", "ci95")),
    "Throughput and SLO": ("output_throughput_tok_s", "request_throughput_rps", "goodput_rps", "slo_attainment",
                           "failed_fraction"),
}


def side_by_side(frame: pd.DataFrame) -> list[Table]:
    """The comparison's points split into tables that fit the page, each keyed by arm and load;
    columns the frame has that no group names go to the last."""
    if frame.empty:
        return []
    key = [c for c in ("arm", "load", "repetition") if c in frame]
    named = {c for cols in SIDE_BY_SIDE.values() for c in cols} | set(key) | {"concurrency", "rate"}
    groups = {title: [c for c in cols if c in frame] for title, cols in SIDE_BY_SIDE.items()}
    groups["Throughput and SLO"] += [c for c in frame.columns if c not in named]
    return [Table(frame[key + cols], caption) for caption, cols in groups.items() if cols]
