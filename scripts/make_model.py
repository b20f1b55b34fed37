"""Build a random-weight Llama and a locally trained BPE tokenizer: a real model for
vLLM on the CPU without any download.

Two sizes: `tiny` (0.6M params, front-end bound: smoke tests) and `medium` (28M params:
engine configurations differ measurably).  Deterministic (seeded), so every machine
serves the same model.  Runs with the engine's venv python (torch, transformers,
tokenizers).  Head dim stays >= 32: 16 crashes vLLM's CPU attention at the first request.
The output rows of special tokens and of tokens that are not printable ASCII (lone
UTF-8 bytes, control characters) are zeroed: with random weights, greedy decoding
otherwise loops on a lone byte for some prompts and streams 32 tokens of empty text,
which a load generator rightly counts as a broken stream.

    python scripts/make_model.py --size medium OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
from pathlib import Path

SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4},
    "medium": {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 8},
}
VOCAB_SIZE = 1024
MAX_POSITIONS = 2048
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)


def training_text(seed: int = 0) -> list[str]:
    """Random 'words' in random sentences: enough for a BPE vocabulary of 1024."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 8))) for _ in range(3000)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) for _ in range(5000)]


def unprintable_tokens(tok: object) -> list[int]:
    """Ids whose text is empty, special, or not printable ASCII on its own."""
    ids = []
    for token_id in range(tok.get_vocab_size()):  # type: ignore[attr-defined]
        text = tok.decode([token_id], skip_special_tokens=False)  # type: ignore[attr-defined]
        if not text or text in SPECIAL_TOKENS or not (text.isascii() and text.isprintable()):
            ids.append(token_id)
    return ids


def build(size: str, out: Path) -> dict[str, int]:
    """Write tokenizer + config + safetensors weights into `out`; return a summary."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    dims = SIZES[size]
    if dims["hidden_size"] // dims["num_attention_heads"] < 32:
        raise ValueError("head dim below 32 crashes vLLM's CPU attention")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(training_text(), trainer)
    ftok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=MAX_POSITIONS,
    )
    ftok.chat_template = CHAT_TEMPLATE
    ftok.save_pretrained(out)
    cfg = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        num_key_value_heads=dims["num_attention_heads"],
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=ftok.bos_token_id,
        eos_token_id=ftok.eos_token_id,
        pad_token_id=ftok.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
        **dims,
    )
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():  # logit 0: greedy never picks them (see module doc)
        for token_id in unprintable_tokens(tok):
            model.lm_head.weight[token_id].zero_()
    model.save_pretrained(out, safe_serialization=True)
    return {
        "vocab": tok.get_vocab_size(),
        "params": sum(p.numel() for p in model.parameters()),
        "masked_tokens": len(unprintable_tokens(tok)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), required=True)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    summary = build(args.size, args.out)
    print(json.dumps({"size": args.size, "path": str(args.out.resolve()), **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
