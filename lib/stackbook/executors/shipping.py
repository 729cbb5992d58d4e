"""An arm's folder on its way home from the node that ran it.

A Ray task writes into a run directory staged in the node's own temporary directory (nodes share
no filesystem), so the notebooks there see that staging path. The folder travels back as the
bytes of a tar archive through Ray's object store; on the way, every text file has the staging
location rewritten to the run directory's own path, relative to the repository root, so the
executed notebooks read exactly as the local executor writes them."""
from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from stackbook.evidence.portable import TEXT_SUFFIXES
from stackbook.evidence.rundir import ArmDir, RunDir
from stackbook.locations import symbolic


@dataclass(frozen=True)
class Relocation:
    """The staging root on a node, rewritten away: `<root>/outputs/c/r/...` reads `outputs/c/r/...`."""
    staging_root: Path

    def apply(self, text: str) -> str:
        for prefix in {str(self.staging_root), symbolic(self.staging_root)}:
            text = text.replace(prefix + "/", "")
        return text


@dataclass
class PackedArm:
    """An arm folder as bytes of a tar archive, with the sha256 of each file as packed (after the
    relocation), so the manifest's hashes are those of the files that arrive."""
    archive: bytes
    sha256: dict[str, str] = field(default_factory=dict)


def pack_arm(arm_dir: ArmDir, relocation: Relocation | None = None) -> PackedArm:
    """Every file of the arm folder, text files relocated; the folder on the node is left as is
    (the engine may still be appending to its log)."""
    buf = io.BytesIO()
    digests = {}
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=3) as tar:
        for path in sorted(p for p in arm_dir.path.rglob("*") if p.is_file()):
            data = path.read_bytes()
            if relocation and path.suffix in TEXT_SUFFIXES:
                data = relocation.apply(data.decode(errors="replace")).encode()
            name = path.relative_to(arm_dir.path).as_posix()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(path.stat().st_mtime), 0o644
            tar.addfile(info, io.BytesIO(data))
            digests[name] = hashlib.sha256(data).hexdigest()
    return PackedArm(buf.getvalue(), digests)


def unpack_arm(packed: PackedArm, arm_dir: ArmDir) -> None:
    """Replace the arm folder with the archive's content (the node started from this folder, so
    what it sends is the whole of it), through a sibling folder so a reader never sees half."""
    arm_dir.path.parent.mkdir(parents=True, exist_ok=True)
    incoming = Path(tempfile.mkdtemp(prefix=f".{arm_dir.name}.incoming-", dir=arm_dir.path.parent))
    with tarfile.open(fileobj=io.BytesIO(packed.archive), mode="r:gz") as tar:
        tar.extractall(incoming, filter="data")
    old = arm_dir.path.with_name(f".{arm_dir.name}.replaced")
    shutil.rmtree(old, ignore_errors=True)
    if arm_dir.path.exists():
        arm_dir.path.rename(old)
    incoming.rename(arm_dir.path)
    shutil.rmtree(old, ignore_errors=True)


@dataclass
class StagedRun:
    """A run directory staged in a node's temporary directory, at the same relative path as the
    run it belongs to, holding the resolved campaign and the arm folder as it stood."""
    root: Path
    run: RunDir

    @classmethod
    def create(cls, run_path: str, campaign_text: str, arm: str, prior: PackedArm | None) -> StagedRun:
        if Path(run_path).is_absolute() or ".." in Path(run_path).parts:
            raise ValueError(f"{run_path}: the ray executor stages run directories inside the repository "
                             "(outputs/<campaign>/<run-id>); move the run there to resume it")
        root = Path(tempfile.mkdtemp(prefix="stackbook-arm-")).resolve()
        run = RunDir(root / run_path).create()
        run.campaign_resolved.write_text(campaign_text)
        if prior is not None:
            unpack_arm(prior, run.arm(arm))
        return cls(root, run)

    @property
    def relocation(self) -> Relocation:
        return Relocation(self.root)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
