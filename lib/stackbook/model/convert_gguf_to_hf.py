"""Dequantize a GGUF to a bf16 Hugging Face checkpoint. Runs in the vLLM environment (torch,
transformers, gguf, accelerate), as a script: python convert_gguf_to_hf.py SRC.gguf OUT_DIR."""
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main(src: str, out: str) -> None:
    src_p = Path(src)
    tok = AutoTokenizer.from_pretrained(str(src_p.parent), gguf_file=src_p.name)
    tok.save_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(str(src_p.parent), gguf_file=src_p.name, dtype=torch.bfloat16)
    model.hf_quantizer = None  # save_pretrained refuses a model that still names its GGUF quantizer
    model.config.__dict__.pop("quantization_config", None)
    model.save_pretrained(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
