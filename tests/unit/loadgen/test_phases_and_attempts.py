"""Request phases stored as their plain values, and the one latest-attempt filter."""
import json

import pytest
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import RecordWriter, RequestRecord, latest_attempt_only, read_records
from stackbook.loadgen.sent import SentRequest, SentWriter, read_sent


def rec(phase, point="c1-r0", attempt=0, index=0):
    return RequestRecord(run_id="r", arm="a", point=point, phase=phase, attempt=attempt, concurrency=1,
                         request_index=index, scheduled_s=0.0, sent_s=0.0, end_s=1.0, sent_unix=0.0,
                         prompt_tokens_client=1, output_tokens_requested=1)


@pytest.mark.parametrize("phase", list(Phase))
def test_a_phase_round_trips_through_a_stored_record(tmp_path, phase):
    path = tmp_path / "requests.jsonl"
    with RecordWriter(path) as w:
        w.write(rec(phase))
    line = path.read_text()
    assert json.loads(line)["phase"] == phase.value           # stored as the plain string
    back = read_records(path)[0]
    assert back.phase is phase and back.phase == phase.value   # read back as the member
    assert back.model_dump_json() + "\n" == line               # byte-identical on a second write


def test_a_record_written_with_a_plain_string_loads_as_the_enum():
    old = rec(Phase.WARMUP).model_dump_json().replace('"warmup"', '"cooldown"')
    assert RequestRecord.model_validate_json(old).phase is Phase.COOLDOWN
    with pytest.raises(ValueError):
        RequestRecord.model_validate_json(old.replace('"cooldown"', '"rehearsal"'))


def test_a_phase_prints_and_keys_as_its_value():
    assert f"{Phase.MEASURE}" == str(Phase.MEASURE) == "measure"
    assert {"sentinel": 1}[Phase.SENTINEL] == 1


def test_only_each_points_latest_attempt_is_kept(tmp_path):
    records = [rec(Phase.MEASURE, "c1-r0", 0, 0), rec(Phase.MEASURE, "c2-r0", 0, 0),
               rec(Phase.MEASURE, "c1-r0", 1, 0), rec(Phase.MEASURE, "c1-r0", 1, 1)]
    kept = latest_attempt_only(records)
    assert [(r.point, r.attempt, r.request_index) for r in kept] == [("c2-r0", 0, 0), ("c1-r0", 1, 0), ("c1-r0", 1, 1)]
    path = tmp_path / "requests.jsonl"
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)
    assert [r.model_dump() for r in read_records(path, latest_attempt=True)] == [r.model_dump() for r in kept]
    sent_path = tmp_path / "sent.jsonl.gz"
    with SentWriter(sent_path) as w:
        for r in records:
            w.write({"point": r.point, "attempt": r.attempt, "phase": r.phase, "request_index": r.request_index,
                     "scheduled_s": 0.0, "sent_s": 0.0, "body": {}})
    sent = read_sent(sent_path, latest_attempt=True)
    assert all(isinstance(s, SentRequest) for s in sent)
    assert [(s.point, s.attempt, s.request_index, s.phase) for s in sent] == \
        [("c2-r0", 0, 0, Phase.MEASURE), ("c1-r0", 1, 0, Phase.MEASURE), ("c1-r0", 1, 1, Phase.MEASURE)]
