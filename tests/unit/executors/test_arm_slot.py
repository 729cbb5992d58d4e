"""The local executor hands each arm's slot to arm_run as one ArmSlot, and a slot already
measured is skipped without starting an engine."""
import dataclasses
from types import SimpleNamespace

import pytest
from stackbook import arm_run
from stackbook.arm_run import ArmSlot, run_arm
from stackbook.config.protocol import Repetitions
from stackbook.evidence.rundir import ARM_NOTEBOOKS, RunDir
from stackbook.executors import local


class Steps:
    def __init__(self):
        self.done = 0

    def update(self, n):
        self.done += n


class Manifest:
    def __init__(self, arms):
        self.data, self.saves = {}, 0
        self.arms = {a: {"status": "pending", "notebooks": {}} for a in arms}

    def arm(self, name):
        return self.arms[name]

    def save(self):
        self.saves += 1


def test_the_local_executor_gives_each_slot_one_arm_slot(monkeypatch, tmp_path):
    arms = [SimpleNamespace(name=n) for n in ("a", "b")]
    campaign = SimpleNamespace(protocol=SimpleNamespace(repetitions=Repetitions(min=2, max=2)))
    manifest = Manifest(["a", "b"])
    run = SimpleNamespace(campaign=campaign, run_dir=RunDir(tmp_path), resolved=tmp_path / "c.yaml",
                          manifest=manifest, steps=Steps(), progress=False, log=print)
    slots = []
    monkeypatch.setattr(local, "run_arm", slots.append)
    monkeypatch.setattr(local, "rewrite_passports", lambda run, arms: None)
    local.LocalExecutor().run_arms(run, arms)
    assert [(s.arm.name, s.repetitions) for s in slots] == [("a", [0]), ("b", [0]), ("b", [1]), ("a", [1])]
    first = slots[0]
    assert (first.campaign, first.run_dir, first.resolved, first.save, first.steps, first.progress) == (
        campaign, run.run_dir, tmp_path / "c.yaml", manifest.save, run.steps, False)
    assert first.entry is manifest.arms["a"] and manifest.arms["a"]["placement"]["executor"] == "local"
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.arm = arms[1]


def test_a_slot_already_measured_is_skipped_without_an_engine(monkeypatch, tmp_path):
    monkeypatch.setattr(arm_run, "serving_for", lambda *a, **k: pytest.fail("an engine was asked for"))
    protocol = SimpleNamespace(repetitions=Repetitions(min=1))
    campaign = SimpleNamespace(protocol_for=lambda arm: protocol)
    entry = {"status": "complete", "repetitions_done": [0]}
    steps = Steps()
    run_arm(ArmSlot(campaign, SimpleNamespace(name="a"), RunDir(tmp_path), tmp_path / "c.yaml", entry,
                    lambda: None, steps, False, print, repetitions=[0]))
    assert steps.done == len(ARM_NOTEBOOKS) + 1 and not RunDir(tmp_path).arm("a").exists()
    assert entry == {"status": "complete", "repetitions_done": [0]}
