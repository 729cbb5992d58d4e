"""Repetitions round by round: the order alternates (or is a seeded shuffle), sequential stopping
adds rounds only while the primary figure is undecided, and the manifest records why it stopped."""
from types import SimpleNamespace

from tqdm import tqdm

from stackbook.arm_run import campaign_steps
from stackbook.config.protocol import Repetitions
from stackbook.executors.rounds import run_rounds


class FakeManifest:
    def __init__(self):
        self.data, self.saves = {}, 0

    def save(self):
        self.saves += 1


def run_with(plan: Repetitions, decided_after: int | None = None):
    arms = [SimpleNamespace(name=n) for n in ("a", "b", "c")]
    run = SimpleNamespace(campaign=SimpleNamespace(protocol=SimpleNamespace(repetitions=plan)),
                          manifest=FakeManifest(), run_dir="run", log=lambda m: None,
                          steps=tqdm(total=campaign_steps(len(arms), plan.min), disable=True))
    slots = []
    looks = []

    def decided(_):
        looks.append(len(slots) // len(arms))
        done = decided_after is not None and len(slots) // len(arms) >= decided_after
        return done, "every comparison decided" if done else "1 comparison(s) undecided"

    run_rounds(run, arms, lambda arm, reps: slots.append((arm.name, reps[0])), decided)
    # The bar's total grew by each round added beyond the minimum: it ends at the steps run.
    rounds = len(run.manifest.data["repetitions"]["rounds"])
    assert run.steps.total == campaign_steps(len(arms), rounds)
    return slots, looks, run.manifest.data["repetitions"]


def test_abba_reverses_the_order_every_round():
    slots, looks, rec = run_with(Repetitions(min=3, max=3))
    assert slots == [("a", 0), ("b", 0), ("c", 0), ("c", 1), ("b", 1), ("a", 1), ("a", 2), ("b", 2), ("c", 2)]
    assert (looks == [] and rec["ran"] == 3
            and rec["stopped"] == "after 3 repetitions: fixed by the protocol (min = max)")
    assert [r["order"] for r in rec["rounds"]] == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"]]


def test_a_seeded_random_order_replays_and_differs_by_seed():
    first, _, _ = run_with(Repetitions(min=4, max=4, order="random", order_seed=7))
    again, _, _ = run_with(Repetitions(min=4, max=4, order="random", order_seed=7))
    other, _, _ = run_with(Repetitions(min=4, max=4, order="random", order_seed=8))
    assert first == again and first != other
    assert sorted(first) == sorted(other)  # every arm once per round either way


def test_sequential_stopping_looks_after_min_and_stops_when_decided():
    slots, looks, rec = run_with(Repetitions(min=2, max=6), decided_after=4)
    assert looks == [2, 3, 4] and len(slots) == 4 * 3
    assert rec["ran"] == 4 and rec["stopped"] == "after 4 repetitions: every comparison decided"


def test_sequential_stopping_ends_at_max_when_never_decided():
    slots, looks, rec = run_with(Repetitions(min=2, max=4))
    assert looks == [2, 3] and rec["ran"] == 4 and rec["stopped"] == "after 4 repetitions: repetitions.max reached"


def test_by_default_one_round_more_than_min_may_run_while_undecided():
    slots, looks, rec = run_with(Repetitions(min=2))
    assert looks == [2] and rec["ran"] == 3 and rec["max"] == 3
    decided, looks, rec = run_with(Repetitions(min=2), decided_after=2)
    assert looks == [2] and rec["ran"] == 2 and rec["stopped"] == "after 2 repetitions: every comparison decided"
    assert Repetitions(min=2).looks == 2


def test_each_slot_revises_the_time_to_go_from_this_hosts_own_seconds(monkeypatch):
    """A plan of 10 s a slot on a host where every slot takes 20 s: after the first slot the time to
    go doubles the plan's; the manifest keeps the plan and every revision, the log prints them."""
    from stackbook.config.estimate import ArmEstimate
    from stackbook.executors import rounds

    clock = iter(float(t) for t in range(0, 1000, 20))
    monkeypatch.setattr(rounds.time, "monotonic", lambda: next(clock))
    arms = [SimpleNamespace(name=n) for n in ("a", "b")]
    lines = []
    plan = {n: ArmEstimate(n, 0, 0, "", per_repetition_s=10.0) for n in ("a", "b")}
    run = SimpleNamespace(
        campaign=SimpleNamespace(name="c", protocol=SimpleNamespace(repetitions=Repetitions(min=2, max=2))),
        manifest=FakeManifest(),
        run_dir="run",
        log=lines.append,
        plan=plan,
        steps=tqdm(total=campaign_steps(2, 2), disable=True),
    )
    run_rounds(run, arms, lambda arm, reps: None, lambda _: (True, ""))
    est = run.manifest.data["time_estimates"]
    assert est[0]["after"] == "the plan" and est[0]["to_go_s"] == rounds.revise(plan, [], [], 0).to_go_s + 40
    # slots a0, b0, b1 then a1: each 20 s on this clock against 10 planned
    assert [e["after"] for e in est[1:]] == ["a, repetition 1", "b, repetition 1", "b, repetition 2"]
    assert [e["to_go_s"] for e in est[1:]] == [15 + 3 * 20, 15 + 2 * 20, 15 + 20]
    assert lines[0].startswith("time to go: about 1.2 min (") and "b not run yet, scaled by 2.00x" in lines[0]


def test_the_estimates_count_the_rounds_the_earlier_run_needed_and_time_start_ups_apart(monkeypatch):
    """The earlier run read for the plan ran 3 rounds of at most 3: the time to go counts 3, not the
    minimum 2. The first slot's sizing and canaries (from its manifest entry) are timed apart, so
    the ratio is the rest of the slot, 70 s over 10 planned, not the whole slot's."""
    from stackbook.config.estimate import ArmEstimate
    from stackbook.executors import rounds

    clock = iter(float(t) for t in range(0, 10000, 100))
    monkeypatch.setattr(rounds.time, "monotonic", lambda: next(clock))
    arms = [SimpleNamespace(name=n) for n in ("a", "b")]
    plan = {n: ArmEstimate(n, 0, 0, "", per_repetition_s=10.0, rounds_before=3) for n in ("a", "b")}
    run = SimpleNamespace(
        campaign=SimpleNamespace(name="c", protocol=SimpleNamespace(repetitions=Repetitions(min=2, max=3))),
        manifest=FakeManifest(), run_dir="run", log=lambda m: None, plan=plan,
        steps=tqdm(total=campaign_steps(2, 2), disable=True))

    def slot(arm, reps):
        entry = run.manifest.data.setdefault("arms", {}).setdefault(arm.name, {})
        entry.update(engine_ready_s=30.0, notebooks={"10_sizing": {"seconds": 5.0}, "20_canaries": {"seconds": 25.0}})

    run_rounds(run, arms, slot, lambda _: (False, "undecided"))
    est = run.manifest.data["time_estimates"]
    assert est[0]["to_go_s"] == rounds.revise(plan, [], [], 0).to_go_s + 6 * 10  # 3 rounds of 2 arms
    # after a's first slot (100 s, 30 of them sizing and canaries): the rest at 7x, b's as a's, 30 s
    assert est[1]["to_go_s"] == 15 + (7 * 10 + 30) + 4 * (7 * 10)
    assert "a 7.00x" in est[1]["basis"]
    assert run.manifest.data["repetitions"]["ran"] == 3
