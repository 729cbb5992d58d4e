"""The arm's stages as typed steps: which a slot runs, when a resumed run keeps a notebook, why the
sweep waits for the gate, and what the sweep records of its repetitions."""
import json
from types import SimpleNamespace

from stackbook.arm_stages import STAGES, StageContext, slot_stages
from stackbook.evidence.files import file_sha256
from stackbook.evidence.rundir import ARM_NOTEBOOKS, RunDir


def _ctx(tmp_path, canaries=None, on_hold=False, reps=(0,), done=(), notebooks=None, skip=None):
    arm_dir = RunDir(tmp_path).arm("a").create()
    if canaries is not None:
        arm_dir.results.write_text(json.dumps({"canaries": canaries}))
    arm = SimpleNamespace(name="a", engine=SimpleNamespace(sizing_skip_reason=skip))
    protocol = SimpleNamespace(canaries=SimpleNamespace(run_sweep_on_hold=on_hold))
    return StageContext(arm, arm_dir, {"notebooks": notebooks or {}}, protocol, list(reps), set(done), "fresh")


def test_the_first_slot_runs_every_named_stage_in_order_a_later_one_only_the_sweep():
    assert [s.notebook for s in slot_stages(["sweep", "sizing", "canaries"], True)] == list(ARM_NOTEBOOKS)
    assert [s.name for s in slot_stages(["sizing", "canaries", "sweep"], False)] == ["sweep"]
    assert [s.name for s in slot_stages(["sizing"], False)] == []


def test_the_sweep_waits_for_a_passed_gate_unless_the_protocol_measures_on_hold(tmp_path):
    sweep = STAGES["sweep"]
    held = _ctx(tmp_path, {"verdict": "FAIL", "reason": "2 checks failed"})
    assert sweep.skip_reason(held) == ("canaries FAIL: 2 checks failed; set protocol.canaries.run_sweep_on_hold "
                                       "to measure anyway")
    assert sweep.skip_reason(_ctx(tmp_path / "p", {"verdict": "PASS"})) is None
    assert sweep.skip_reason(_ctx(tmp_path / "h", None, on_hold=True)) is None
    assert sweep.skip_reason(_ctx(tmp_path / "m")).startswith("canaries missing;")
    assert STAGES["sizing"].skip_reason(_ctx(tmp_path / "s", skip="a hosted model")) == "a hosted model"


def test_a_resumed_sweep_is_kept_only_when_this_slot_s_repetitions_are_done(tmp_path):
    out = tmp_path / "30.ipynb"
    out.write_text("{}")
    ok = {"30_load_sweep": {"status": "ok", "sha256": file_sha256(out)}}
    sweep = STAGES["sweep"]
    assert sweep.kept(_ctx(tmp_path, reps=[1], done=[0, 1], notebooks=ok), out)
    assert not sweep.kept(_ctx(tmp_path, reps=[1], done=[0], notebooks=ok), out)
    assert STAGES["canaries"].kept(_ctx(tmp_path, notebooks={"20_canaries": ok["30_load_sweep"]}), out)
    ctx = _ctx(tmp_path / "b", reps=[1], done=[0])
    sweep.finished(ctx, 12.34, {"engine_start": 2, "engine_ready_s": 3.0})
    assert ctx.entry["repetitions_done"] == [0, 1]
    log = ctx.entry["repetition_log"]["1"]
    assert (log["began"], log["engine_start"], log["sweep_seconds"]) == ("fresh", 2, 12.3)
    assert sweep.label(ctx) == "a: 30_load_sweep (repetition 1)"
