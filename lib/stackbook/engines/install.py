"""How an engine is installed into the cache: its own virtual environment, pip with its output in
a log, the import check, the marker that makes a second run a no-op, and several engines at once,
each with its log. Each kind's recipe (its `install` classmethod) is written with these."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from stackbook.locations import cache_dir

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
LOG_TAIL_LINES = 25


class InstallFailed(RuntimeError):
    """An install did not complete; `code` is the exit status the command line gives."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def log(message: str) -> None:
    """A progress line, as every set-up step writes it."""
    print(f"\033[1m[setup]\033[0m {message}", file=sys.stderr, flush=True)


def tail(path: Path, n: int = LOG_TAIL_LINES) -> str:
    """The last n lines of a log, as `tail -n` prints them."""
    try:
        lines = path.read_text(errors="replace").splitlines(keepends=True)
    except OSError:
        return ""
    return "".join(lines[-n:])


@dataclass(frozen=True)
class InstallContext:
    """Where an install puts things, and the interpreter its environments are made from."""
    cache: Path
    python: str

    @classmethod
    def current(cls) -> "InstallContext":
        """The cache of $STACKBOOK_CACHE and the interpreter of $PYTHON (python3 unless set)."""
        ctx = cls(cache=cache_dir(), python=os.environ.get("PYTHON", "python3"))
        for folder in (ctx.downloads, ctx.engines, ctx.cache / "models", ctx.logs):
            folder.mkdir(parents=True, exist_ok=True)
        return ctx

    @property
    def engines(self) -> Path:
        return self.cache / "engines"

    @property
    def downloads(self) -> Path:
        return self.cache / "downloads"

    @property
    def logs(self) -> Path:
        return self.cache / "logs"

    def pip_log(self, name: str) -> Path:
        """A fresh, empty pip log for one install."""
        path = self.logs / f"{name}-pip.log"
        path.write_text("")
        return path


def run_logged(log_file: Path, command: Sequence[str]) -> bool:
    """Run a command with its whole output appended to a log; True when it succeeded."""
    with open(log_file, "a") as out:
        return subprocess.run(list(command), stdout=out, stderr=subprocess.STDOUT).returncode == 0


def pip_logged(log_file: Path, command: Sequence[str]) -> bool:
    """pip with its output in the log, out of the terminal; when it fails, the log's end is shown."""
    if run_logged(log_file, command):
        return True
    log(f"pip failed; the last lines of {log_file}:")
    print(tail(log_file), end="", file=sys.stderr, flush=True)
    return False


def pip_install(log_file: Path, command: Sequence[str]) -> None:
    """pip as an install's step: its failure (a full disk, a missing wheel) fails the install, even where
    what pip left behind would pass an import check."""
    if not pip_logged(log_file, command):
        raise InstallFailed(f"pip failed; see {log_file}")


def pip_filtered(python: Path, *args: str) -> None:
    """pip on the terminal without its index-location warnings; a failure is left to the import check."""
    proc = subprocess.run([str(python), "-m", "pip", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace")
    print("".join(line for line in proc.stdout.splitlines(keepends=True)
                  if not line.startswith("WARNING: Location")), end="", flush=True)


def fresh_venv(ctx: InstallContext, folder: Path) -> Path:
    """An empty virtual environment in `folder` (what a failed install left there is removed);
    its interpreter."""
    shutil.rmtree(folder, ignore_errors=True)
    if subprocess.run([ctx.python, "-m", "venv", str(folder)]).returncode != 0:
        raise InstallFailed(f"{ctx.python} -m venv {folder} failed")
    return folder / "bin" / "python"


def imports(python: Path, code: str, quiet: bool = True) -> bool:
    """Whether the environment's interpreter runs the import check."""
    return subprocess.run([str(python), "-c", code],
                          stderr=subprocess.DEVNULL if quiet else None).returncode == 0


def torch_cpu_index(python: Path, torch_pin: str, log_file: Path) -> list[str]:
    """pip's arguments for PyTorch's own index when the configured index lacks the pinned +cpu
    torch; none when it has it."""
    if run_logged(log_file, [str(python), "-m", "pip", "install", "-q", "--dry-run", "--no-deps", torch_pin]):
        return []
    log(f"{torch_pin} is not on the configured index; using {TORCH_CPU_INDEX}")
    return ["--extra-index-url", TORCH_CPU_INDEX]


def mark_installed(folder: Path) -> None:
    (folder / ".installed").touch()


def gpu_listed() -> bool:
    """Whether nvidia-smi is on PATH and lists a GPU."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(line.startswith("GPU ") for line in out.splitlines())


def require_gpu() -> None:
    """The GPU engines install only where nvidia-smi lists a GPU; elsewhere a clear refusal."""
    if not gpu_listed():
        raise InstallFailed("make setup-gpu installs vLLM (GPU build), SGLang and TensorRT-LLM, which need an "
                            "NVIDIA GPU; nvidia-smi finds none on this machine. The CPU engines install with "
                            "make setup.", code=3)


def gpu_env(ctx: InstallContext, name: str, check: str, *packages: str) -> None:
    """One environment per GPU engine under the cache, marked installed once its import works."""
    folder = ctx.engines / name
    log(f"{name}: installing into its own environment (several GB of CUDA wheels)")
    python = fresh_venv(ctx, folder)
    pip_filtered(python, "install", "-q", "--upgrade", "pip", "setuptools", "wheel")
    pip_filtered(python, "install", "-q", *packages)
    if not imports(python, check, quiet=False):
        raise InstallFailed(f"{name} install failed (the import check '{check}' did not pass)")
    mark_installed(folder)


def together(labels: Sequence[str]) -> str:
    """Labels as one phrase, consecutive installs merged: "a build, b and c installs"."""
    groups: list[list[str]] = []
    for label in labels:
        head, _, noun = label.rpartition(" ")
        if groups and noun == "install" and groups[-1][-1] == "install":
            groups[-1].insert(-1, head)
        else:
            groups.append([head, noun] if noun == "install" else [label, ""])
    phrases = []
    for group in groups:
        *names, noun = group
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        phrases.append(listed + (f" {noun}{'s' if len(names) > 1 else ''}" if noun else ""))
    return ", ".join(phrases)


def install_in_parallel(steps: Sequence[str], kinds: Sequence[str], ctx: InstallContext,
                        command: Callable[[str], list[str]]) -> bool:
    """Install several kinds at once, each in its own process writing `logs/<step>.log`; say
    which finished and show the end of the log of any that failed. True when all succeeded."""
    procs = []
    for step, kind in zip(steps, kinds):
        log_file = ctx.logs / f"{step}.log"
        with open(log_file, "w") as out:
            procs.append((step, log_file, subprocess.Popen(command(kind), stdout=out, stderr=subprocess.STDOUT,
                                                           stdin=subprocess.DEVNULL)))
    ok = True
    for step, log_file, proc in procs:
        if proc.wait() == 0:
            if log_file.stat().st_size:
                log(f"{step}: done (log: {log_file})")
        else:
            ok = False
            log(f"{step}: FAILED; the last lines of {log_file}:")
            print(tail(log_file), end="", file=sys.stderr, flush=True)
    return ok


def system_has_mpi() -> bool:
    """Whether the dynamic linker's cache lists an MPI runtime (libmpi.so)."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "libmpi.so" in out
