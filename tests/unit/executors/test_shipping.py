"""An arm folder's way home: packed with the node's staging location rewritten to the run
directory's own relative path, hashed as shipped, and unpacked in place of the folder."""
import hashlib
import json

from stackbook.evidence.rundir import RunDir
from stackbook.executors.shipping import StagedRun, pack_arm, unpack_arm
from stackbook.locations import symbolic


def test_staged_arm_comes_home_relocated(tmp_path):
    staged = StagedRun.create("outputs/c/r1", "name: c\n", "a", None)
    try:
        arm = staged.run.arm("a").create()
        nb = {"metadata": {"papermill": {"parameters": {"run_dir": str(staged.run),
                                                       "campaign_file": str(staged.run.campaign_resolved)}}}}
        arm.notebook("10_sizing").write_text(json.dumps(nb))
        arm.engine_log.write_text(f"log at {symbolic(arm.engine_log)}\n")
        arm.requests_sent.write_bytes(b"\x1f\x8b binary")
        packed = pack_arm(arm, staged.relocation)
    finally:
        staged.remove()
    assert not staged.root.exists()
    home = RunDir(tmp_path / "outputs/c/r1").arm("a")
    home.create()
    (home / "stale.txt").write_text("from an earlier attempt")
    unpack_arm(packed, home)
    params = json.loads(home.notebook("10_sizing").read_text())["metadata"]["papermill"]["parameters"]
    assert params == {"run_dir": "outputs/c/r1", "campaign_file": "outputs/c/r1/campaign.resolved.yaml"}
    assert home.engine_log.read_text() == "log at outputs/c/r1/arms/a/engine.log\n"
    assert home.requests_sent.read_bytes() == b"\x1f\x8b binary"
    assert not (home / "stale.txt").exists()
    assert packed.sha256["10_sizing.ipynb"] == hashlib.sha256(home.notebook("10_sizing").read_bytes()).hexdigest()
    assert sorted(p.name for p in home.path.parent.iterdir()) == ["a"]


def test_prior_folder_is_staged_for_resume(tmp_path):
    home = RunDir(tmp_path / "outputs/c/r2").arm("a").create()
    home.requests.write_text('{"id": 1}\n')
    staged = StagedRun.create("outputs/c/r2", "name: c\n", "a", pack_arm(home))
    try:
        assert staged.run.arm("a").requests.read_text() == '{"id": 1}\n'
        assert staged.run.campaign_resolved.read_text() == "name: c\n"
        assert str(staged.run).endswith("/outputs/c/r2")
    finally:
        staged.remove()
