"""requests.jsonl under faults: a torn last line is cut before a resumed run appends, and a disk
that fills stops the writer's callers with a clear error instead of losing records silently."""
import time
from pathlib import Path

import pytest
from stackbook.loadgen.records import RecordsNotWritten, RecordWriter, RequestRecord, read_records, repair_torn_tail
from stackbook.loadgen.sent import SentWriter

from tests.support.records import request_record


def record(i: int) -> RequestRecord:
    return request_record(run_id="t", request_index=i, sent_s=i, end_s=i + 1, prompt_tokens_client=8)


def test_a_torn_last_line_is_cut_and_the_next_record_starts_its_own_line(tmp_path):
    path = tmp_path / "requests.jsonl"
    with RecordWriter(path) as w:
        for i in range(3):
            w.write(record(i))
    whole = path.read_bytes()
    path.write_bytes(whole + record(3).model_dump_json().encode()[:40])   # power lost mid-write
    assert [r.request_index for r in read_records(path)] == [0, 1, 2]    # the reader skips the cut line
    with RecordWriter(path) as w:                                          # a resumed run appends
        w.write(record(4))
    assert path.read_bytes().startswith(whole)                             # every earlier record kept
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and [r.request_index for r in read_records(path)] == [0, 1, 2, 4]


@pytest.mark.parametrize("content, removed", [(b"", 0), (b"a\n", 0), (b"a\nbc", 2), (b"abc", 3),
                                              (b"x" * 100_000 + b"\n" + b"y" * 70_000, 70_000)])
def test_repair_keeps_everything_up_to_the_last_newline(tmp_path, content, removed):
    path = tmp_path / "f.jsonl"
    path.write_bytes(content)
    assert repair_torn_tail(path) == removed
    assert path.read_bytes() == content[:len(content) - removed]
    assert repair_torn_tail(tmp_path / "absent.jsonl") == 0


@pytest.mark.parametrize("writer, item", [(RecordWriter, record(0)), (SentWriter, {"point": "c1-r0"})],
                         ids=["records", "bodies"])
def test_a_full_disk_is_raised_to_the_next_writer_and_at_close(writer, item):
    w = writer(Path("/dev/full"))          # every write there fails with ENOSPC
    w.write(item)
    deadline = time.monotonic() + 5
    while w.error is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert w.error is not None and w.error.errno == 28
    with pytest.raises(RecordsNotWritten, match=r"/dev/full: records could not be written \(No space left on device\)"):
        w.write(item)
    with pytest.raises(RecordsNotWritten, match="continue with stackbook run --resume"):
        w.close()
