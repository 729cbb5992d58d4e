"""Every campaign the project ships or tests with can hold its load under the load rule
(measure.validity): a closed loop needs enough measured requests per point for its window to keep
the configured concurrency in flight, and a campaign that asks for fewer is refused before any
engine starts, naming the field and the count that holds."""
import ast
import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from stackbook.config.arrival_patterns import ClosedLoop
from stackbook.config.errors import CampaignError
from stackbook.config.loading import load_campaign, parse_campaign
from stackbook.run_checks.preflight import load_refusals, preflight
from stackbook.config.protocol import Protocol
from stackbook.measure.validity import (CONCURRENCY_TOLERANCE, expected_in_flight, measured_requests_for,
                                        measured_requests_to_hold)

REPO = Path(__file__).resolve().parents[3]
SHIPPED = sorted((REPO / "campaigns").glob("*.yaml"))
COMMITTED = sorted(REPO.glob("outputs/*/*/campaign.resolved.yaml"))
DEFAULT_PER_POINT = Protocol.model_fields["requests_per_point"].default

# Campaigns run against real engines hold their load with room; a few assert something other than
# the load, and say so here.
NARROW_ALLOWED = {"test_faults.py": "the engine is killed or frozen mid-sweep; its points are not judged for load",
                  "test_end_to_end.py": "asserts that the rule discarded exactly the points it judged invalid, "
                                        "whether or not each load held",
                  "test_transformers.py": "two clients give continuous batching two sequences to batch; it asserts "
                                          "lengths, answers and the engine's statements, not the load",
                  "test_routing.py": "asserts the router's counts against the requests sent, and a replica killed "
                                     "mid-point; not the load"}
# (The chaos tests' campaigns, built by a function, are held to the minimum only, for the same reason.)


def closed_loops_in_tests() -> tuple[list[tuple[str, list[int], int]], set[str]]:
    """(where, concurrency levels, measured requests) of every closed-loop campaign text written in a
    test module, read from the source: string constants and f-string templates alike; and the
    modules whose closed-loop text fills either field from something else (checked by name below)."""
    found, unresolved = [], set()
    for path in sorted((REPO / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        numbers = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                   and isinstance(n.value, ast.Constant) and isinstance(n.value.value, int)
                   for t in n.targets if isinstance(t, ast.Name)}
        if path.name == Path(__file__).name:
            continue  # this module's own campaign is refused on purpose
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):  # module constants filled in, other fields left out
                text = "".join(v.value if isinstance(v, ast.Constant) else
                               str(numbers.get(getattr(v.value, "id", None), "?")) for v in node.values)
            else:
                continue
            if "kind: closed_loop" not in text or "arms:" not in text:
                continue
            levels = re.search(r"kind: closed_loop, concurrency: \[([\d, ]+)\]", text)
            if not levels or "requests_per_point: ?" in text:
                unresolved.add(str(path.relative_to(REPO)))
                continue
            per_point = re.search(r"requests_per_point: (\d+)", text)
            found.append((f"{path.relative_to(REPO)}:{node.lineno}", [int(c) for c in levels.group(1).split(",")],
                          int(per_point.group(1)) if per_point else DEFAULT_PER_POINT))
    return found, unresolved


TEST_CAMPAIGNS, UNRESOLVED = closed_loops_in_tests()


def chaos_campaigns() -> list[str]:
    """The chaos tests' campaigns, as their own function writes them, at every concurrency they use."""
    spec = importlib.util.spec_from_file_location("chaos", REPO / "tests/chaos/test_chaos.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [module.campaign_text("t", concurrency=c) for c in ((module.CONCURRENCY,), (1, 2))]


# Modules whose campaign texts are built by a function, each read through that function.
BUILT = {"tests/chaos/test_chaos.py": chaos_campaigns}


def test_every_closed_loop_text_the_scan_cannot_read_is_checked_through_its_builder():
    assert UNRESOLVED == set(BUILT), "add the module's campaign builder to BUILT"


@pytest.mark.parametrize("module", sorted(BUILT))
def test_campaigns_built_by_a_function_hold_their_load(module):
    for text in BUILT[module]():
        campaign = parse_campaign(yaml.safe_load(text))
        assert load_refusals(campaign) == [], module


def test_the_rule_in_numbers():
    """N alike requests at concurrency c keep c x N/(N + c - 1) in flight over their window."""
    assert [measured_requests_for(c) for c in (1, 2, 4, 8)] == [0, 9, 27, 63]
    assert [measured_requests_to_hold(c) for c in (1, 2, 4, 8)] == [0, 39, 117, 273]
    assert expected_in_flight(2, 4) == pytest.approx(1.6)  # what one host measured: 1.57, discarded
    assert expected_in_flight(2, 9) == pytest.approx(2 * (1 - CONCURRENCY_TOLERANCE))
    assert expected_in_flight(2, 39) == pytest.approx(2 * (1 - CONCURRENCY_TOLERANCE / 4))


def test_the_tests_campaigns_were_all_found():
    where = {w.split(":")[0] for w, _, _ in TEST_CAMPAIGNS}
    assert {"tests/engines/test_end_to_end.py", "tests/engines/test_repetitions.py", "tests/engines/test_faults.py",
            "tests/engines/test_mlx.py", "tests/engines/test_workloads.py"} <= where


@pytest.mark.parametrize("where, levels, per_point", TEST_CAMPAIGNS, ids=[w for w, _, _ in TEST_CAMPAIGNS])
def test_every_test_campaign_holds_its_load(where, levels, per_point):
    assert ClosedLoop(concurrency=levels).load_refusal(per_point) is None, where
    module = Path(where.split(":")[0])
    if module.parent.name == "engines" and module.name not in NARROW_ALLOWED:
        assert ClosedLoop(concurrency=levels).narrow_loads(per_point) == [], where


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_campaign_passes_the_check(path):
    assert load_refusals(load_campaign(path)) == []


def test_a_committed_run_made_under_a_looser_rule_still_reads():
    """The refusal is a check on running, not on the schema: a run whose 12 measured requests
    could not hold concurrency 8 reads, and its points at that load were discarded."""
    run = REPO / "outputs/quickstart/avx2-host/campaign.resolved.yaml"
    assert run in COMMITTED
    refused = load_refusals(load_campaign(run))
    assert len(refused) == 1 and "requests_per_point 12 cannot hold concurrency 8" in refused[0]


CAMPAIGN = """
name: t
model: {source: embedded}
protocol:
  workload: {kind: synthetic, prompt_tokens: 48, output_tokens: 12}
  arrival: {kind: closed_loop, concurrency: [1, 2, 4]}
  requests_per_point: 4
arms:
  - name: a
    engine: {kind: llama_cpp}
"""


def test_too_few_measured_requests_are_refused_by_the_check_with_the_field_and_the_count(tmp_path):
    checked = preflight(parse_campaign(yaml.safe_load(CAMPAIGN)), tmp_path / "run", check_host=False,
                        runs_root=tmp_path)
    assert checked.refusals == [
        "protocol.requests_per_point: requests_per_point 4 cannot hold concurrency 4: a closed loop's window holds "
        "about 2.29 of 4 in flight with 4 alike measured requests (fewer with uneven ones), outside the load rule's "
        "10%, so its points would be discarded. Fix: set requests_per_point to at least 27 (117 holds with room to "
        "spare), or drop "
        "concurrency 2, 4"]


def test_the_library_refuses_it_before_any_engine_starts(tmp_path):
    from stackbook.runner import run_campaign
    path = tmp_path / "t.yaml"
    path.write_text(CAMPAIGN)
    with pytest.raises(CampaignError, match="cannot hold its load") as err:
        run_campaign(str(path), run_id=f"test-{tmp_path.name}", progress=False)
    assert "requests_per_point 4 cannot hold concurrency 4" in str(err.value)
    assert not (REPO / "outputs" / "t" / f"test-{tmp_path.name}").exists()


def test_a_campaign_without_a_sweep_is_not_held_to_it():
    doc = yaml.safe_load(CAMPAIGN)
    doc["protocol"]["stages"] = ["sizing", "canaries"]
    assert load_refusals(parse_campaign(doc)) == []


def test_an_arm_override_is_checked_on_its_own():
    doc = yaml.safe_load(CAMPAIGN)
    doc["protocol"]["requests_per_point"] = 60
    doc["variables_under_test"] = ["requests_per_point"]
    doc["arms"].append({"name": "b", "engine": {"kind": "llama_cpp"}, "protocol_overrides": {"requests_per_point": 10}})
    refused = load_refusals(parse_campaign(doc))
    assert len(refused) == 1 and refused[0].startswith("arms[1].protocol_overrides.requests_per_point: "
                                                       "requests_per_point 10 cannot hold concurrency 4")


def test_a_narrow_load_is_noted_before_the_run(tmp_path):
    doc = yaml.safe_load(CAMPAIGN)
    doc["protocol"]["requests_per_point"] = 32
    checked = preflight(parse_campaign(doc), tmp_path / "run", check_host=False, runs_root=tmp_path)
    narrow = [n for n in checked.notes if "measured requests hold about" in n]
    assert narrow == ["protocol.requests_per_point: concurrency 2: 32 measured requests hold about 1.94 of 2 in "
                      "flight (the rule keeps 1.80 and above) if alike, less with uneven lengths, so chance can "
                      "discard the point; 39 hold it with room",
                      "protocol.requests_per_point: concurrency 4: 32 measured requests hold about 3.66 of 4 in "
                      "flight (the rule keeps 3.60 and above) if alike, less with uneven lengths, so chance can "
                      "discard the point; 117 hold it with room"]


def test_the_check_says_when_the_sample_cannot_prove_the_slo_attainment(tmp_path):
    """64 requests all inside the bounds cannot prove 99% attainment at 95% (0.99^64 = 0.53); 299 can."""
    doc = yaml.safe_load(CAMPAIGN)
    doc["protocol"] |= {"requests_per_point": 57, "repetitions": 2}
    notes = preflight(parse_campaign(doc), tmp_path / "run", check_host=False, runs_root=tmp_path).notes
    assert [n for n in notes if n.startswith("protocol.slo")] == [
        "protocol.slo.attainment 0.99: 114 measured requests at a load (57 per point x 2 repetition(s)) cannot prove "
        "it at 95% confidence even if every one meets the SLO; 299 can, so the capacity inside the SLO will stay "
        "undecided"]
    doc["protocol"] |= {"requests_per_point": 150}
    notes = preflight(parse_campaign(doc), tmp_path / "run", check_host=False, runs_root=tmp_path).notes
    assert not [n for n in notes if n.startswith("protocol.slo")]
