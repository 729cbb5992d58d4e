"""A GPU run prepared end to end: on a CUDA machine with torch and transformers and no network,
one command builds a small model, runs a real two-arm campaign of the transformers kind on it
(the attention implementation is the variable under test) and writes one folder with the
campaign's records, its report, and a summary of what only a GPU shows: telemetry through NVML,
energy per output token where the card reports energy, and the memory it realized beside what
the sizing predicted.

The model is built, not fetched: the embedded checkpoint's architecture and tokenizer, shrunk to
a few million random weights (a few MiB), so it travels with the checkout. Its answers are
noise, so its gate checks only what random weights can pass (greedy decoding repeats itself
exactly; RANDOM_WEIGHTS_SUITE) and no sentinel rides in the load; its lengths are forced, so the
load is real. The same steps run on the CPU as a rehearsal (`--device cpu`), which CI runs; on a
host without CUDA the GPU run says so and exits 3.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.records import read_records
from stackbook.locations import REPO_ROOT, shown

CAMPAIGN = "gpu-transformers"
NO_CUDA = 3
# The embedded model's family at a size that builds in seconds and serves in milliseconds.
TINY = {"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 2048}
ATTENTIONS = ("sdpa", "eager")
# Measured requests a point: the rehearsal checks the steps, not the figures, so it sends fewer (at
# four clients a closed loop needs 27 to hold its load at all).
REQUESTS = {"cuda": 48, "cpu": 30}
KV_BLOCKS, KV_BLOCK_TOKENS = 64, 32  # a paged pool the sizing can predict (transformers sizes it otherwise)
# The gate a random model can pass: the engine's greedy decoding is deterministic.
RANDOM_WEIGHTS_SUITE = {"suite": "random-weights", "version": 1, "checks": [
    {"id": "greedy-repeats-exactly", "kind": "determinism", "prompt": "Write one sentence about the sea.",
     "repeats": 3, "concurrent": False, "max_tokens": 16}]}


def cuda_of(python: str) -> dict:
    """What torch in the engine's interpreter sees: CUDA or not, and the device's name."""
    probe = ("import json, torch; ok = torch.cuda.is_available(); "
             "print(json.dumps({'cuda': ok, 'name': torch.cuda.get_device_name(0) if ok else None, "
             "'torch': torch.__version__}))")
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {"cuda": False, "name": None, "error": f"{python} could not import torch"}


def accelerator_for(device_name: str | None) -> str:
    """The accelerator catalog's key for a CUDA device name ("NVIDIA H200" -> h200); this-cpu on the CPU."""
    from stackbook.sizing.hardware import accelerator_catalog
    if not device_name:
        return "this-cpu"
    words = device_name.lower().replace("nvidia", "").replace("-", " ").split()
    for key, acc in accelerator_catalog().items():
        if acc.platform == "nvidia" and words and key.split("-")[0] == words[0]:
            return key
    raise ValueError(f"the CUDA device {device_name!r} is not in the accelerator catalog "
                     "(lib/stackbook/data): add it there, or pass --accelerator KEY")


def build_model(dest: Path, tokenizer_dir: Path, seed: int = 0) -> dict:
    """The embedded checkpoint's config and tokenizer with TINY's sizes and seeded random bf16 weights."""
    import torch
    import transformers
    missing = [f for f in ("config.json", "tokenizer.json") if not (tokenizer_dir / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{shown(tokenizer_dir)} lacks {', '.join(missing)}: run `make setup` (it writes the "
                                "embedded checkpoint), or pass --tokenizer DIR holding a config and a tokenizer with "
                                "a chat template")
    config = transformers.AutoConfig.from_pretrained(tokenizer_dir)
    for key, value in TINY.items():
        setattr(config, key, value)
    config.head_dim = TINY["hidden_size"] // TINY["num_attention_heads"]
    config.dtype = "bfloat16"
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    transformers.AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(dest)  # with its chat template
    if (tokenizer_dir / "generation_config.json").is_file():
        shutil.copy(tokenizer_dir / "generation_config.json", dest / "generation_config.json")
    params = sum(p.numel() for p in model.parameters())
    return {"parameters": params, "bytes": sum(f.stat().st_size for f in dest.iterdir()), "seed": seed,
            "built_from": "the embedded checkpoint's config and tokenizer, random weights", **TINY}


def campaign_for(model_dir: Path, device: str, accelerator: str, python: str | None) -> dict:
    """Two arms that differ only in the attention implementation, under one fixed protocol; the
    gate's suite is written beside the model (canaries.yaml)."""
    engine = {"kind": "transformers", "device": device, "cb_num_blocks": KV_BLOCKS, "cb_block_size": KV_BLOCK_TOKENS}
    if python:
        engine["python"] = python
    return {
        "name": CAMPAIGN,
        "description": f"transformers serve on {device}: sdpa against eager attention on a small random model "
                       "(the embedded model's architecture), lengths forced, greedy decoding",
        "model": {"name": "smollm2-tiny-random", "source": "path", "hf_path": str(model_dir.relative_to(REPO_ROOT))},
        "hardware": {"accelerator": accelerator},
        "protocol": {
            "canaries": {"suite": str((model_dir.parent / "canaries.yaml").relative_to(REPO_ROOT)),
                         "sentinel_share": 0},
            "precision": {"weights": "bf16", "kv_cache": "bf16", "state": "none"},
            "decoding": {"preset": "greedy", "seed": 0},
            "workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 16},
            "arrival": {"kind": "closed_loop", "concurrency": [1, 4]},
            "context_length": 256, "requests_per_point": REQUESTS[device], "warmup_requests": 2, "repetitions": 2,
            "request_timeout_s": 120, "slo": {"ttft_ms": 2000, "tpot_ms": 200}},
        "arms": [{"name": a, "description": f"attn_implementation: {a}",
                  "engine": engine | {"attn_implementation": a}} for a in ATTENTIONS]}


def point_energy(point: dict, records: list) -> dict:
    """Energy over one point (every GPU) and per output token the engine produced in it."""
    gpus = ((point.get("gpu_during") or {}).get("gpus") or {}).values()
    joules = [g["energy_j"] for g in gpus if g.get("energy_j") is not None]
    tokens = sum(r.output_tokens_server or r.output_tokens_client for r in records if r.ok)
    if not joules or not tokens:
        return {"energy": f"not measured: {(point.get('gpu_during') or {}).get('reason', 'no GPU samples')}"}
    sources = sorted({g.get("energy_source") for g in gpus if g.get("energy_j") is not None})
    return {"energy_j": round(sum(joules), 2), "output_tokens": tokens,
            "joules_per_output_token": round(sum(joules) / tokens, 5), "energy_source": ", ".join(sources),
            "gpu_memory_gib_peak": max(g.get("memory_used_gib_peak", 0) for g in gpus)}


def memory_against_sizing(results: dict, point_rows: list[dict], on_gpu: bool) -> dict:
    """What the sizing predicted (weights plus the paged pool) beside what the device held."""
    sizing = results.get("sizing") or {}
    pool = (sizing.get("predicted_capacity") or {}).get("kv_pool_bytes")
    weights = sizing.get("weights_bytes")
    predicted = (weights or 0) + (pool or 0)
    if on_gpu:
        peaks = [r["gpu_memory_gib_peak"] for r in point_rows if "gpu_memory_gib_peak" in r]
        realized, what = (max(peaks) * 2**30 if peaks
                          else None), "the GPU's memory in use at its peak (NVML, whole device)"
    else:
        rss = (results.get("sweep") or {}).get("peak_engine_rss_gib")
        realized, what = (rss * 2**30 if rss else None), "the engine's resident memory at its peak (the CPU rehearsal)"
    out = {"predicted_bytes": predicted, "weights_bytes": weights, "kv_pool_bytes": pool, "realized_bytes": realized,
           "realized_is": what,
           "not_predicted": "the runtime itself (CUDA context, torch's allocator reserve, activations, the server)"}
    if realized:
        out["realized_minus_predicted_bytes"] = realized - predicted
    return out


def summarize(run: RunDir, on_gpu: bool) -> dict:
    """Per arm: attention, memory against sizing, energy per point; the verdict's lines."""
    arms = {}
    for arm in (run.arm(a) for a in ATTENTIONS):
        results = json.loads(arm.results.read_text())
        engine = json.loads(arm.engine_json.read_text()) if arm.engine_json.exists() else {}
        records = read_records(arm.requests, latest_attempt=True)
        rows = []
        for name, point in sorted(((results.get("sweep") or {}).get("points") or {}).items()):
            mine = [r for r in records if r.point == name]
            rows.append({"point": name, "load": point.get("load"),
                         "output_tok_s": point.get("output_throughput_tok_s"), **point_energy(point, mine)})
        arms[arm.name] = {"attention": (engine.get("identity") or {}).get("attention_implementation"),
                          "device": (engine.get("identity") or {}).get("device"), "points": rows,
                          "memory": memory_against_sizing(results, rows, on_gpu)}
    analysis = json.loads(run.analysis.read_text()) if run.analysis.exists() else {}
    return {"arms": arms, "verdict": analysis.get("verdict")}


def run_gpu_campaign(device: str = "cuda", python: str | None = None, tokenizer: Path | None = None,
                     run_id: str | None = None, accelerator: str | None = None, log=print) -> int:
    """Build, run, summarize; 0 when the campaign completed, 3 when a GPU run finds no CUDA."""
    from stackbook.engines.transformers_serve import TransformersAdapter
    from stackbook.model.artifacts import embedded_artifacts
    from stackbook.runner import run_campaign
    own = str(TransformersAdapter.install_dir() / "bin" / "python")  # the kind's environment, where set up
    engine_python = python or (own if Path(own).exists() else sys.executable)
    seen = cuda_of(engine_python)
    if device == "cuda" and not seen.get("cuda"):
        log(f"no CUDA device here: torch in {engine_python} sees none ({seen.get('error') or 'cuda unavailable'}). "
            "This run measures a GPU; rehearse it on this CPU with --device cpu.")
        return NO_CUDA
    accelerator = accelerator or accelerator_for(seen.get("name") if device == "cuda" else None)
    started = time.time()
    run = RunDir.new(CAMPAIGN, run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    folder = REPO_ROOT / run.path
    if (folder / "manifest.json").exists():
        raise FileExistsError(f"{shown(folder)} already holds a run: pass another --run-id")
    model = build_model(folder / "model", tokenizer or embedded_artifacts().hf_dir)
    log(f"built the model: {model['parameters']:,} parameters, {model['bytes'] / 2**20:.1f} MiB")
    (folder / "canaries.yaml").write_text(yaml.safe_dump(RANDOM_WEIGHTS_SUITE, sort_keys=False))
    campaign_file = folder / "campaign.yaml"
    campaign_file.write_text(yaml.safe_dump(campaign_for(folder / "model", device, accelerator,
                                                                  None if engine_python == own else engine_python),
                                            sort_keys=False))
    done = RunDir(REPO_ROOT / run_campaign(str(campaign_file.relative_to(REPO_ROOT)), run_id=folder.name, log=log).path)
    manifest = json.loads(done.manifest.read_text())
    summary = {"device": device, "cuda": seen, "accelerator": accelerator, "model": model,
               "status": manifest.get("status"), "wall_s": round(time.time() - started, 1),
               **summarize(done, on_gpu=device == "cuda")}
    (done.path / "gpu_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    log(f"{done.path.relative_to(REPO_ROOT)}: {summary['status']} in {summary['wall_s']:.0f} s; gpu_summary.json holds "
        "telemetry, energy per output token and memory against sizing")
    return 0 if summary["status"] == "complete" else 1
