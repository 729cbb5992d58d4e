"""The hardware bound is measured once per host and run, with repeated trials and an interval,
and every arm of the run reads the same figure."""
from stackbook.evidence.files import read_json
from stackbook.evidence.rundir import RunDir
from stackbook.sizing.hardware import measure_cpu_bandwidth, this_cpu
from stackbook.steps.sizing import run_bandwidth


def test_bandwidth_has_trials_and_a_confidence_interval():
    m = measure_cpu_bandwidth(trials=6, buffer_bytes=8 * 2**20)
    assert m["trials"] == 6 and len(m["trial_bytes_s"]) == 6
    assert m["bandwidth_bytes_s"] > 1e8 and 0 <= m["ci95_bytes_s"] < m["bandwidth_bytes_s"]
    assert min(m["trial_bytes_s"]) <= m["bandwidth_bytes_s"] <= max(m["trial_bytes_s"])


def test_every_arm_of_a_run_uses_the_one_measurement(tmp_path):
    run = RunDir(tmp_path / "run")
    first = run_bandwidth(run)
    assert read_json(run.host)["bandwidth"] == first
    second = run_bandwidth(run)
    assert second == first                               # read back, not measured again
    a, b = this_cpu(bandwidth=first), this_cpu(bandwidth=second)
    assert a.bandwidth == b.bandwidth == first["bandwidth_bytes_s"]
    assert "95% CI, 10 trials" in a.source
