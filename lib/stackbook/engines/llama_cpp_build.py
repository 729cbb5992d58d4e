"""Building llama-server from the llama.cpp that the pinned llama-cpp-python sdist vendors.

The build is the set-up's long pole on two cores, so its sources are compiled in batches (CMake's
unity build: each batch parses the shared headers, nlohmann's JSON and cpp-httplib among them,
once instead of once a file). The sources of the pinned llama.cpp that cannot share a batch are
named in `COMPILED_ALONE`; if a batched build fails anyway (another llama.cpp, another compiler),
the same sources are built file by file, as upstream builds them."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from stackbook.engines.index_download import PinnedFile, download_pinned
from stackbook.engines.install import InstallContext, InstallFailed, log, run_logged, tail
from stackbook.evidence.files import file_sha256

# common/json.cpp specialises a template that an earlier file of its batch has already used;
# mtmd's public helpers refuse to be compiled beside the library's internal headers.
COMPILED_ALONE = ("common/json.cpp", "tools/mtmd/mtmd-helper.cpp", "tools/mtmd/mtmd-helper-gen.cpp")
BATCHED = ("-DCMAKE_UNITY_BUILD=ON",)


def compiled_alone_script(sources: Sequence[str] = COMPILED_ALONE) -> str:
    """A CMake script, given as CMAKE_PROJECT_INCLUDE, that keeps `sources` out of the unity batches:
    the property is set in each source's own folder once the whole tree has been read."""
    lines = []
    for source in sources:
        folder = Path(source).parent.as_posix()
        lines.append("cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL set_source_files_properties "
                     f"${{CMAKE_SOURCE_DIR}}/{source} DIRECTORY ${{CMAKE_SOURCE_DIR}}/{folder} "
                     "PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)")
    return "\n".join(lines) + "\n"


def batched_flags(work: Path, alone: Sequence[str] = COMPILED_ALONE) -> list[str]:
    """The cmake arguments of a batched build that compiles `alone` one by one (their script
    written into `work`)."""
    script = work / "compiled-alone.cmake"
    script.write_text(compiled_alone_script(alone))
    return [*BATCHED, f"-DCMAKE_PROJECT_INCLUDE={script}"]


def ninja_flags() -> list[str]:
    """cmake's arguments for Ninja, from the workbook environment (pyproject lists it) or PATH; none
    (make) where neither has it. Ninja schedules the whole build graph at once where make waits at
    each library's folder, which costs the batched build a sixth of its time on two cores
    (benchmarks/llama_batched_build.py)."""
    beside = Path(sys.executable).parent / "ninja"
    ninja = str(beside) if os.access(beside, os.X_OK) else shutil.which("ninja")
    return ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []


def pip_download(python: str, sdist: PinnedFile, folder: Path) -> bool:
    """The sdist fetched by `pip download`, which honours every index setting pip has; False where
    pip failed (it has said why)."""
    download = [python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                f"{sdist.project}=={sdist.version}", "-d", str(folder)]
    return subprocess.run([*download, "--no-build-isolation"], stderr=subprocess.DEVNULL).returncode == 0 \
        or subprocess.run(download).returncode == 0


def fetch_sdist(ctx: InstallContext, sdist: PinnedFile) -> Path:
    """The llama-cpp-python sdist in the download cache: read from the index by its pinned digest,
    through pip where the index cannot be read directly."""
    path = ctx.downloads / sdist.filename
    if path.is_file() and file_sha256(path) == sdist.sha256:
        return path
    log(f"llama.cpp: downloading {sdist.filename} (76 MB)")
    try:
        return download_pinned(sdist, ctx.downloads)
    except (OSError, ValueError) as err:
        log(f"llama.cpp: the index could not be read directly ({err}); asking pip")
    if not pip_download(ctx.python, sdist, ctx.downloads):
        raise InstallFailed("")  # pip has said why
    got = file_sha256(path)
    if got != sdist.sha256:
        raise InstallFailed(f"{path} has sha256 {got}, not the pinned {sdist.sha256}: the index serves another "
                            "file under that name; delete it and check PIP_INDEX_URL")
    return path


def extract_source(sdist: Path, work: Path) -> Path:
    """The vendored llama.cpp tree, extracted under `work`."""
    with tarfile.open(sdist) as archive:
        archive.extractall(work, filter="tar")
    return work / sdist.name.removesuffix(".tar.gz") / "vendor" / "llama.cpp"


def compile_server(src: Path, build: Path, flags: Sequence[str], logs: Path) -> Path | None:
    """Configure and build the llama-server target into `build` on every core this process may use,
    each step's output in `logs/llama-<build>-<step>.log`; the log of the step that failed, or None."""
    steps = (("cmake", ["cmake", "-S", str(src), "-B", str(build), *flags]),
             ("build", ["cmake", "--build", str(build), "--target", "llama-server",
                        f"-j{len(os.sched_getaffinity(0))}"]))
    for step, command in steps:
        step_log = logs / f"llama-{build.name}-{step}.log"
        step_log.write_text("")
        if not run_logged(step_log, command):
            return step_log
    return None


def build_server(src: Path, work: Path, flags: Sequence[str], logs: Path,
                 alone: Sequence[str] = COMPILED_ALONE) -> Path:
    """The built llama-server: batched (`alone` compiled one by one), or file by file where the
    batched build fails."""
    work.mkdir(parents=True, exist_ok=True)
    flags = [*ninja_flags(), *flags]
    failed = compile_server(src, work / "batched", [*flags, *batched_flags(work, alone)], logs)
    if failed is None:
        return work / "batched" / "bin" / "llama-server"
    log(f"llama.cpp: the batched build failed (log: {failed}); building file by file (about half as long again)")
    failed = compile_server(src, work / "files", flags, logs)
    if failed is not None:
        print(tail(failed, 30), end="", flush=True)
        raise InstallFailed("")  # the log's end, just shown, says why
    return work / "files" / "bin" / "llama-server"


def install_server(ctx: InstallContext, pinned: PinnedFile, flags: Sequence[str], dest: Path) -> None:
    """Build llama-server from the sdist's llama.cpp into `dest/bin`, its converter beside it."""
    sdist = fetch_sdist(ctx, pinned)
    log("llama.cpp: building llama-server from the vendored source (3 to 6 minutes on 2 cores)")
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=ctx.engines))
    src = extract_source(sdist, work)
    binary = build_server(src, work, flags, ctx.logs)
    (dest / "bin").mkdir(parents=True, exist_ok=True)
    # The converter travels with the binary: the bf16 GGUF must be made by the same llama.cpp.
    for folder in ("gguf-py", "conversion"):
        shutil.copytree(src / folder, dest / folder, dirs_exist_ok=True)
    for script in ("convert_hf_to_gguf.py", "convert_hf_to_gguf_update.py"):
        if (src / script).is_file():
            shutil.copy(src / script, dest / script)
    shutil.copy(binary, dest / "bin" / "llama-server.tmp")
    os.replace(dest / "bin" / "llama-server.tmp", dest / "bin" / "llama-server")
    shutil.rmtree(work)
    log(f"llama.cpp: llama-server built in {time.monotonic() - began:.0f} s")
