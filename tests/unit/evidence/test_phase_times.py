"""Where a run's time went, from its manifest: each phase summed over arms and repetitions, the
rest of the wall time named as such, and runs recorded before each start was kept still read."""
from stackbook.evidence.phase_times import phase_line, phase_times


def manifest(**arm_extra):
    arm = {"engine_starts": 2, "engine_ready_s": 9.0,
           "notebooks": {"10_sizing": {"seconds": 6.0}, "20_canaries": {"seconds": 50.0},
                         "30_load_sweep": {"seconds": 70.0}},
           "repetition_log": {"0": {"sweep_seconds": 66.0, "engine_ready_s": 10.0},
                              "1": {"sweep_seconds": 70.0, "engine_ready_s": 9.0}}} | arm_extra
    return {"created_unix": 1000.0, "finished_unix": 1600.0, "analysis": {"seconds": 12.0},
            "arms": {"a": arm, "b": arm}}


def test_each_phase_is_summed_over_arms_and_repetitions():
    t = phase_times(manifest())
    assert t == {"engine starts": 38.0, "sizing": 12.0, "canaries": 100.0, "sweeps": 272.0, "analysis": 12.0,
                 "other": 166.0, "wall": 600.0}
    assert phase_line(t) == ("time: 10.0 min in all: engine starts 38 s, sizing 12 s, canaries 1.7 min, "
                             "sweeps 4.5 min, analysis 12 s, other 2.8 min")


def test_an_older_run_counts_its_last_start_once_per_start():
    m = manifest(repetition_log={"0": {"sweep_seconds": 66.0}, "1": {"sweep_seconds": 70.0}})
    assert phase_times(m)["engine starts"] == 2 * 2 * 9.0


def test_an_unfinished_run_has_no_wall_time():
    m = manifest()
    del m["finished_unix"]
    t = phase_times(m)
    assert "wall" not in t and "other" not in t and phase_line(t).startswith("time: engine starts")
