"""Result files validated when written, and the committed runs still read under the models."""
import hashlib
import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from stackbook.evidence.files import file_sha256, model_json, read_json, update_results
from stackbook.evidence.manifest import Manifest
from stackbook.run_checks.passport import Passport
from stackbook.evidence.results import ArmResults, validate_section
from stackbook.evidence.rundir import RunDir

REFERENCE = sorted(Path("outputs").glob("*/reference"))


def test_committed_runs_read_unchanged_under_the_models():
    assert len(REFERENCE) >= 3
    for ref in REFERENCE:
        run = RunDir(ref)
        manifest = read_json(run.manifest)
        assert model_json(Manifest.model_validate(manifest)) == manifest
        for name in manifest["arms"]:
            arm = run.arm(name)
            results = read_json(arm.results)
            for section, data in results.items():
                assert model_json(validate_section(section, data)) == data, (arm, section)
            passport = read_json(arm.passport_json)
            assert model_json(Passport.model_validate(passport)) == passport, arm
            if "sweep" in results:
                assert ArmResults.model_validate(results).label().value == passport["results"]["label"]


def quickstart_arm(tmp_path):
    arm = RunDir(tmp_path).arm("llama").create()
    return arm, read_json(RunDir("outputs/quickstart/reference").arm("llama-cpp").results)


def test_update_results_writes_a_valid_section(tmp_path):
    arm, ref = quickstart_arm(tmp_path)
    update_results(arm, "canaries", ref["canaries"])
    out = update_results(arm, "sweep", ref["sweep"])
    assert set(out) == {"canaries", "sweep"}
    assert read_json(arm.results)["sweep"]["points"]["c4-r0"] == ref["sweep"]["points"]["c4-r0"]


def test_update_results_refuses_a_bad_section_and_names_the_field(tmp_path):
    arm, ref = quickstart_arm(tmp_path)
    bad = {**ref["canaries"], "verdict": "MAYBE"}
    with pytest.raises(ValidationError, match=r"verdict\s+Input should be 'PASS' or 'HOLD'"):
        update_results(arm, "canaries", bad)
    point = {**ref["sweep"]["points"]["c1-r0"]}
    del point["completed"]
    with pytest.raises(ValidationError, match=r"points\.c1-r0\.completed\s+Field required"):
        update_results(arm, "sweep", {**ref["sweep"], "points": {"c1-r0": point}})
    with pytest.raises(ValueError, match="no section 'sweeps'; the sections are"):
        update_results(arm, "sweeps", ref["sweep"])
    with pytest.raises(ValidationError, match="either the budget .* or a note"):
        update_results(arm, "sizing", {"geometry": {}})
    assert not arm.results.exists()  # nothing reached the file


def test_file_sha256_matches_hashlib(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 3_000_000)
    assert file_sha256(p) == hashlib.sha256(p.read_bytes()).hexdigest()
    p.write_bytes(b"y")  # a rewrite is hashed again, not served from the cache
    assert file_sha256(p) == hashlib.sha256(b"y").hexdigest()


def test_model_json_keeps_only_what_was_set_and_plain_values():
    import numpy as np
    data = {"points": {"c1": {"requests": 2, "completed": 2, "gauge": np.float64(1.5), "n": np.int64(3)}}}
    out = model_json(validate_section("sweep", data))
    assert out == {"points": {"c1": {"requests": 2, "completed": 2, "gauge": 1.5, "n": 3}}}
    json.dumps(out)
