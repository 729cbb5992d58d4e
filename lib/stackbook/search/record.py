"""The search's record: one typed line per step in `search.jsonl`, appended as each step ends,
so an interrupted search resumes where it stopped and a report is rebuilt from the lines alone."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from stackbook.engines.knobs import Layer, Value
from stackbook.search.step import Candidate, Judgement, Point

FORMAT = "stackbook-search-step/1"


class StepRecord(BaseModel):
    """One step: the incumbent measured (`baseline`), an A/A change judged (`control`), a
    candidate judged (`candidate`), or the end (`stop`)."""
    model_config = ConfigDict(frozen=True)

    format: str = FORMAT
    index: int
    kind: Literal["baseline", "control", "candidate", "stop"]
    hypothesis: str
    bottleneck_before: Layer | None = None
    change: Candidate | None = None             # the knob change and the model's gain with its error
    control_knob: str | None = None
    control_value: Value | None = None
    judgement: Judgement | None = None          # the measured gain with its interval
    incumbent_rounds: list[float] = []           # goodput per round, incumbent and candidate
    candidate_rounds: list[float] = []
    accepted: bool = False
    incumbent_after: dict[str, Value]
    points_after: list[Point]                    # the incumbent's points after the step
    bottleneck_after: Layer | None = None
    tried_after: list[tuple[str, str]] = []      # (knob, repr(value)) rejected from this incumbent
    spent_s: float = 0.0                         # measurement seconds, this step and all before it
    stop_reason: str | None = None


def append(path: Path, record: StepRecord) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(record.model_dump_json() + "\n")
        f.flush()


def read(path: Path) -> list[StepRecord]:
    """The steps written so far; a last line cut short by an interruption is dropped from the
    file too, so the next step is appended on a line of its own."""
    if not path.exists():
        return []
    out = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        try:
            out.append(StepRecord.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError):
            if n == len(lines) - 1:
                path.write_text("".join(x + "\n" for x in lines[:-1]), encoding="utf-8")
                break
            raise ValueError(
                f"{path}: line {n + 1} is not a search step; move the file aside to start afresh"
            ) from None
    return out
