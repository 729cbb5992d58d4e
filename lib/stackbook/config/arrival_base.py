"""What every arrival pattern is: its load levels, the plan a point is sent by, and what it says
of its own prompts (lengths, blocks, sessions) where it fixes them. The patterns themselves are in
config.arrival_patterns and config.trace_replay."""
from __future__ import annotations

from typing import ClassVar, NamedTuple, Protocol, TypedDict

from stackbook.config.strict import Strict
from stackbook.loadgen.load_point import Load
from stackbook.loadgen.plans import OpenPlan, PointPlan


class PointCounts(Protocol):
    """What a pattern reads of the campaign's protocol (config.protocol.Protocol): the requests a
    point measures and the warm-up before them. Named here so that the patterns, below the
    protocol, do not import it."""
    requests_per_point: int
    warmup_requests: int

class LoadLevel(TypedDict, total=False):
    """One point of the sweep, as its records carry it: `level` names it; the other keys say
    which load it is (a closed loop's concurrency, an open loop's rate, or a trace)."""
    level: str
    concurrency: int
    rate: float
    trace: str
    speedup: float


class ArrivalLaw(NamedTuple):
    """What the open-queue formulas need to know of an arrival pattern: its name as a reader sees
    it, the squared CV its schedule draws gaps from (None for a trace: its own), and whether the
    arrivals are Poisson, the one case Pollaczek-Khinchine assumes."""
    kind: str
    scheduled_scv: float | None
    poisson: bool


class ArrivalPattern(Strict):
    kind: str  # each pattern narrows it to its own tag; declared here so dumps list it first
    plan_type: ClassVar[type] = OpenPlan  # the plan its points are sent by

    @property
    def judged_plan(self) -> type:
        """The plan kind whose rule judges this pattern's points (loadgen.plans: load_validity)."""
        return self.plan_type

    def point_plan(self, level: LoadLevel, prompts: int, seed: int, cooldown: int) -> PointPlan:
        """How this level's `prompts` prompts are sent (the last `cooldown` after the measured)."""
        return self.plan_type(self.schedule(level, prompts, seed), cooldown)

    def load_words(self) -> str:
        """The load in the report's question, where its levels are neither clients nor rates."""
        levels = self.load_levels()
        return f"{self.kind} load ({len(levels)} level{'s' if len(levels) != 1 else ''})"

    def delivered_load(self, point: dict) -> float | None:
        """The load a point delivered, as fairness holds it equal across arms: the achieved send
        rate of a schedule (the engine's replies cannot change it)."""
        return point.get("achieved_rate_rps")

    def prompt_seed(self, level: LoadLevel, seed: int) -> int:
        """The seed of this level's synthetic prompts, from the repetition's seed."""
        return seed

    def prompt_lengths(self, level: LoadLevel) -> list[tuple[int, int]] | None:
        """(prompt, output) tokens of each prompt where the pattern fixes them (a trace); None
        where the workload decides, and gating sentinels are mixed among the prompts."""
        return None

    def prompt_blocks(self, level: LoadLevel) -> tuple[int, list[tuple[int, ...]]] | None:
        """(block tokens, each prompt's block ids) where the pattern records its prompts' blocks
        (a block-hashed trace): identical ids make identical text, so the reuse it implies is real."""
        return None

    def implied_reuse(self) -> dict | None:
        """The prefix reuse the pattern's own prompts imply (loadgen.trace_formats.implied_reuse),
        where it records their blocks."""
        return None

    def recorded_messages(self, level: LoadLevel) -> list[list[dict]] | None:
        """Each prompt's chat messages where the pattern replays recorded content (a request log);
        None where prompts are synthesized."""
        return None

    def content_is_private(self) -> bool:
        """Whether what is sent and answered must stay out of the outputs (a log's own content,
        unless the campaign keeps it): bodies are then stored as digests and replies as lengths."""
        return False

    def evidence(self) -> dict:
        """What the passport records of the pattern's source beside its settings (a trace's digest)."""
        return {}

    def session_steps(self) -> list[tuple[str | None, int]] | None:
        """Each prompt's (session, turn) where the pattern replays recorded sessions; None otherwise."""
        return None

    def session_links(self) -> list[tuple[tuple[str, int] | None, tuple[str, ...]]] | None:
        """Each prompt's (the (session, turn) whose reply starts its session, the sessions whose last
        reply it waits for) where the pattern replays an agent trace's subagents; None otherwise."""
        return None

    def arrival_law(self) -> ArrivalLaw | None:
        """The open queue's arrival law; None for a closed loop: its replies, not a clock, decide
        when requests arrive, so it is a closed network (queueing.mva), not an open queue."""
        return None

    def load_levels(self) -> list[LoadLevel]:
        """One entry per load level, in sweep order."""
        raise NotImplementedError

    def loads(self) -> list[Load]:
        """The load levels as typed loads, in sweep order."""
        return [Load.of(level) for level in self.load_levels()]

    def cooldown_requests(self, level: LoadLevel, protocol: PointCounts) -> int:
        """Requests sent after the measured ones so the last measured request still runs under
        the configured load."""
        return 0

    def load_refusal(self, measured_requests: int) -> str | None:
        """Why `measured_requests` per point cannot hold this pattern's load under the load rule
        (measure.validity), before anything is sent; None when they can."""
        return None

    def narrow_loads(self, measured_requests: int) -> list[str]:
        """Loads that `measured_requests` per point hold only narrowly: the window's edges use
        most of the tolerance, so chance decides whether the point is kept."""
        return []

    def prompts_at(self, level: LoadLevel, protocol: PointCounts) -> int:
        """Prompts sent at this level (conversations, in a multi-turn workload): warm-up,
        measured and cool-down."""
        return protocol.warmup_requests + protocol.requests_per_point + self.cooldown_requests(level, protocol)

    def measured_at(self, level: LoadLevel, protocol: PointCounts) -> int:
        """Prompts measured at this level (a trace measures its own rows)."""
        return protocol.requests_per_point

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float] | None:
        """Send offsets (seconds from the start of the point) of `n` prompts, reproducible from
        `seed`; None when the replies, not a clock, decide when the next one goes."""
        return None

    def longest_request_tokens(self) -> int | None:
        """The longest request (prompt + output) the pattern itself fixes; None when the
        workload decides the lengths."""
        return None

    def over_context(self, context_length: int) -> str | None:
        """Why the pattern's own requests do not fit `context_length`; None where they do (or
        where the workload decides the lengths)."""
        return None
