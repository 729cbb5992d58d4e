"""The engine's own clock over its slot loop: llama-server built with its step timings times each
pass of its loop in three phases, building the batch (`pre_decode`), the model's forward pass
(`decode`: graph and kernels) and the work after it (`post_decode`: sampling, detokenizing,
sending the tokens), and logs the running means every 5 s while it is busy.

Why: the loop and ggml's thread 0 are one thread, so no CPU counter separates the runtime from
the kernels; the engine's clock does. The share of the loop's time spent outside `decode` over a
point, applied to the CPU seconds the main thread ran in it, is the runtime's seconds; the rest of
the compute process's seconds are the kernels'. The parsing and the arithmetic are pure; the log
is read at the point's edges (`log_size`, `blocks_since`)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

_FIELDS = {"pre": re.compile(r"avg t_pre_decode\s*=\s*(\S+) ms"), "decode": re.compile(r"avg t_decode\s*=\s*(\S+) ms"),
           "post": re.compile(r"avg t_post_decode\s*=\s*(\S+) ms")}
_PASSES = re.compile(r"n_pre_decode\s*=\s*(\d+)")


class LoopTotals(NamedTuple):
    """The loop's totals since the engine started, as one logged block states them."""
    passes: int
    pre_ms: float
    decode_ms: float
    post_ms: float


def _mean(text: str) -> float:
    value = float(text)  # the engine prints nan (or -nan) before its first pass
    return 0.0 if value != value else value


def parse_blocks(text: str) -> list[LoopTotals]:
    """Every complete timing block in a stretch of the log, in order. A block's lines may have
    other threads' lines between them; a block cut off by the stretch's end is left out."""
    blocks, passes, means = [], None, {}
    for line in text.splitlines():
        if m := _PASSES.search(line):
            passes, means = int(m.group(1)), {}
            continue
        for key, pattern in _FIELDS.items():
            if passes is not None and (m := pattern.search(line)):
                means[key] = _mean(m.group(1))
        if passes is not None and len(means) == len(_FIELDS):
            blocks.append(LoopTotals(passes, passes * means["pre"], passes * means["decode"], passes * means["post"]))
            passes, means = None, {}
    return blocks


def log_size(path: Path | None) -> int | None:
    """Where the log ends now (the point's start); None where there is no log."""
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


def blocks_since(path: Path | None, offset: int | None) -> list[LoopTotals]:
    """The timing blocks the engine logged after `offset`."""
    if path is None or offset is None:
        return []
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return parse_blocks(f.read().decode("utf-8", errors="replace"))
    except OSError:
        return []


def main_thread_seconds(before: dict, after: dict) -> float | None:
    """CPU seconds the engine's main threads ran between two process readings (measure.runtime's),
    None where no reading has them (threads unreadable, or a kind that does not read them)."""
    diffs = [a["main_thread_s"] - (before.get("engine", {}).get(pid) or {}).get("main_thread_s", 0.0)
             for pid, a in after.get("engine", {}).items() if "main_thread_s" in a]
    return sum(diffs) if diffs else None


def slot_loop_window(blocks: list[LoopTotals], main_thread_s: float | None, requests: int,
                     source: str = "") -> dict | None:
    """The point's slot loop by the engine's clock: the phases' milliseconds between the first and
    the last block logged inside it, the runtime's share of the loop (pre + post over all three),
    and that share of the main thread's CPU seconds as the runtime's. None where the point logged
    fewer than two blocks (shorter than the engine's 5 s between them) or nothing ran. Pure."""
    if len(blocks) < 2 or main_thread_s is None or not requests:
        return None
    first, last = blocks[0], blocks[-1]
    pre, decode, post = (last.pre_ms - first.pre_ms, last.decode_ms - first.decode_ms, last.post_ms - first.post_ms)
    loop = pre + decode + post
    if last.passes <= first.passes or loop <= 0:
        return None
    share = (pre + post) / loop
    return {"passes": last.passes - first.passes, "pre_decode_ms": round(pre, 3), "decode_ms": round(decode, 3),
            "post_decode_ms": round(post, 3), "runtime_share": round(share, 5),
            "main_thread_s": round(main_thread_s, 4), "runtime_s": round(share * main_thread_s, 5),
            "requests": requests, "source": source}
