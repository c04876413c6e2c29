"""Generation throughput of lmforge against transformers, on the same model in one run.

Builds a random-init model (the `small` preset, vocab 8192 by default), exports it with
`export_hf`, and times greedy decoding of the same prompts for the same number of new tokens:
lmforge with its KV cache, lmforge recomputing the context every step, and
`transformers.GPT2LMHeadModel.generate` (with its cache) on the export. Each contender is warmed
up first; timed runs then alternate between contenders and the best of --repeats counts.
Prints a table, then as its last line one JSON object: {"bench": "generate_throughput",
"unit": "tokens/s", "lmforge": X, "reference": Y, "ratio": X/Y, "no_cache": Z}, where
reference is transformers and X is lmforge with the cache.

Run:  .venv/bin/python bench/generate_throughput.py [--threads 2] [--batch 4] [--new-tokens 128]
      python bench/generate_throughput.py --device cuda --preset gpt2    # on a GPU, bf16 autocast

With `--device cuda` both sides run on the GPU under bf16 autocast with fp32 weights, as the
eval stages' model actors do (`ModelWorker.apply`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable

import torch

from lmforge.model import GPT, ModelConfig, SamplingConfig
from lmforge.model.generate import generate
from lmforge.model.hf_export import export_hf


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="small", help="model preset (MODEL_PRESETS)")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--batch", type=int, default=4, help="prompts decoded together")
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    return parser.parse_args()


def _time_round_robin(
    contenders: dict[str, Callable[[], list[list[int]]]], repeats: int
) -> dict[str, tuple[float, list[list[int]]]]:
    """Best wall time and output of each contender; runs alternate so that a change in machine
    load during the benchmark hits every contender alike."""
    outputs = {name: run() for name, run in contenders.items()}  # warm-up
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(repeats):
        for name, run in contenders.items():
            start = time.perf_counter()
            outputs[name] = run()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: (best[name], outputs[name]) for name in contenders}


def _contenders(args: argparse.Namespace, model: GPT) -> dict[str, Callable[[], list[list[int]]]]:
    """The three ways to decode the same prompts: lmforge with/without cache, transformers."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as export_dir:
        export_hf(model, export_dir)
        hf = AutoModelForCausalLM.from_pretrained(export_dir).eval().to(args.device)
    prompts = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt_len))

    def context():
        if args.device == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def ours(use_cache: bool) -> Callable[[], list[list[int]]]:
        sampling = SamplingConfig(max_new_tokens=args.new_tokens, greedy=True, use_cache=use_cache)

        def run() -> list[list[int]]:
            with context():
                return generate(model, prompts.tolist(), sampling)

        return run

    def reference() -> list[list[int]]:
        on_device = prompts.to(args.device)
        with context():
            out = hf.generate(
                on_device,
                attention_mask=torch.ones_like(on_device),
                do_sample=False,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                eos_token_id=None,
                pad_token_id=0,
            )
        return out[:, args.prompt_len :].tolist()

    return {
        "lmforge (KV cache)": ours(True),
        "lmforge (no cache)": ours(False),
        "transformers generate": reference,
    }


def main() -> None:
    args = _parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = ModelConfig.from_preset(args.preset, vocab_size=args.vocab_size)
    if args.prompt_len + args.new_tokens > cfg.block_size:
        raise SystemExit(
            f"--prompt-len + --new-tokens must fit block_size={cfg.block_size} of {args.preset}"
        )
    model = GPT(cfg).eval().to(args.device)
    timings = _time_round_robin(_contenders(args, model), args.repeats)
    rates = {name: args.batch * args.new_tokens / sec for name, (sec, _) in timings.items()}

    print(
        f"model: {args.preset} (d={cfg.d_model}, layers={cfg.n_layer}, vocab={cfg.vocab_size}), "
        f"{model.num_parameters(non_embedding=False) / 1e6:.1f}M params; batch {args.batch}, "
        f"prompt {args.prompt_len}, {args.new_tokens} new tokens, greedy, "
        f"{args.threads} thread(s), torch {torch.__version__}, {args.device}"
    )
    print(f"{'contender':<24}{'tokens/s':>12}{'seconds':>10}")
    for name, (seconds, _) in timings.items():
        print(f"{name:<24}{rates[name]:>12.1f}{seconds:>10.3f}")
    same = timings["lmforge (KV cache)"][1] == timings["transformers generate"][1]
    print(f"same greedy tokens as transformers: {'yes' if same else 'NO'}")
    ours_rate, reference_rate = rates["lmforge (KV cache)"], rates["transformers generate"]
    summary = {
        "bench": "generate_throughput",
        "unit": "tokens/s",
        "lmforge": round(ours_rate, 2),
        "reference": round(reference_rate, 2),
        "ratio": round(ours_rate / reference_rate, 4),
        "no_cache": round(rates["lmforge (no cache)"], 2),
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "same_greedy_tokens": same,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
