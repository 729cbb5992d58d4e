"""One point's load from several client processes (`protocol.loadgen.processes`).

One Python process holds one interpreter lock: past some rate its event loop cannot send on
time, whatever the engine does. Here the point's requests are dealt round-robin to N processes
(an open loop keeps every request's own deadline; a closed loop gives each process its share of
the concurrency). Every process is started and made ready first, then all are given one start
time on the system-wide monotonic clock (`time.perf_counter()` on Linux and macOS), so their
offsets share one origin; each appends its own raw records and bodies as they complete, and the
sweep merges them into the arm's files after the point. Validity is then computed over the
merged records as for one process.
"""
from __future__ import annotations

import dataclasses
import json
import pickle
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
import psutil

from stackbook.loadgen.drivers import Target, run_closed_loop, run_open_loop
from stackbook.loadgen.http_client import kernel_stamped
from stackbook.loadgen.loop_lag import LoopLag
from stackbook.loadgen.plans import ClosedPlan, PointPlan, SessionPlan
from stackbook.loadgen.session_loop import run_session_loop
from stackbook.loadgen.records import RecordWriter, RequestRecord, read_records
from stackbook.loadgen.sent import SentWriter, read_sent
from stackbook.loadgen.workload import PromptSpec

# A point's clock starts this far ahead: time for the start line to reach every client process
# (after the last said it is ready), or for this process's own event loop to start, before the
# first deadline (a trace's first request is due at 0).
START_MARGIN_S = 0.2
READY_TIMEOUT_S = 120.0


@dataclass
class LengthFields:
    """The engine's length fields per output length, worked out in the sweep's process (a
    client process has no engine adapter: the adapter holds the engine's process)."""
    table: dict

    def __call__(self, n: int) -> dict:
        return self.table[n]


@dataclass
class EngineWatch:
    """Whether the engine process (`pid`) still runs, asked from a client process; an engine
    elsewhere (no pid here) counts as alive, as it does for one process."""
    pid: int | None

    def __call__(self) -> bool:
        if not self.pid:
            return True
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


def portable_target(target: Target, prompts: list[PromptSpec]) -> Target:
    """The target without what cannot leave this process: the adapter's length rule becomes a
    table of every length the prompts ask for; bodies are written by the client process itself."""
    lengths = {n for p in prompts for n in (p.output_tokens, *(f[2] for f in p.follow_ups)) if n is not None}
    length_for = LengthFields({n: target.length_for(n) for n in lengths}) if target.length_for else None
    return dataclasses.replace(target, length_for=length_for, on_send=None)


def deal(n: int, weights: list[int]) -> list[list[int]]:
    """Positions 0..n-1 dealt round-robin to processes in proportion to their weights (a closed
    loop's clients per process; 1 each in an open loop), so each process's share spreads over the
    whole point and lasts as long as the others'."""
    slots = [k for k, w in enumerate(weights) for _ in range(w)]
    out: list[list[int]] = [[] for _ in weights]
    for i in range(n):
        out[slots[i % len(slots)]].append(i)
    return out


def part_path(parts_dir: Path, k: int, name: str) -> Path:
    """A file of client process k among the parts (its records, bodies, share and error output)."""
    return parts_dir / f"p{k}.{name}"


@dataclass
class Share:
    """What one client process sends (its part of the point's plan), and where it writes."""
    plan: PointPlan
    target: Target
    tokenizer: object
    prompts: list[PromptSpec]
    positions: list[int]
    total: int
    warmup: int
    base: dict
    records_path: str
    sent_path: str
    engine_pid: int | None = None


def shares_for(plan: PointPlan, target: Target, prompts: list[PromptSpec], tokenizer, *,
               processes: int, parts_dir: Path, warmup: int, base: dict,
               engine_pid: int | None = None) -> list[Share]:
    """The point cut into one share per process, each with its part of the plan (a closed loop
    never gets more processes than its concurrency: a process with no client would send nothing)."""
    clients = plan.client_weights(processes)
    portable = portable_target(target, prompts)
    out = []
    for k, positions in enumerate(deal(len(prompts), clients)):
        out.append(Share(
            plan=plan.share(positions, clients[k]), target=portable, tokenizer=tokenizer,
            prompts=[prompts[i] for i in positions], positions=positions, total=len(prompts), warmup=warmup,
            base=base, records_path=str(part_path(parts_dir, k, "requests.jsonl")),
            sent_path=str(part_path(parts_dir, k, "requests_sent.jsonl.gz")), engine_pid=engine_pid))
    return out


def run_plan(plan: PointPlan, target: Target, prompts: list[PromptSpec], tokenizer, **common) -> list[RequestRecord]:
    """Send prompts by a plan from this process's event loop: a closed loop's clients, or each
    prompt at its deadline (an open loop, a trace), or a trace's sessions each as its own closed loop."""
    if isinstance(plan, SessionPlan):
        return run_session_loop(target, prompts, tokenizer, plan=plan, **common)
    if isinstance(plan, ClosedPlan):
        return run_closed_loop(target, prompts, tokenizer, concurrency=plan.concurrency, cooldown=plan.cooldown,
                               **common)
    return run_open_loop(target, prompts, tokenizer, schedule=plan.schedule, cooldown=plan.cooldown, **common)


@dataclass
class ClientCost:
    """What the client spent while the point ran: CPU seconds of each client process over
    `wall_s`; `separate` when they were processes of their own (not the sweep's); each process's
    event-loop delay (loadgen.loop_lag) and the point's start (perf_counter: the records' origin)."""
    cpu_s: list[float]
    wall_s: float
    separate: bool = False
    loop_delay: list[dict] = dataclasses.field(default_factory=list)
    start_s: float | None = None
    kernel_stamps: bool = False  # replies stamped with the kernel's receive times (loadgen.stamped_socket)

    def busiest_fraction(self) -> float:
        """The largest share of one core any client process used: the one that lags first."""
        return max(self.cpu_s) / max(1e-9, self.wall_s)

    def elsewhere_s(self) -> float:
        """CPU seconds spent outside the sweep's own process (which it reads itself)."""
        return sum(self.cpu_s) if self.separate else 0.0

    def worst_loop_delay(self) -> dict:
        """Each loop-delay figure at its worst over the processes (the one that stamps latest)."""
        keys = ("loop_delay_ms_p50", "loop_delay_ms_p99", "loop_delay_ms_max")
        return {f"client_{k}": max((d[k] for d in self.loop_delay if d.get(k) is not None), default=None)
                for k in keys}

    def summary(self) -> dict:
        return {"client_processes": len(self.cpu_s), "client_cpu_fraction": round(self.busiest_fraction(), 4),
                "client_cpu_fraction_by_process": [round(c / max(1e-9, self.wall_s), 4) for c in self.cpu_s],
                **self.worst_loop_delay(), "client_kernel_stamps": self.kernel_stamps}


class ClientProcessError(RuntimeError):
    """A client process failed: its own error output is in the message."""


def run_shares(shares: list[Share], parts_dir: Path, progress=None) -> ClientCost:
    """Start one process per share, wait until every one is ready, give all one start time and
    wait for them; the progress bar follows the records they append. Ctrl-C stops them."""
    parts_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    try:
        for k, share in enumerate(shares):
            payload = part_path(parts_dir, k, "share.pickle")
            payload.write_bytes(pickle.dumps(share))
            # Error output goes to a file: a pipe nobody reads could fill and stall the sender.
            with open(part_path(parts_dir, k, "stderr"), "w") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "stackbook.loadgen.client_processes", str(payload)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True))
        deadline = time.monotonic() + READY_TIMEOUT_S
        for k, p in enumerate(procs):
            ready, _, _ = select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = p.stdout.readline().strip() if ready else ""
            if line != "ready":
                why = "did not start" if ready else f"was not ready after {READY_TIMEOUT_S:.0f} s"
                raise ClientProcessError(f"client process {k} {why}: {_tail(p, part_path(parts_dir, k, 'stderr'))}")
        start = time.perf_counter() + START_MARGIN_S
        for p in procs:
            p.stdin.write(f"{start!r}\n")
            p.stdin.flush()
        follow = Follower(shares, progress)
        while any(p.poll() is None for p in procs):
            time.sleep(0.25)
            follow()
        follow()
        costs = []
        for k, p in enumerate(procs):
            out = p.stdout.read().strip().splitlines()
            if p.returncode != 0 or not out:
                raise ClientProcessError(f"client process {k} exited with {p.returncode}: "
                                         f"{_tail(p, part_path(parts_dir, k, 'stderr'))}")
            costs.append(json.loads(out[-1]))
        return ClientCost(cpu_s=[c["cpu_s"] for c in costs], wall_s=max(c["wall_s"] for c in costs), separate=True,
                          loop_delay=[c["loop_delay"] for c in costs], start_s=start)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()


def _tail(p: subprocess.Popen, stderr: Path) -> str:
    """The end of a failed client process's error output (it is stopped first if it still runs)."""
    if p.poll() is None:
        p.kill()
    p.wait()
    try:
        text = stderr.read_text(errors="replace").strip()
    except OSError:
        text = ""
    return text[-1500:] or "(no error output)"


class Follower:
    """Advances the progress bar by the records the processes have appended since it last
    looked (it reads only what is new in each file)."""

    def __init__(self, shares: list[Share], progress):
        self.progress = progress
        self.offsets = {s.records_path: 0 for s in shares}

    def __call__(self) -> None:
        if self.progress is None:
            return
        new = 0
        for path, offset in self.offsets.items():
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                continue
            whole = chunk.rfind(b"\n") + 1  # a line still being written is counted next time
            new += chunk.count(b"\n", 0, whole)
            self.offsets[path] = offset + whole
        if new:
            self.progress.update(new)


def merge_parts(parts_dir: Path, writer: RecordWriter | None, sent_writer: SentWriter | None = None,
                alive=lambda: True) -> list[RequestRecord]:
    """Append every client process's records (in send order) and bodies to the arm's own files,
    then remove the parts. Also run at a sweep's start: parts left by an interrupted point are
    kept that way, as a cut attempt. A transport failure while the engine is gone is its death."""
    if not parts_dir.is_dir():
        return []
    records = sorted((r for f in sorted(parts_dir.glob("p*.requests.jsonl")) for r in read_records(f)),
                     key=lambda r: (r.sent_s, r.request_index, r.turn))
    engine_gone = not alive()
    for r in records:
        if engine_gone and r.error_class in ("transport", "timeout"):
            r.error_class = "engine_died"
        if writer is not None:
            writer.write(r)
    if sent_writer is not None:
        sent = [s for f in sorted(parts_dir.glob("p*.requests_sent.jsonl.gz")) for s in read_sent(f)]
        for s in sorted(sent, key=lambda s: s.sent_s):
            sent_writer.write(s.model_dump())
    shutil.rmtree(parts_dir)
    return records


def send_point(plan: PointPlan, target: Target, prompts: list[PromptSpec], tokenizer, *,
               processes: int, parts_dir: Path, writer: RecordWriter | None, sent_writer: SentWriter | None, base: dict,
               warmup: int, progress=None, alive=lambda: True, engine_pid: int | None = None
               ) -> tuple[list[RequestRecord], ClientCost]:
    """Send one point by its plan from this process (processes = 1: the event loop here) or from
    N client processes; the records come back merged either way, with what the client spent."""
    common = dict(warmup=warmup, base=base)
    if processes == 1:
        cpu0, wall0 = time.process_time(), time.perf_counter() + START_MARGIN_S
        probe = LoopLag()
        recs = run_plan(plan, target, prompts, tokenizer, writer=writer, progress=progress, alive=alive, start=wall0,
                        probe=probe, **common)
        return recs, ClientCost([time.process_time() - cpu0], time.perf_counter() - wall0,
                                loop_delay=[probe.summary()], start_s=wall0,
                                kernel_stamps=kernel_stamped(target.base_url))
    shares = shares_for(plan, target, prompts, tokenizer, processes=processes, parts_dir=parts_dir,
                        engine_pid=engine_pid, **common)
    cost = run_shares(shares, parts_dir, progress)
    cost.kernel_stamps = kernel_stamped(target.base_url)
    return merge_parts(parts_dir, writer, sent_writer, alive), cost


def _client_main(payload: str) -> None:
    """One client process: read its share, say ready, wait for the start time, send, report
    its CPU seconds as one JSON line."""
    share: Share = pickle.loads(Path(payload).read_bytes())
    with RecordWriter(share.records_path) as writer, SentWriter(share.sent_path) as sent:
        target = dataclasses.replace(share.target, on_send=sent.write)
        print("ready", flush=True)
        start = float(sys.stdin.readline())
        cpu0 = time.process_time()
        probe = LoopLag()
        run_plan(share.plan, target, share.prompts, share.tokenizer, warmup=share.warmup, writer=writer,
                 base=share.base, alive=EngineWatch(share.engine_pid), start=start, positions=share.positions,
                 total=share.total, probe=probe)
        cost = {"cpu_s": time.process_time() - cpu0, "wall_s": time.perf_counter() - start,
                "loop_delay": probe.summary()}
    print(json.dumps(cost), flush=True)


if __name__ == "__main__":
    _client_main(sys.argv[1])
