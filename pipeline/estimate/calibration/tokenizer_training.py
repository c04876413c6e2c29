"""BPE training as the `train_tokenizer` stage trains (`train_on_sample`), in a fresh process
whose peak RSS is the training's: the `train_tokenizer` calibration case and
`bench/tokenizer_sample.py` time and measure it so.

    python -m lmforge.pipeline.estimate.calibration.tokenizer_training CLEAN_DIR OUT_FILE
        SAMPLE_BYTES VOCAB MIN_WORD_COUNT       # the fresh process `train` starts
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def peak_rss_mb() -> float:
    """VmHWM of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def train_worker(
    clean_dir: str, out_file: str, sample_bytes: int, vocab: int, min_word_count: int
) -> None:
    """Run in a fresh process: the stage's training, then one JSON line with its peak RSS."""
    from lmforge.pipeline.stages.train_tokenizer.stage import train_on_sample
    from lmforge.tokenizer import TokenizerConfig

    cfg = TokenizerConfig(
        vocab_size=vocab, sample_bytes=sample_bytes, min_word_count=min_word_count
    )
    tok, stats, words = train_on_sample(Path(clean_dir), cfg)
    tok.save(out_file)
    summary = {**stats.to_summary(), **words.to_summary()}
    print(json.dumps({"peak_rss_mb": round(peak_rss_mb(), 1), **summary}))


def train(
    clean_dir: Path, out_file: Path, sample_bytes: int, vocab: int, min_word_count: int
) -> dict:
    """The stage's training on the split in `clean_dir`, in a fresh process: its summary, peak
    RSS and wall time (the process's start and imports included)."""
    command = [sys.executable, "-m", __spec__.name, str(clean_dir), str(out_file)]
    settings = [str(sample_bytes), str(vocab), str(min_word_count)]
    started = time.perf_counter()
    done = subprocess.run([*command, *settings], capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"training on {sample_bytes} bytes failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "wall_s": round(time.perf_counter() - started, 1)}


if __name__ == "__main__":
    train_worker(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
