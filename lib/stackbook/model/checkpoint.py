"""What a checkpoint ships: its tensors' exact count and bytes from the safetensors headers (no
weights read), and the weight precision its `quantization_config` declares."""
from __future__ import annotations

import json
from pathlib import Path

from stackbook.locations import symbolic

SAFETENSORS_DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
                           "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1,
                           "BOOL": 1, "F4": 0.5}


def safetensors_totals(directory: Path) -> dict | None:
    """Parameters (elements), bytes and bytes per dtype of every safetensors file in `directory`;
    None when there are none."""
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    elements, by_dtype = 0, {}
    for f in files:
        try:
            with open(f, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                header = json.loads(fh.read(n))
        except (OSError, ValueError) as err:
            raise ValueError(f"{symbolic(f)}: not a readable safetensors file "
                             f"({err}); remove it or re-download it") from None
        for key, t in header.items():
            if key == "__metadata__":
                continue
            count = 1
            for d in t["shape"]:
                count *= d
            elements += count
            by_dtype[t["dtype"]] = by_dtype.get(t["dtype"], 0) + count * SAFETENSORS_DTYPE_BYTES.get(t["dtype"], 0)
    return {"parameters": elements, "bytes": int(sum(by_dtype.values())), "bytes_by_dtype": by_dtype,
            "source": f"safetensors headers of {len(files)} file(s) in {symbolic(directory)}"}


def indexed_bytes(directory: Path) -> int | None:
    """`metadata.total_size` of model.safetensors.index.json: the checkpoint's bytes before the shards
    are downloaded."""
    index = directory / "model.safetensors.index.json"
    if not index.exists():
        return None
    try:
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
    except ValueError:
        return None
    return int(total) if isinstance(total, (int, float)) and total > 0 else None


def shipped_precision(cfg: dict, where: str = "config") -> tuple[str | None, str]:
    """The weight precision a `quantization_config` declares, and how it was read; (None, ...) for
    a checkpoint in its training dtype. A method this does not know is refused by name."""
    q = cfg.get("quantization_config")
    if not q:
        return None, "no quantization_config: bf16 unless --weights says otherwise"
    if not isinstance(q, dict):
        raise ValueError(f"{where}: quantization_config must be an object, e.g. {{\"quant_method\": \"fp8\"}}")
    method = str(q.get("quant_method", "")).lower()
    bits = q.get("bits") or q.get("w_bit") or q.get("weight_bits")
    if method == "fp8":
        prec = "fp8"
    elif method == "mxfp4":
        prec = "mxfp4"
    elif method in ("awq", "gptq") and bits in (4, 8):
        prec = "int4" if bits == 4 else "int8"
    elif method == "bitsandbytes" and (q.get("load_in_4bit") or q.get("load_in_8bit")):
        prec = "int4" if q.get("load_in_4bit") else "int8"
    else:
        raise ValueError(f"{where}: quantization_config quant_method {method or None!r} (bits {bits!r}) is not one the "
                         "sizing reads (fp8, mxfp4, awq or gptq with bits 4 or 8, bitsandbytes 4/8-bit); give "
                         "--weights or --artifact-bytes")
    return prec, (f"quantization_config {method}: every parameter at {prec} (the layers it leaves unquantized make "
                  "the checkpoint somewhat larger; a model directory's safetensors give its exact bytes)")
