"""Run a campaign: per arm, start its engine once, execute the arm notebooks with papermill,
stop the engine; then the campaign analysis, a manifest and an HTML report."""
from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import yaml
from tqdm import tqdm

from .campaign import Campaign, load_campaign
from .engines import EngineStartError, adapter_for
from .passport import write_passport
from .paths import REPO_ROOT, absolute_paths_in, relative_to_repo, symbolic
from .session import record_engine
from .store import read_json, write_json_atomic
from .sweep import requests_at

ARM_NOTEBOOKS = ("10_sizing", "20_canaries", "30_load_sweep")
STAGE_NOTEBOOK = {"sizing": "10_sizing", "canaries": "20_canaries", "sweep": "30_load_sweep"}
CAMPAIGN_NOTEBOOK = "40_analysis"
TEXT_SUFFIXES = {".ipynb", ".json", ".jsonl", ".md", ".log", ".yaml", ".html", ".txt", ".csv"}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Manifest:
    """manifest.json: per arm and notebook, status, timings and hashes; rewritten atomically."""

    def __init__(self, run_dir: Path, campaign: Campaign, campaign_file: str):
        self.path = run_dir / "manifest.json"
        self.data = read_json(self.path) or {
            "campaign": campaign.name, "campaign_file": relative_to_repo(campaign_file), "status": "running",
            "created_unix": time.time(), "arms": {}, "analysis": {}}

    def save(self) -> None:
        write_json_atomic(self.path, self.data)

    def arm(self, name: str) -> dict:
        return self.data["arms"].setdefault(name, {"status": "pending", "notebooks": {}})


def redact(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "[REDACTED]")
    return text


def campaign_secrets(campaign: Campaign) -> list[str]:
    """Values of every API-key variable an arm names (they must never reach a file)."""
    out = []
    for arm in campaign.arms:
        env = getattr(arm.engine, "api_key_env", None)
        if env and os.environ.get(env):
            out.append(os.environ[env])
    return out


def make_portable(run_dir: Path, secrets: list[str]) -> list[str]:
    """Rewrite every text file of a run with symbolic paths and secrets redacted.

    Returns the absolute paths that survived (there should be none)."""
    leftovers = []
    for p in run_dir.rglob("*"):
        if not p.is_file() or p.suffix not in TEXT_SUFFIXES:
            continue
        text = p.read_text(errors="replace")
        new = redact(symbolic(text), secrets)
        if new != text:
            p.write_text(new)
        leftovers += [f"{p.relative_to(run_dir)}: {symbolic(a)}" for a in absolute_paths_in(new)]
    return leftovers


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


class _RequestProgress:
    """A bar of requests completed, read from the arm's requests.jsonl while a notebook runs."""

    def __init__(self, path: Path, total: int, desc: str, enabled: bool):
        self.path, self.start = path, _count_lines(path)
        self.bar = tqdm(total=total, desc=desc, unit="req", leave=False, disable=not enabled)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.5):
            n = min(self.bar.total, _count_lines(self.path) - self.start)
            if n != self.bar.n:
                self.bar.update(n - self.bar.n)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(2)
        self.bar.close()


def execute_notebook(name: str, out_path: Path, parameters: dict) -> float:
    import papermill as pm

    t = time.monotonic()
    pm.execute_notebook(f"notebooks/{name}.ipynb", str(out_path), parameters=parameters,
                        kernel_name="python3", cwd=".", progress_bar=False, log_output=False,
                        request_save_on_cell_execute=True)
    return time.monotonic() - t


def notebook_ok(manifest_arm: dict, name: str, out_path: Path) -> bool:
    entry = manifest_arm["notebooks"].get(name, {})
    return entry.get("status") == "ok" and out_path.exists() and entry.get("sha256") == sha256_file(out_path)


def run_campaign(campaign_file: str, run_id: str | None = None, resume: str | None = None,
                 only_arms: list[str] | None = None, progress: bool = True, log=print) -> Path:
    """Execute a campaign into outputs/<campaign>/<run-id>/ and return that directory."""
    os.chdir(REPO_ROOT)
    if resume:
        run_dir = Path(resume)
        prior = yaml.safe_load((run_dir / "campaign.resolved.yaml").read_text())
        campaign_file = prior.get("_source", campaign_file)
        campaign = load_campaign(run_dir / "campaign.resolved.yaml")
    else:
        campaign = load_campaign(campaign_file)
        run_id = run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        run_dir = Path("outputs") / campaign.name / run_id
        if (run_dir / "manifest.json").exists():
            raise FileExistsError(f"{run_dir} already holds a run; use --resume {run_dir} to continue it")
        run_dir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(os.path.relpath(run_dir.resolve(), REPO_ROOT))
    secrets = campaign_secrets(campaign)
    resolved = run_dir / "campaign.resolved.yaml"
    if not resolved.exists():
        dumped = campaign.model_dump(mode="json", by_alias=True)
        resolved.write_text(redact(yaml.safe_dump(dumped, sort_keys=False), secrets))
    manifest = Manifest(run_dir, campaign, str(campaign_file))
    manifest.data["status"] = "running"
    manifest.data["campaign_sha256"] = sha256_file(resolved)
    manifest.save()
    arms = [a for a in campaign.arms if not only_arms or a.name in only_arms]
    steps = tqdm(total=len(arms) * (len(ARM_NOTEBOOKS) + 1) + 1, desc=campaign.name, unit="step",
                 disable=not progress)
    for arm in arms:
        entry = manifest.arm(arm.name)
        if entry["status"] == "complete":
            steps.update(len(ARM_NOTEBOOKS) + 1)
            continue
        arm_dir = run_dir / "arms" / arm.name
        arm_dir.mkdir(parents=True, exist_ok=True)
        stages = campaign.protocol_for(arm).stages
        needs_engine = bool({"canaries", "sweep"} & set(stages))
        notebooks = [STAGE_NOTEBOOK[st] for st in ("sizing", "canaries", "sweep") if st in stages]
        steps.update(len(ARM_NOTEBOOKS) - len(notebooks))
        adapter = adapter_for(campaign, arm, log_path=arm_dir / "engine.log" if needs_engine else None)
        t_arm = time.monotonic()
        entry.update(status="running", engine=arm.engine.kind, stages=list(stages))
        manifest.save()
        if needs_engine:
            steps.set_postfix_str(f"{arm.name}: starting {arm.engine.kind}")
            try:
                adapter.start()
                adapter.wait_ready()
            except (EngineStartError, FileNotFoundError, OSError, RuntimeError) as err:
                adapter.stop()
                entry.update(status="failed", error=symbolic(str(err))[-2000:])
                manifest.save()
                log(f"arm {arm.name}: engine did not start: {err}")
                steps.update(len(notebooks) + 1)
                continue
        try:
            if needs_engine:
                record_engine(adapter, arm_dir, restarts=entry.get("restarts", 0))
                entry["engine_ready_s"] = adapter.ready_after_s
            steps.update(1)
            for name in notebooks:
                out = arm_dir / f"{name}.ipynb"
                if notebook_ok(entry, name, out):
                    steps.update(1)
                    continue
                if name == "30_load_sweep":
                    canaries = (read_json(arm_dir / "results.json", {}) or {}).get("canaries", {})
                    if canaries.get("verdict") != "PASS" and not campaign.protocol_for(arm).canaries.run_sweep_on_hold:
                        entry["notebooks"][name] = {"status": "skipped", "reason": f"canaries {canaries.get('verdict', 'missing')}: "
                                                    "set protocol.canaries.run_sweep_on_hold to measure anyway"}
                        manifest.save()
                        steps.update(1)
                        continue
                steps.set_postfix_str(f"{arm.name}: {name}")
                entry["notebooks"][name] = {"status": "running"}
                manifest.save()
                params = {"campaign_file": str(resolved), "run_dir": str(run_dir), "arm": arm.name,
                          "endpoint": adapter.base_url if needs_engine else None, "run_id": run_dir.name,
                          "start_engine": needs_engine}
                p = campaign.protocol_for(arm)
                total = sum(requests_at(p, c) for c in p.arrival.concurrency) * p.repetitions
                try:
                    with _RequestProgress(arm_dir / "requests.jsonl", total, f"{arm.name} requests",
                                          progress and name == "30_load_sweep"):
                        secs = execute_notebook(name, out, params)
                    entry["notebooks"][name] = {"status": "ok", "seconds": round(secs, 1), "sha256": sha256_file(out)}
                except Exception as err:  # papermill raises PapermillExecutionError with the cell's traceback
                    entry["notebooks"][name] = {"status": "failed", "error": symbolic(str(err))[-3000:]}
                    entry["status"] = "failed"
                    if not adapter.is_alive():
                        entry["engine_exit"] = adapter.proc.returncode if adapter.proc else None
                    manifest.save()
                    log(f"arm {arm.name}: {name} failed: {str(err).splitlines()[0] if str(err) else err}")
                    break
                manifest.save()
                steps.update(1)
        finally:
            steps.set_postfix_str(f"{arm.name}: stopping engine")
            # Capacity lines can arrive late in the log: record them once more before stopping.
            if needs_engine:
                if adapter.is_alive():
                    record_engine(adapter, arm_dir, restarts=entry.get("restarts", 0))
                entry["engine_exit_code"] = adapter.stop()
        write_passport(campaign, arm, arm_dir)
        if entry["status"] == "running":
            entry["status"] = "complete"
        entry["seconds"] = round(time.monotonic() - t_arm, 1)
        manifest.save()
    steps.set_postfix_str("analysis")
    out = run_dir / f"{CAMPAIGN_NOTEBOOK}.ipynb"
    try:
        secs = execute_notebook(CAMPAIGN_NOTEBOOK, out, {"run_dir": str(run_dir)})
        manifest.data["analysis"] = {"status": "ok", "seconds": round(secs, 1), "sha256": sha256_file(out)}
        write_report(out, run_dir / "report.html")
    except Exception as err:
        manifest.data["analysis"] = {"status": "failed", "error": symbolic(str(err))[-3000:]}
    steps.update(1)
    steps.close()
    statuses = [manifest.arm(a.name)["status"] for a in arms]
    manifest.data["status"] = "complete" if all(s == "complete" for s in statuses) and \
        manifest.data["analysis"].get("status") == "ok" else "incomplete"
    manifest.data["finished_unix"] = time.time()
    manifest.save()
    leftovers = make_portable(run_dir, secrets)
    manifest.data["outputs"] = {str(p.relative_to(run_dir)): sha256_file(p) for p in sorted(run_dir.rglob("*"))
                                if p.is_file() and p.name != "manifest.json"}
    manifest.data["absolute_paths_left"] = leftovers
    manifest.save()
    return run_dir


def write_report(notebook: Path, html_path: Path) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(notebook, as_version=4)
    body, _ = HTMLExporter(exclude_input_prompt=True, exclude_output_prompt=True).from_notebook_node(nb)
    html_path.write_text(body)

