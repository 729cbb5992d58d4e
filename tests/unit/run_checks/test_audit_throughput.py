"""The audit and the workload's throughput: a point recorded while its throughput counted the
sentinels is recomputed over the workload alone and listed apart with both figures; a point that
states the sentinels' own figures is compared like any other."""
import json
import shutil

from stackbook.run_checks.audit import audit_run


def test_a_throughput_that_counted_its_sentinels_is_listed_apart_and_a_new_one_compared(tmp_path):
    run = tmp_path / "capacity"
    shutil.copytree("outputs/capacity/reference", run)
    results = run / "arms" / "llama-cpp" / "results.json"
    data = json.loads(results.read_text())
    for point in data["sweep"]["points"].values():  # as a point recorded before sentinels were counted apart
        for key in ("sentinel_requests", "sentinel_throughput_rps", "sentinel_output_throughput_tok_s"):
            point.pop(key, None)
    workload = data["sweep"]["points"]["c1-r0"]["output_throughput_tok_s"]  # the workload's alone, as recorded now
    data["sweep"]["points"]["c1-r0"]["output_throughput_tok_s"] = 29.99  # the figure stored then
    results.write_text(json.dumps(data))
    audit = audit_run(run)
    field = "arms/llama-cpp/results.json: sweep.points.c1-r0.output_throughput_tok_s"
    assert f"{field} (counted with the point's sentinels: stored 29.99, the workload's alone {workload:.4g})" \
        in audit.one_sided
    assert not [d for d in audit.disagreements if d.file.endswith("results.json")
                and d.field.endswith("output_throughput_tok_s")]
    assert "whose throughput counted their sentinels" in audit.checks["points"]
    data["sweep"]["points"]["c1-r0"]["sentinel_requests"] = 5   # as a run that counts them apart states
    results.write_text(json.dumps(data))
    again = audit_run(run)
    assert [(d.stored, round(d.recomputed, 2)) for d in again.disagreements
            if d.field == "sweep.points.c1-r0.output_throughput_tok_s"] == [(data["sweep"]["points"]["c1-r0"][
                "output_throughput_tok_s"], round(workload, 2))]
