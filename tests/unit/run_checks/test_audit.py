"""`stackbook audit`: a committed run re-checked from its raw records reads consistent, and a
tampered copy fails naming the file and the field (an edited latency, an edited ratio, a deleted
record, swapped passports)."""
import json
import shutil

import pytest
from typer.testing import CliRunner

from stackbook.cli import app
from stackbook.run_checks.audit import audit_run

REFERENCE = "outputs/aa-control/reference"


@pytest.fixture(scope="module")
def copy_of(tmp_path_factory):
    def make(name: str):
        dest = tmp_path_factory.mktemp("audit") / name
        shutil.copytree(REFERENCE, dest)
        return dest
    return make


def fields(audit) -> set[tuple[str, str]]:
    return {(d.file, d.field) for d in audit.disagreements}


def test_a_committed_run_is_consistent_and_the_command_says_so():
    out = CliRunner().invoke(app, ["audit", REFERENCE])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[-1] == f"{REFERENCE}: consistent"
    assert "files: " in out.output and "points: 16 points' figures against requests.jsonl" in out.output


def test_an_edited_latency_is_caught_in_the_records_and_the_point(copy_of):
    run = copy_of("latency")
    path = run / "arms" / "first" / "requests.jsonl"
    lines = path.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if '"phase":"measure"' in line and '"point":"c1-r0"' in line)
    rec = json.loads(lines[i])
    rec["first_token_s"] = rec["first_token_s"] / 10      # a TTFT ten times better than measured
    rec["chunk_times_s"][0] = rec["first_token_s"]
    lines[i] = json.dumps(rec, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    found = fields(audit_run(run))
    assert ("arms/first/requests.jsonl", "sha256") in found
    assert any(f == "arms/first/results.json" and fld.startswith("sweep.points.c1-r0.ttft_ms") for f, fld in found)


def test_an_edited_ratio_in_the_analysis_is_named(copy_of):
    run = copy_of("ratio")
    analysis = json.loads((run / "analysis.json").read_text())
    analysis["decisions"][0]["ratio"] = 1.5
    (run / "analysis.json").write_text(json.dumps(analysis))
    found = fields(audit_run(run))
    assert ("analysis.json", "decisions[0].ratio") in found and ("analysis.json", "sha256") in found


def test_a_deleted_record_changes_the_count(copy_of):
    run = copy_of("deleted")
    path = run / "arms" / "second" / "requests.jsonl"
    lines = path.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if '"phase":"measure"' in line and '"point":"c2-r1"' in line)
    path.write_text("\n".join(lines[:i] + lines[i + 1:]) + "\n")
    found = fields(audit_run(run))
    assert ("arms/second/results.json", "sweep.points.c2-r1.completed") in found


def test_swapped_passports_are_caught_and_the_exit_code_is_one(copy_of):
    run = copy_of("swapped")
    a, b = run / "arms" / "first" / "passport.json", run / "arms" / "second" / "passport.json"
    text_a = a.read_text()
    a.write_text(b.read_text())
    b.write_text(text_a)
    out = CliRunner().invoke(app, ["audit", str(run)])
    assert out.exit_code == 1
    assert "arms/first/passport.json: identity.arm: stored \"second\", recomputed \"first\"" in out.output
    assert out.output.splitlines()[-1].endswith("disagreement(s) or broken invariant(s)")


def test_a_run_without_file_hashes_says_the_check_does_not_apply(copy_of):
    run = copy_of("old")
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["outputs"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    audit = audit_run(run)
    assert audit.checks["files"].startswith("not applied: the manifest holds no file hashes")
    assert audit.consistent


def test_not_a_run_is_a_clear_error(tmp_path):
    out = CliRunner().invoke(app, ["audit", str(tmp_path)])
    assert out.exit_code != 0 and "not a run directory" in out.output and "Traceback" not in out.output


def test_a_field_only_one_version_writes_is_listed_apart_not_compared():
    """A run analysed by an older version lacks the fields a newer one adds (and may hold ones it
    dropped): the audit names each once, by field, and compares the rest."""
    from stackbook.run_checks.audit import Audit, _diff

    audit = Audit("r")
    stored = {"rows": [{"a": 1.0}, {"a": 2.0, "old": "x"}]}
    again = {"rows": [{"a": 1.0, "new": ""}, {"a": 2.5, "new": ""}]}
    _diff("analysis.json", "", stored, again, audit)
    assert audit.one_sided == ["analysis.json: rows[].new (only recomputed (a field this version adds))",
                               "analysis.json: rows[].old (only in the record)"]
    assert [(d.field, d.stored, d.recomputed) for d in audit.disagreements] == [("rows[1].a", 2.0, 2.5)]


def test_an_edited_load_check_figure_is_caught_where_the_run_states_how_it_counted(tmp_path):
    """wrong-rope states which requests its load check counted, so its in-flight and Little's-law
    figures are recomputed; aa-control, recorded before runs stated it, says they were not."""
    run = tmp_path / "load"
    shutil.copytree("outputs/wrong-rope/reference", run)
    results = run / "arms" / "llama-cpp-wrong-rope" / "results.json"
    data = json.loads(results.read_text())
    assert data["sweep"]["load_check_counts"]
    data["sweep"]["points"]["c1-r0"]["littles_law_concurrency"] = 0.5
    results.write_text(json.dumps(data))
    audit = audit_run(run)
    assert ("arms/llama-cpp-wrong-rope/results.json", "sweep.points.c1-r0.littles_law_concurrency") in fields(audit)
    assert "recorded before" not in audit.checks["points"]



def test_an_older_run_s_load_check_figures_are_recomputed_and_those_counted_otherwise_listed_apart(tmp_path):
    """quickstart/avx2-host was recorded with 8 requests a point and the older count (in flight over
    every request, Little's law over those that ended ok): at c4-r0 its stored 3.999 in flight is
    2.993 under today's count. Such a figure is listed apart, with both values, not as a disagreement."""
    run = tmp_path / "avx2-host"
    shutil.copytree("outputs/quickstart/avx2-host", run)
    results = run / "arms" / "llama-cpp" / "results.json"
    data = json.loads(results.read_text())
    del data["sweep"]["load_check_counts"]  # as the run stood before it stated how its load check counted
    today = data["sweep"]["points"]["c4-r0"]["in_flight_mean"]
    data["sweep"]["points"]["c4-r0"]["in_flight_mean"] = 3.999
    results.write_text(json.dumps(data))
    audit = audit_run(run)
    older = [n for n in audit.one_sided if "counted under the older load check" in n]
    assert not [d for d in audit.disagreements if d.file.endswith("results.json")
                and d.field.endswith("in_flight_mean")]
    assert "1 differing under today's count" in audit.checks["points"]
    assert (f"arms/llama-cpp/results.json: sweep.points.c4-r0.in_flight_mean (counted under the older load check: "
            f"stored 3.999, today's count {today:.4g})") in older


def test_a_word_that_contradicts_its_own_numbers_is_named(copy_of):
    """The claims check reads one file only: an edited sentence is caught against the decision's
    own ratio and interval, apart from the recomputation from the records."""
    run = copy_of("claim")
    analysis = json.loads((run / "analysis.json").read_text())
    i, d = next((i, d) for i, d in enumerate(analysis["decisions"]) if d["decision"] == "no difference")
    d["text"] = d["text"].replace("no difference larger than", "a difference larger than")
    (run / "analysis.json").write_text(json.dumps(analysis))
    found = fields(audit_run(run))
    assert ("analysis.json", f"decisions[{i}].text (against its own numbers)") in found


def test_a_capacity_sentence_or_a_prediction_error_beside_other_numbers_is_named(tmp_path):
    """capacity/reference: its sentences and prediction errors agree with their own numbers; a
    capacity whose lower end is edited keeps a sentence that no longer says it, and a prediction
    whose measured interval is edited keeps an error that no longer follows, and both are named."""
    run = tmp_path / "capacity"
    shutil.copytree("outputs/capacity/reference", run)
    assert audit_run(run).checks["claims"] == ("8 decisions' words, 2 capacity sentences, 8 prediction errors "
                                               "against their own numbers")
    analysis = json.loads((run / "analysis.json").read_text())
    assert analysis["capacity"][1]["sentence"].startswith("vllm-cpu carries 1 concurrent user inside")
    analysis["capacity"][1]["lower"] = 5.0
    analysis["capacity_predictions"][0]["measured_upper"] = 9.0
    (run / "analysis.json").write_text(json.dumps(analysis))
    found = fields(audit_run(run))
    assert {("analysis.json", "capacity[1].sentence (against its own numbers)"),
            ("analysis.json", "capacity_predictions[0].error (against its own numbers)")} <= found


def test_an_older_run_whose_point_lost_its_records_is_named_not_a_crash(tmp_path):
    """Deleting a point's records from an older run leaves today's count with no load figure: the
    audit still finishes, names the point's figures, and shows the missing count as none."""
    run = tmp_path / "older"
    shutil.copytree("outputs/quickstart/avx2-host", run)
    requests = run / "arms" / "llama-cpp" / "requests.jsonl"
    requests.write_text("".join(line for line in requests.read_text().splitlines(keepends=True)
                                if json.loads(line).get("point") != "c4-r0"))
    audit = audit_run(run)
    assert ("arms/llama-cpp/results.json", "sweep.points.c4-r0.completed") in fields(audit)
    assert ("arms/llama-cpp/results.json", "sweep.points.c4-r0.in_flight_mean") in fields(audit)
