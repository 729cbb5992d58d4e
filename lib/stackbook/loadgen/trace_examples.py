"""Small example traces, one per format (loadgen.trace_formats), written from a seed so the
committed copies under campaigns/traces/ can be made again byte for byte: no download. They are
shaped to fit the embedded model (prompts under 2,048 tokens): a steady chat trace in the
plain, Azure and BurstGPT formats, and an agentic one in Mooncake's, where each session's steps
re-send its growing context and every session opens with the same system block; and request logs
with content: agent sessions logged as OpenAI chat requests (a shared system prompt, each step
re-sending the session so far), and ShareGPT conversations. Their text is words drawn from a seed:
nobody's data."""
from __future__ import annotations

import csv
import io
import json
import random
from datetime import datetime, timedelta
from pathlib import Path

from stackbook.loadgen.trace_formats import MOONCAKE_BLOCK_TOKENS

EXAMPLES_DIR = Path("campaigns/traces")
SEED = 20261202
START = datetime(2026, 12, 1, 9, 0, 0)


def _chat(n: int = 24) -> list[tuple[float, int, int]]:
    """(seconds from start, prompt tokens, output tokens): Poisson arrivals at 1 req/s."""
    rng, t, out = random.Random(SEED), 0.0, []
    for _ in range(n):
        t += rng.expovariate(1.0)
        out.append((round(t, 3), rng.randint(64, 400), rng.randint(8, 48)))
    return out


def plain() -> str:
    rows = [{"timestamp_s": t, "prompt_tokens": p, "output_tokens": o} for t, p, o in _chat()]
    return "".join(json.dumps(r) + "\n" for r in rows)


def azure() -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    for t, p, o in _chat():
        stamp = (START + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"  # the trace's 7 digits
        w.writerow([stamp, p, o])
    return buf.getvalue()


def burstgpt() -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"])
    for i, (t, p, o) in enumerate(_chat()):
        o = 0 if i == 5 else o  # one request that failed in the trace (no response): left out on reading
        w.writerow([t, "ChatGPT", p, o, p + o, "Conversation log"])
    return buf.getvalue()


def mooncake(sessions: int = 4, steps: int = 3) -> str:
    """Agent sessions: a shared system block (id 0); step k re-sends the session's k - 1 full
    blocks so far and ends in a partial block of its own (a new id each step: a partial block is
    not the full block it grows into)."""
    rng, rows, next_id = random.Random(SEED + 1), [], 1
    for s in range(sessions):
        t = s * 2000 + rng.randint(0, 500)  # ms
        full: list[int] = []
        for _ in range(steps):
            tail = rng.randint(64, MOONCAKE_BLOCK_TOKENS - 1)
            rows.append({"timestamp": t, "input_length": (1 + len(full)) * MOONCAKE_BLOCK_TOKENS + tail,
                         "output_length": rng.randint(16, 48), "hash_ids": [0, *full, next_id]})
            full.append(next_id + 1)  # the context grows by one full block before the next step
            next_id += 2
            t += rng.randint(800, 2500)  # think time between steps
    rows.sort(key=lambda r: r["timestamp"])
    return "".join(json.dumps(r) + "\n" for r in rows)


WORDS = ("river", "lantern", "copper", "meadow", "signal", "harbor", "canvas", "orbit", "willow", "quartz", "bridge",
         "ember", "summit", "pocket", "garden", "circuit", "falcon", "velvet", "anchor", "prairie", "tunnel", "mosaic")


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


SYSTEM = ("You are a planning agent. Read the task, list the steps, call no tools, and answer in short "
          "numbered lines. " + _text(random.Random(SEED + 2), 60))


def openai_log(sessions: int = 4, steps: int = 3) -> str:
    """Agent sessions logged as chat requests: each step re-sends the shared system prompt, the
    session's earlier steps and their replies, and a new instruction; think time between steps."""
    rng, rows = random.Random(SEED + 3), []
    for s in range(sessions):
        t = 1796200000.0 + s * 2.0 + rng.random()
        messages = [{"role": "system", "content": SYSTEM}]
        for _ in range(steps):
            messages.append({"role": "user", "content": f"Step: {_text(rng, rng.randint(20, 60))}"})
            reply = rng.randint(12, 32)
            rows.append({"timestamp": round(t, 3), "session_id": f"agent-{s}",
                         "body": {"model": "logged-model", "messages": list(messages), "max_tokens": 48},
                         "response": {"usage": {"completion_tokens": reply}}})
            messages.append({"role": "assistant", "content": _text(rng, reply)})
            t += rng.uniform(0.8, 2.5)
    rows.sort(key=lambda r: r["timestamp"])
    return "".join(json.dumps(r) + "\n" for r in rows)


def sharegpt(conversations: int = 6) -> str:
    """ShareGPT conversations (one JSON array): two or three human turns, each answered."""
    rng, rows = random.Random(SEED + 4), []
    for c in range(conversations):
        turns = []
        for _ in range(rng.randint(2, 3)):
            turns.append({"from": "human", "value": _text(rng, rng.randint(15, 50))})
            turns.append({"from": "gpt", "value": _text(rng, rng.randint(10, 30))})
        rows.append({"id": f"conv-{c}", "conversations": turns})
    return json.dumps(rows, indent=1) + "\n"


EXAMPLES = {"example-stackbook.jsonl": plain, "example-azure.csv": azure, "example-burstgpt.csv": burstgpt,
            "example-mooncake.jsonl": mooncake, "example-openai.jsonl": openai_log, "example-sharegpt.json": sharegpt}
FORMAT_OF = {"example-stackbook.jsonl": "stackbook", "example-azure.csv": "azure",
             "example-burstgpt.csv": "burstgpt", "example-mooncake.jsonl": "mooncake",
             "example-openai.jsonl": "openai", "example-sharegpt.json": "sharegpt"}


def write_examples(directory: Path = EXAMPLES_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in EXAMPLES.items():
        (directory / name).write_text(make())
        written.append(directory / name)
    return written


def _agent_trace(seed: int, trace_id: str) -> dict:
    """One agent session as WEKA/AgentX record it, times absolute: a main agent of five steps
    over a shared system-and-tools prefix (6 blocks of 64 tokens), each step re-sending its context
    and adding to it; after its second step a subagent it waits for (three steps sharing the tools
    blocks, its result then read by the main agent's next step), after its third a subagent launched
    in the background (two steps, never waited for). Each step's server time is recorded
    (api_time), and a tool's time separates a reply from the next step."""
    rng, next_id = random.Random(seed), [7]

    def new(n: int) -> list[int]:
        ids = list(range(next_id[0], next_id[0] + n))
        next_id[0] += n
        return ids

    def step(t: float, context: list[int], model: str) -> dict:
        tail = rng.randint(8, 63)  # the partial last block: its own id, not the full block it grows into
        return {"t": round(t, 3), "type": rng.choice("ns"), "model": model, "in": len(context) * 64 + tail,
                "out": rng.randint(20, 60), "hash_ids": context + new(1), "api_time": round(rng.uniform(1.0, 2.5), 3)}

    def agent(t: float, context: list[int], steps: int, model: str, grow: int) -> tuple[list[dict], float]:
        out = []
        for _ in range(steps):
            context = context + new(grow)
            out.append(step(t, context, model))
            t += out[-1]["api_time"] + round(rng.uniform(0.2, 1.0), 3)
        return out, out[-1]["t"] + out[-1]["api_time"]

    main, context, t, requests = "main-model", list(range(1, 7)), 0.0, []
    for k in range(5):
        context = context + new(rng.randint(6, 9))
        requests.append(step(t, context, main))
        t = requests[-1]["t"] + requests[-1]["api_time"] + round(rng.uniform(0.3, 1.5), 3)
        if k in (1, 2):
            spawn = round(t - 0.2, 3)
            inner, end = agent(spawn + 0.1, [1, 2, 3], 3 if k == 1 else 2, "sub-model", 3)
            waited = k == 1
            requests.append({"t": spawn, "type": "subagent", "agent_id": f"agent_{k}", "subagent_type": "Explore",
                             "status": "completed" if waited else "async_launched",
                             "duration_ms": round((end - spawn) * 1000) if waited else None, "requests": inner,
                             "models": ["sub-model"], "tool_tokens": 192, "system_tokens": 0})
            if waited:  # the main agent reads the subagent's result after it ends
                t = end + round(rng.uniform(0.3, 0.8), 3)
    return {"id": trace_id, "models": [main, "sub-model"], "block_size": 64, "hash_id_scope": "local",
            "tool_tokens": 192, "system_tokens": 192, "requests": requests}


def _relative(entries: list[dict], base: float = 0.0) -> list[dict]:
    """Subagent step times made relative to their spawn, as raw WEKA traces record them."""
    out = []
    for e in entries:
        e = dict(e, t=round(e["t"] - base, 3))
        if e["type"] == "subagent":
            e["requests"] = _relative(e["requests"], base + e["t"])
        out.append(e)
    return out


def weka() -> str:
    """A raw WEKA kv-cache-tester trace: one session object, subagent times from their spawn."""
    trace = _agent_trace(SEED + 5, "session-0")
    return json.dumps(dict(trace, requests=_relative(trace["requests"])), indent=1) + "\n"


def agentx() -> str:
    """Two sessions as AgentX records them, one a line, subagent times from the session's start
    (the first is the WEKA example's session); each trace's hash ids are its own (local scope)."""
    return "".join(json.dumps(_agent_trace(SEED + 5 + k, f"session-{k}")) + "\n" for k in range(2))


EXAMPLES |= {"example-weka.json": weka, "example-agentx.jsonl": agentx}
FORMAT_OF |= {"example-weka.json": "weka", "example-agentx.jsonl": "weka"}
OPTIONS_OF = {"example-weka.json": {"subagent_time": "relative"}}  # what the campaign states of the file
