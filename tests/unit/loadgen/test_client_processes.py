"""One point's load from several client processes, against the calibration server (a
zero-latency instrument): one clock for every process, the records merged, validity over them."""
import json
import pickle
import statistics
import threading

import pytest
from stackbook.loadgen import arrivals
from stackbook.loadgen.client_processes import (
    ClientCost,
    ClientProcessError,
    Share,
    deal,
    merge_parts,
    portable_target,
    run_shares,
    send_point,
)
from stackbook.loadgen.drivers import Target
from stackbook.loadgen.plans import ClosedPlan, OpenPlan, concurrency_shares
from stackbook.loadgen.records import RecordWriter, read_records
from stackbook.loadgen.sent import SentWriter, read_sent
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec

from tests.support.records import request_record

TOK = ApproximateTokenizer()


@pytest.fixture(scope="module")
def server(start_module_calibration_server):
    return start_module_calibration_server()


def prompts(n, out=None):
    return [PromptSpec(i, [{"role": "user", "content": "x"}], 1, output_tokens=out) for i in range(n)]


def base(c=0):
    return {"run_id": "t", "arm": "cal", "point": "p", "concurrency": c, "attempt": 0}


def test_requests_are_dealt_round_robin_and_concurrency_split_evenly():
    assert deal(7, [1, 1, 1]) == [[0, 3, 6], [1, 4], [2, 5]]
    assert deal(6, [2, 1]) == [[0, 1, 3, 4], [2, 5]]  # a process with two clients takes two of every three
    assert concurrency_shares(5, 2) == [3, 2] and concurrency_shares(4, 4) == [1, 1, 1, 1]


def test_the_target_leaves_the_process_without_the_adapter():
    class Adapter:  # holds what cannot be pickled, as an engine adapter holds its process
        lock = threading.Lock()

        def output_length_fields(self, n):
            return {"max_tokens": n, "ignore_eos": True}

    t = Target("http://127.0.0.1:1", "m", {}, {"max_tokens": 8}, length_for=Adapter().output_length_fields,
               on_send=print)
    follow = PromptSpec(9, [], 1, output_tokens=5, follow_ups=(("more", 1, 7),))
    portable = pickle.loads(pickle.dumps(portable_target(t, prompts(2, out=3) + [follow])))
    assert portable.on_send is None
    assert [portable.fields_for(n) for n in (3, 5, 7)] == [{"max_tokens": n, "ignore_eos": True} for n in (3, 5, 7)]


def test_two_processes_send_one_schedule_on_one_clock(server, tmp_path):
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 4})
    sched = arrivals.constant_schedule(40.0, 40)
    with RecordWriter(tmp_path / "requests.jsonl") as w, SentWriter(tmp_path / "sent.jsonl.gz") as sw:
        recs, cost = send_point(OpenPlan(sched, cooldown=3), t, prompts(40), TOK, processes=2,
                                parts_dir=tmp_path / "parts",
                                writer=w, sent_writer=sw, base=base(), warmup=2)
    assert not (tmp_path / "parts").exists()  # merged, then removed
    on_disk = read_records(tmp_path / "requests.jsonl")
    assert len(recs) == len(on_disk) == 40 and all(r.ok for r in on_disk)
    assert sorted(r.scheduled_s for r in on_disk) == sched
    # One origin for both processes: every send on time against the shared schedule, none early.
    lags = [r.sent_s - r.scheduled_s for r in on_disk]
    assert min(lags) >= -1e-4 and statistics.median(lags) < 0.02
    assert [r.sent_s for r in on_disk] == sorted(r.sent_s for r in on_disk)  # merged in send order
    by_index = {r.request_index: r.phase for r in on_disk}
    assert [by_index[i] for i in range(40)] == ["warmup"] * 2 + ["measure"] * 35 + ["cooldown"] * 3
    assert sorted(s.request_index for s in read_sent(tmp_path / "sent.jsonl.gz")) == list(range(40))
    assert cost.separate and len(cost.cpu_s) == 2 and all(c > 0 for c in cost.cpu_s)
    assert cost.summary()["client_processes"] == 2 and 0 < cost.busiest_fraction() < 1.5


def test_a_closed_loop_splits_its_concurrency(server, tmp_path):
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 4})
    recs, cost = send_point(ClosedPlan(3, cooldown=1), t, prompts(12), TOK, processes=4, parts_dir=tmp_path / "parts",
                            writer=None, sent_writer=None, base=base(3), warmup=1)
    assert len(cost.cpu_s) == 3  # never more processes than clients
    assert sorted(r.request_index for r in recs) == list(range(12)) and all(r.ok for r in recs)
    assert sum(r.phase == "measure" for r in recs) == 10


def test_parts_left_by_an_interrupted_point_are_kept_and_a_dead_engine_named(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()

    def rec(i, sent, error="none"):
        return request_record(run_id="t", point="p", concurrency=0, request_index=i, scheduled_s=sent, sent_s=sent,
                              end_s=sent + 1, error_class=error)

    (parts / "p0.requests.jsonl").write_text(rec(0, 0.1).model_dump_json() + "\n" +
                                            rec(2, 0.5, "transport").model_dump_json() + "\n" + '{"cut')
    (parts / "p1.requests.jsonl").write_text(rec(1, 0.3).model_dump_json() + "\n")
    with RecordWriter(tmp_path / "requests.jsonl") as w:
        merged = merge_parts(parts, w, alive=lambda: False)
    on_disk = read_records(tmp_path / "requests.jsonl")
    assert [r.request_index for r in on_disk] == [r.request_index for r in merged] == [0, 1, 2]
    assert [r.error_class for r in on_disk] == ["none", "none", "engine_died"]
    assert not parts.exists()
    with RecordWriter(tmp_path / "requests.jsonl") as w:
        assert merge_parts(parts, w) == []  # nothing left to merge: nothing added


def test_a_client_process_that_fails_says_why(server, tmp_path):
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 4})
    broken = Share(plan=OpenPlan(schedule=None), target=t, tokenizer=TOK, prompts=prompts(2), positions=[0, 1],
                   total=2, warmup=0, base=base(), records_path=str(tmp_path / "r.jsonl"),
                   sent_path=str(tmp_path / "s.jsonl.gz"))  # an open loop with no schedule
    with pytest.raises(ClientProcessError, match="(?s)client process 0 exited with 1: .*TypeError"):
        run_shares([broken], tmp_path / "parts")


def test_the_client_cost_names_the_busiest_process():
    cost = ClientCost(cpu_s=[0.5, 1.8], wall_s=2.0, separate=True)
    assert cost.busiest_fraction() == 0.9 and cost.elsewhere_s() == 2.3
    assert json.loads(json.dumps(cost.summary()))["client_cpu_fraction_by_process"] == [0.25, 0.9]
    assert ClientCost(cpu_s=[1.0], wall_s=2.0).elsewhere_s() == 0.0  # the sweep's own process reads itself


def test_a_client_process_that_is_not_ready_in_time_is_stopped_and_named(server, tmp_path, monkeypatch):
    from stackbook.loadgen import client_processes
    monkeypatch.setattr(client_processes, "READY_TIMEOUT_S", 0.01)  # no interpreter starts that fast
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 4})
    share = Share(plan=OpenPlan([0.0]), target=t, tokenizer=TOK, prompts=prompts(1), positions=[0], total=1,
                  warmup=0, base=base(), records_path=str(tmp_path / "r.jsonl"),
                  sent_path=str(tmp_path / "s.jsonl.gz"))
    with pytest.raises(ClientProcessError, match="client process 0 was not ready after 0 s"):
        run_shares([share], tmp_path / "parts")


def test_in_one_process_the_clock_starts_after_the_event_loop_so_a_first_deadline_at_zero_is_waited_for(
        server, tmp_path):
    """A trace's first request is due at 0: the point's clock starts START_MARGIN_S ahead, so that
    request waits for its deadline instead of leaving late by the event loop's own start-up."""
    import time

    from stackbook.loadgen.client_processes import START_MARGIN_S
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 4})
    before = time.perf_counter()
    recs, cost = send_point(OpenPlan([0.0, 0.01]), t, prompts(2), TOK, processes=1, parts_dir=tmp_path / "parts",
                            writer=None, sent_writer=None, base=base(), warmup=0)
    assert cost.start_s >= before + START_MARGIN_S and not cost.separate
    assert all(r.ok and r.sent_s >= r.scheduled_s for r in recs)
