"""The layout of a run directory, `outputs/<campaign>/<run-id>/`, in one place.

Every file a run leaves behind is named here and nowhere else: the runner, the notebook steps,
the sweep, the passport and the analysis ask a RunDir (or its ArmDir) for their paths.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

from stackbook.locations import OUTPUTS, OUTPUTS_DIR, shown

ARM_NOTEBOOKS = ("10_sizing", "20_canaries", "30_load_sweep")
STAGE_NOTEBOOK = {"sizing": "10_sizing", "canaries": "20_canaries", "sweep": "30_load_sweep"}
ANALYSIS_NOTEBOOK = "40_analysis"
COMPARE_NOTEBOOK = "60_compare"
REPORT = "report.html"
COMPARISON_JSON = "comparison.json"
MANIFEST = "manifest.json"
INDEX_PAGE = "index.html"
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # one directory name under outputs/<campaign>/


def check_run_id(run_id: str | None, option: str = "--run-id") -> None:
    """Refuse a run id that is not one plain directory name (a path, a '..', spaces, control characters)."""
    if run_id is not None and not RUN_ID.fullmatch(run_id):
        raise ValueError(f"{option} {run_id!r}: a run id is one directory name of letters, digits, '-', '_' or "
                         "'.', starting with a letter or digit (at most 128), e.g. --run-id reference")


class Folder:
    """A directory of the outputs layout: a path-like value, equal to another of its kind at the same path."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __truediv__(self, name: str) -> Path:
        """A file this folder holds beyond the standard ones (e.g. a notebook's own output)."""
        return self.path / name

    def create(self):
        self.path.mkdir(parents=True, exist_ok=True)
        return self


class ArmDir(Folder):
    """One arm's folder, `arms/<arm>/`: its executed notebooks, raw records, engine log and passport."""

    def __init__(self, path: str | os.PathLike, name: str):
        super().__init__(path)
        self.name = name

    def exists(self) -> bool:
        return self.path.is_dir()

    def notebook(self, name: str) -> Path:
        """The executed copy of an arm notebook, e.g. notebook("30_load_sweep")."""
        return self.path / f"{name}.ipynb"

    def link(self, path: Path) -> str:
        """A path of this arm relative to its run directory: how the analysis notebook, written
        there, links to it."""
        return os.path.relpath(path, self.path.parent.parent)

    @property
    def requests(self) -> Path:
        """One line per request, appended as it completes."""
        return self.path / "requests.jsonl"

    @property
    def capacity_requests(self) -> Path:
        """The capacity search's probes, one line per request as in requests.jsonl, kept apart so
        the sweep's points and figures never mix with them."""
        return self.path / "capacity_requests.jsonl"

    @property
    def requests_sent(self) -> Path:
        """Every request body as it was sent, with its send offset (gzip JSONL): the audit and
        replay record of what the engine was asked."""
        return self.path / "requests_sent.jsonl.gz"

    @property
    def client_parts(self) -> Path:
        """Where the client processes of a point run by several (protocol.loadgen.processes)
        append their own records and bodies, merged into the two files above after the point."""
        return self.path / "client-processes"

    @property
    def engine_samples(self) -> Path:
        """The engine's resident memory and CPU seconds, sampled beside the load (JSON lines)."""
        return self.path / "engine_samples.jsonl"

    @property
    def results(self) -> Path:
        """The machine-readable side file the notebooks write, one section per step."""
        return self.path / "results.json"

    @property
    def engine_json(self) -> Path:
        return self.path / "engine.json"

    @property
    def engine_log(self) -> Path:
        return self.path / "engine.log"

    PASSPORT_JSON = "passport.json"

    @property
    def passport_json(self) -> Path:
        return self.path / self.PASSPORT_JSON

    @property
    def passport_md(self) -> Path:
        return self.path / "passport.md"

    @property
    def figures(self) -> Path:
        """The arm notebooks' figures (the campaign's own are under the run's figures/)."""
        return self.path / "figures"


class RunDir(Folder):
    """A run directory: the resolved campaign, the manifest, the analysis, figures and arms."""

    @classmethod
    def new(cls, campaign: str, run_id: str | None = None) -> RunDir:
        """`outputs/<campaign>/<run-id>`; the run id defaults to the UTC time."""
        return cls(OUTPUTS / campaign / (run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())))

    @classmethod
    def interactive(cls, campaign: str) -> RunDir:
        """A scratch run for a notebook opened on its own."""
        return cls(OUTPUTS / campaign / f"interactive-{time.strftime('%Y%m%dT%H%M%S')}")

    @classmethod
    def existing(cls, path: str | os.PathLike) -> RunDir:
        """An existing run, checked: resuming or analysing anything else is a mistake to name."""
        run = cls(path)
        try:
            found = run.campaign_resolved.is_file()
        except OSError:  # a name too long for the file system: not a run either
            found = False
        if not found:
            raise FileNotFoundError(f"{shown(path)[:200]}: not a run directory (no {run.campaign_resolved.name}); "
                                    f"give {OUTPUTS}/<campaign>/<run-id>")
        return run

    @property
    def name(self) -> str:
        """The run id."""
        return self.path.name

    @property
    def campaign_resolved(self) -> Path:
        """The campaign exactly as executed (secrets redacted)."""
        return self.path / "campaign.resolved.yaml"

    @property
    def manifest(self) -> Path:
        """manifest.json: what ran, how it ended, and the hash of every output."""
        return self.path / MANIFEST

    @property
    def lock(self) -> Path:
        """run.lock: held by the one process writing this run (evidence/run_lock.py); not a record."""
        return self.path / "run.lock"

    @property
    def host(self) -> Path:
        """host.json: this host measured once per run (memory bandwidth), used by every arm."""
        return self.path / "host.json"

    def notebook(self, name: str) -> Path:
        """The executed copy of a campaign-level notebook, e.g. notebook("40_analysis")."""
        return self.path / f"{name}.ipynb"

    @property
    def analysis_notebook(self) -> Path:
        return self.notebook(ANALYSIS_NOTEBOOK)

    @property
    def analysis(self) -> Path:
        """analysis.json: fairness, comparison, labels and verdict, beside the analysis notebook."""
        return self.path / "analysis.json"

    @property
    def replay(self) -> Path:
        """replay.json, in a run made by `stackbook replay`: what it re-sent, from which run."""
        return self.path / "replay.json"

    @property
    def report(self) -> Path:
        return self.path / REPORT

    @property
    def figures(self) -> Path:
        return self.path / "figures"

    @property
    def arms_dir(self) -> Path:
        return self.path / "arms"

    def arm(self, name: str) -> ArmDir:
        return ArmDir(self.arms_dir / name, name)

    def passports(self) -> list[Path]:
        """Every arm's passport.json that exists, sorted by arm."""
        return sorted(self.arms_dir.glob(f"*/{ArmDir.PASSPORT_JSON}"))

    def notebooks(self) -> list[Path]:
        """The executed notebooks of this directory: every arm's, then the campaign-level ones."""
        return sorted(self.arms_dir.glob("*/*.ipynb")) + sorted(self.path.glob("[0-9][0-9]_*.ipynb"))

    def pages(self) -> list[Path]:
        """The notebook pages beside those notebooks, in the same order."""
        return sorted(self.arms_dir.glob("*/*.html")) + sorted(self.path.glob("[0-9][0-9]_*.html"))

    def files(self) -> list[Path]:
        """Every file of the run, sorted, for hashing and the portability rewrite."""
        return sorted(p for p in self.path.rglob("*") if p.is_file() and p != self.lock)


class ComparisonDir(Folder):
    """A comparison of runs of one campaign, `outputs/<campaign>/compare-<run>-vs-<run>/`: the
    executed comparison notebook, its figures, report.html and comparison.json."""

    @classmethod
    def new(cls, campaign: str, run_names: list[str]) -> ComparisonDir:
        """The default place of a comparison, named after its runs, the baseline first."""
        return cls(OUTPUTS_DIR / campaign / ("compare-" + "-vs-".join(run_names)))

    def notebook(self, name: str = COMPARE_NOTEBOOK) -> Path:
        """The executed comparison notebook."""
        return self.path / f"{name}.ipynb"

    @property
    def report(self) -> Path:
        return self.path / REPORT

    @property
    def figures(self) -> Path:
        return self.path / "figures"

    @property
    def comparison(self) -> Path:
        """comparison.json: the campaign, the runs compared and the verdict, for the index."""
        return self.path / COMPARISON_JSON


class OutputsRoot(Folder):
    """`outputs/`: every campaign's runs and comparisons, and the dashboard that lists them."""

    def __init__(self, path: str | os.PathLike = OUTPUTS_DIR):
        super().__init__(path)

    @property
    def index_page(self) -> Path:
        """outputs/index.html: one row per run and comparison."""
        return self.path / INDEX_PAGE

    def campaign(self, name: str) -> Path:
        return self.path / name

    def runs(self, campaign: str) -> list[RunDir]:
        """The runs of one campaign that wrote a manifest, the latest first."""
        root = self.campaign(campaign)
        if not root.is_dir():
            return []
        manifests = sorted(root.glob(f"*/{MANIFEST}"), key=lambda p: p.stat().st_mtime, reverse=True)
        return [RunDir(m.parent) for m in manifests]
