"""Convert a GGUF chat model to a Hugging Face directory that vLLM serves, offline.

    python scripts/gguf_to_hf.py FILE.gguf OUT_DIR

Runs in the CPU vLLM's venv (transformers, torch) with `gguf` and `accelerate` on the path
(scripts/setup_planner_model.sh puts them in a directory of their own).  The installed vLLM
has no GGUF loader, so the weights are de-quantized by transformers' GGUF loader to float32
safetensors; the tokenizer and its chat template come from the GGUF's own metadata (no hub).
Then a greedy answer to one question checks that the converted model still talks sense.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

#: a question whose answer a working SmolLM2-135M-Instruct gets right, greedily
CHECK = ("What is the capital of France? Answer in one word.", "Paris")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    gguf, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    t0 = time.monotonic()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    packed = sorted({type(m).__name__ for m in model.modules() if "gguf" in type(m).__name__.lower()})
    if packed or {p.dtype for p in model.parameters()} != {torch.float32}:
        print(f"gguf_to_hf: weights not de-quantized (modules {packed})", file=sys.stderr)
        return 1
    # every weight is a float32 tensor now; the GGUF quantizer left on the model only blocks saving
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    if not tok.chat_template:
        print("gguf_to_hf: the GGUF carries no chat template", file=sys.stderr)
        return 1
    question, expect = CHECK
    ids = tok.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        gen = model.generate(**ids, max_new_tokens=12, do_sample=False)
    answer = tok.decode(gen[0][ids["input_ids"].shape[1] :], skip_special_tokens=True)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"gguf_to_hf: {params / 1e6:.1f}M parameters, {len(tok)} tokens, float32 in {out} "
        f"({time.monotonic() - t0:.0f} s); check: {question!r} -> {answer.strip()!r}"
    )
    if expect not in answer:
        print(f"gguf_to_hf: the converted model answered {answer!r}, expected {expect!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
