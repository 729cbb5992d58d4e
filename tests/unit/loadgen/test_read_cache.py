"""Records read twice are parsed once while the file is unchanged, and read afresh once it grows:
a cached read never hides a record appended since."""
from stackbook.loadgen import records as rec

QUICKSTART = "outputs/quickstart/reference/arms/llama-cpp/requests.jsonl"


def test_an_unchanged_file_is_parsed_once_and_a_grown_one_again(tmp_path, monkeypatch):
    lines = open(QUICKSTART, encoding="utf-8").read().splitlines(keepends=True)
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(lines[:10]))
    parsed = []
    real = rec.RequestRecord.model_validate_json
    monkeypatch.setattr(rec.RequestRecord, "model_validate_json", lambda line: parsed.append(1) or real(line))
    first = rec.read_records(path)
    again = rec.read_records(path)
    assert len(first) == len(again) == 10 and len(parsed) == 10
    assert first is not again and [r.request_index for r in first] == [r.request_index for r in again]
    with open(path, "a", encoding="utf-8") as f:
        f.write(lines[10])
    grown = rec.read_records(path)
    assert len(grown) == 11 and len(parsed) == 21
