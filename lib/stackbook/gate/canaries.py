"""Correctness canaries: a suite as data, run at temperature 0, giving a PASS/HOLD verdict.

No timing counts until the arm's output is shown to be right.
"""
from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field

from stackbook.gate.rate_limit import counting, patient
from stackbook.loadgen.drivers import Target, chat_once
from stackbook.locations import DATA_DIR

DATA = DATA_DIR
GREEDY = {"temperature": 0.0, "top_p": 1.0, "seed": 0}


def greedy_sampling(sampling: dict) -> dict:
    """The engine's sampling fields set to greedy. Only fields the engine's dialect already sends
    are overridden (plus temperature): a field its adapter leaves out stays out (mlx_lm serves a
    request that carries `seed` alone, outside the batch)."""
    return {**sampling, **{k: v for k, v in GREEDY.items() if k in sampling or k == "temperature"}}


class _Check(BaseModel):
    """One canary: how it asks (`messages`, `request_fields`) and how it judges the reply
    (`judge`); checks that need more than one exchange override `run`."""
    model_config = ConfigDict(extra="forbid")
    id: str
    prompt: str = ""
    max_tokens: int = 32
    # The capability the check exercises: what a campaign may declare out of scope (never per
    # engine: the gate is the campaign's, the same for every arm). Defaults to the kind's own.
    capability: str | None = None
    default_capability: ClassVar[str] = "chat"

    @property
    def scope(self) -> str:
        return self.capability or self.default_capability

    def messages(self) -> list[dict]:
        return [{"role": "user", "content": self.prompt}]

    def request_fields(self) -> dict:
        """Fields the request carries beyond the messages (a response format, tools)."""
        return {}

    def ask(self, target: Target, messages: list | None = None, **extra) -> tuple[str | None, dict]:
        """One greedy chat turn; the reply's text (None when there is no reply) and the reply. A
        rate limit is waited out (gate.rate_limit): the check is untimed."""
        t = dataclasses.replace(target, sampling=greedy_sampling(target.sampling),
                                length_fields={"max_tokens": self.max_tokens}, length_for=None)
        reply = patient(lambda: chat_once(t, messages or self.messages(), timeout_s=target.timeout_s, **extra))
        return _text(reply), reply

    def run(self, target: Target, tokenizer=None, context_length: int | None = None) -> dict:
        """Ask once and judge the reply: passed, the output seen and why it failed."""
        text, reply = self.ask(target, **self.request_fields())
        out = {"output": text,
               "finish_reason": (reply.get("choices") or [{}])[0].get("finish_reason") if "choices" in reply else None}
        if text is None:
            return out | {"passed": False, "detail": reply.get("error", "no reply text"),
                          "error_class": reply.get("error_class", "transport"), "refused": reply.get("error")}
        return out | self.judge(text, reply)

    def judge(self, text: str, reply: dict) -> dict:
        """passed and detail (and error_class when the reply broke a format) for one reply."""
        raise NotImplementedError


class Contains(_Check):
    kind: Literal["contains"]
    expect: list[str]
    case_sensitive: bool = False

    def judge(self, text: str, reply: dict) -> dict:
        hay = text if self.case_sensitive else text.lower()
        missing = [e for e in self.expect if (e if self.case_sensitive else e.lower()) not in hay]
        return {"passed": not missing, "detail": f"missing {missing}" if missing else "all expected text present"}


class Regex(_Check):
    kind: Literal["regex"]
    pattern: str

    def judge(self, text: str, reply: dict) -> dict:
        ok = re.search(self.pattern, text) is not None
        return {"passed": ok, "detail": f"pattern {self.pattern!r} {'found' if ok else 'not found'}"}


class JsonSchema(_Check):
    kind: Literal["json_schema"]
    default_capability: ClassVar[str] = "json_schema"
    schema_: dict = Field(alias="schema")

    def request_fields(self) -> dict:
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": self.id, "schema": self.schema_, "strict": True}}}

    def judge(self, text: str, reply: dict) -> dict:
        import jsonschema  # here, not at the top: only the JSON and tool checks need it

        try:
            jsonschema.validate(json.loads(text), self.schema_)
        except json.JSONDecodeError as err:
            # A reply cut at its token bound before the object closed is truncation, not bad JSON.
            cut = (reply.get("choices") or [{}])[0].get("finish_reason") == "length"
            return {"passed": False, "detail": f"not JSON: {err}" + (" (cut at max_tokens)" if cut else ""),
                    "error_class": "length_truncated" if cut else "schema_failure"}
        except jsonschema.ValidationError as err:
            return {"passed": False, "detail": f"schema violation: {err.message}", "error_class": "schema_failure"}
        return {"passed": True, "detail": "parsed and valid against the schema"}


class Determinism(_Check):
    kind: Literal["determinism"]
    default_capability: ClassVar[str] = "determinism"
    repeats: int = 3
    concurrent: bool = True

    def run(self, target: Target, tokenizer=None, context_length: int | None = None) -> dict:
        """The same greedy prompt, sequentially then concurrently: every reply must be identical."""
        def once(_):
            return self.ask(target)
        asked = [once(i) for i in range(self.repeats)]
        if self.concurrent:
            with ThreadPoolExecutor(self.repeats) as pool:  # each thread in this context: its retries tallied
                asked += [f.result() for f in [pool.submit(contextvars.copy_context().run, once, i)
                                               for i in range(self.repeats)]]
        outputs = [text for text, _ in asked]
        distinct = sorted({o for o in outputs if o is not None})
        refused = refusal([reply for _, reply in asked])
        return refused | {"passed": None not in outputs and len(distinct) == 1, "output": outputs[0],
                "detail": f"{len(outputs)} greedy replies ({self.repeats} sequential"
                          f"{', ' + str(self.repeats) + ' concurrent' if self.concurrent else ''}), "
                          f"{len(distinct)} distinct"}


class Exact(_Check):
    kind: Literal["exact"]
    reference: str

    def judge(self, text: str, reply: dict) -> dict:
        ok = text == self.reference
        return {"passed": ok,
                "detail": "identical to the reference" if ok else f"differs from reference {self.reference!r}"}


class ToolCall(_Check):
    """A forced call of a named tool; its arguments must validate against the tool's schema."""
    kind: Literal["tool_call"]
    default_capability: ClassVar[str] = "tool_calls"
    tool: dict
    expect_arguments: dict = Field(default_factory=dict)

    def request_fields(self) -> dict:
        return {"tools": [self.tool],
                "tool_choice": {"type": "function", "function": {"name": self.tool["function"]["name"]}}}

    def judge(self, text: str, reply: dict) -> dict:
        import jsonschema  # here, not at the top: only the JSON and tool checks need it

        name = self.tool["function"]["name"]
        calls = ((reply.get("choices") or [{}])[0].get("message") or {}).get("tool_calls") or []
        if not calls:
            return {"passed": False, "detail": "no tool call in the reply", "error_class": "schema_failure"}
        shown = {"output": json.dumps(calls)[:300]}
        fn = calls[0].get("function", {})
        try:
            args = json.loads(fn.get("arguments") or "{}")
            jsonschema.validate(args, self.tool["function"].get("parameters", {}))
        except (json.JSONDecodeError, jsonschema.ValidationError) as err:
            return shown | {"passed": False, "detail": f"arguments invalid: {str(err)[:200]}",
                            "error_class": "schema_failure"}
        wrong = {k: v for k, v in self.expect_arguments.items() if str(args.get(k, "")).lower() != str(v).lower()}
        ok = fn.get("name") == name and not wrong
        return shown | {"passed": ok,
                        "detail": f"called {fn.get('name')}({args})" + (f", expected {wrong}" if wrong else ""),
                        "error_class": None if ok else "schema_failure"}


class Coding(_Check):
    """The model writes a function; it runs in a subprocess, with a time limit, against asserts."""
    kind: Literal["coding"]
    default_capability: ClassVar[str] = "coding"
    tests: str
    timeout_s: float = 10.0

    def judge(self, text: str, reply: dict) -> dict:
        m = CODE_BLOCK.search(text)
        ok, why = run_code(m.group(1) if m else text, self.tests, self.timeout_s)
        return {"passed": ok, "detail": why}


class MultiTurn(_Check):
    """An answer that depends on an earlier turn of the conversation."""
    kind: Literal["multi_turn"]
    default_capability: ClassVar[str] = "multi_turn"
    history: list[dict]
    expect: list[str]

    def messages(self) -> list[dict]:
        return [*self.history, {"role": "user", "content": self.prompt}]

    def judge(self, text: str, reply: dict) -> dict:
        missing = [e for e in self.expect if e.lower() not in text.lower()]
        return {"passed": not missing, "detail": f"missing {missing}" if missing else "the earlier turn was used"}


class Needle(_Check):
    """A fact hidden at stated depths of filler text of stated lengths: how a context claim is
    verified rather than configured."""
    kind: Literal["needle"]
    default_capability: ClassVar[str] = "long_context"
    needle: str
    question: str
    expect: str
    filler: str = "The sky was clear and the river flowed quietly past the old mill."
    lengths_tokens: list[int] = Field(default_factory=lambda: [256, 1024])
    depths: list[float] = Field(default_factory=lambda: [0.5, 1.0])
    up_to_context: bool = True  # also test at the campaign's context length: verify the claim

    def lengths_for(self, context_length: int | None) -> list[int]:
        """The stated lengths, none beyond what the context can hold, and the context itself."""
        if not context_length:
            return self.lengths_tokens
        room = context_length - self.max_tokens - 64  # chat template and question
        lengths = {min(n, room) for n in self.lengths_tokens}
        if self.up_to_context:
            lengths.add(room)
        return sorted(n for n in lengths if n > 0)

    def prompt_at(self, tokens: int, depth: float, tokenizer=None) -> str:
        """Filler of about `tokens` tokens with the needle at `depth` (0 = start, 1 = end)."""
        per = len(tokenizer.encode(self.filler, add_special_tokens=False).ids) + 1 if tokenizer else 16
        sentences = [self.filler] * max(1, tokens // per)
        sentences.insert(round(depth * len(sentences)), self.needle)
        return "Document:\n" + " ".join(sentences) + f"\n\nQuestion: {self.question}"

    def run(self, target: Target, tokenizer=None, context_length: int | None = None) -> dict:
        """One trial per length and depth; every needle must be found."""
        trials, replies = [], []
        for n in self.lengths_for(context_length):
            for depth in self.depths:
                text, reply = self.ask(target, [{"role": "user", "content": self.prompt_at(n, depth, tokenizer)}])
                replies.append(reply)
                usage = reply.get("usage") or {}
                trials.append({"tokens": usage.get("prompt_tokens", n), "depth": depth,
                               "found": text is not None and self.expect.lower() in text.lower(),
                               "output": (text or reply.get("error", ""))[:120]})
        longest = max((t["tokens"] for t in trials), default=0)
        return refusal(replies) | {"passed": all(t["found"] for t in trials), "output": trials[-1]["output"] if trials
                                   else "",
                "trials": trials, "detail": f"{sum(t['found'] for t in trials)}/{len(trials)} needles found, "
                                            f"longest prompt {longest:,} tokens"}


Check = Annotated[Union[Contains, Regex, JsonSchema, Determinism, Exact, ToolCall, Coding, MultiTurn, Needle],
                  Field(discriminator="kind")]


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid")
    suite: str
    version: int
    checks: list[Check]


def suite_path(name: str) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml"):
        return p
    return DATA / f"canaries-{name}.yaml"


def load_suite(name: str) -> tuple[Suite, str]:
    """The suite and the sha256 of its file (recorded in the passport)."""
    p = suite_path(name)
    if not p.exists():
        known = sorted(x.stem.removeprefix("canaries-") for x in DATA.glob("canaries-*.yaml"))
        raise FileNotFoundError(f"protocol.canaries.suite: no suite {name!r}; known suites: {known}, "
                                "or give a path to a .yaml file")
    raw = p.read_bytes()
    # libyaml's loader where built (the same safe subset, ten times faster): campaigns validate it per arm
    data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return Suite.model_validate(data), hashlib.sha256(raw).hexdigest()


def refusal(replies: list[dict]) -> dict:
    """For a check of several requests: the error class and the first error when no request got
    a reply (so a refused endpoint reads as refused, not as wrong text)."""
    if replies and all(_text(r) is None for r in replies):
        return {"error_class": replies[0].get("error_class", "transport"), "refused": replies[0].get("error")}
    return {}


def _text(reply: dict) -> str | None:
    try:
        return reply["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError):
        return None


CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


def run_code(code: str, tests: str, timeout_s: float) -> tuple[bool, str]:
    """Run model-written code and the asserts in a fresh interpreter, isolated (-I), time-limited."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "candidate.py"
        path.write_text(code + "\n\n" + tests + "\n")
        try:
            r = subprocess.run([sys.executable, "-I", str(path)], cwd=d, capture_output=True, text=True,
                               timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False, f"did not finish within {timeout_s:.0f} s"
    if r.returncode == 0:
        return True, "the asserts passed"
    last = (r.stderr.strip().splitlines() or ["no output"])[-1]
    return False, f"exit {r.returncode}: {last[:200]}"


def out_of_scope_checks(suite: Suite, out_of_scope: dict[str, str]) -> dict[str, str]:
    """Check id -> the campaign's reason, for every check whose capability the campaign declared
    out of scope; a declared capability no check of the suite exercises is refused by name."""
    known = sorted({c.scope for c in suite.checks})
    unknown = sorted(set(out_of_scope) - set(known))
    if unknown:
        raise ValueError(f"protocol.canaries.out_of_scope: {unknown} is not a capability of suite {suite.suite!r}; "
                         f"its capabilities are {known}")
    return {c.id: out_of_scope[c.scope] for c in suite.checks if c.scope in out_of_scope}


def run_check(target: Target, check, out_of_scope: str | None = None, tokenizer=None,
              context_length: int | None = None) -> dict:
    """Run one check; the result says passed, the output seen and why it failed, and how many
    times its requests waited out a rate limit (its detail too, when any did). An out-of-scope
    check still runs (its outcome is reported) but does not gate; `out_of_scope` is the reason."""
    result = {"id": check.id, "kind": check.kind, "capability": check.scope, "prompt": check.prompt,
              "out_of_scope": out_of_scope}
    began = time.monotonic()
    with counting() as tally:
        outcome = check.run(target, tokenizer=tokenizer, context_length=context_length)
    outcome["detail"] = f"{outcome.get('detail', '')}{tally.note()}"
    return result | outcome | tally.fields() | {"seconds": round(time.monotonic() - began,
                                                                 2)}  # where the gate's time goes


def run_suite(target: Target, suite: Suite, out_of_scope: dict[str, str] | None = None, progress=None,
              tokenizer=None, context_length: int | None = None) -> list[dict]:
    """Every check of the suite; `out_of_scope` is the campaign's declaration (capability -> reason)."""
    excluded = out_of_scope_checks(suite, out_of_scope or {})
    out = []
    for check in suite.checks:
        out.append(run_check(target, check, excluded.get(check.id), tokenizer, context_length))
        if progress is not None:
            progress.update(1)
    return out
