"""An lm-evaluation-harness task for the validation split, written next to the perplexity
results, so `lm_eval --model hf --model_args pretrained=<pretrain>/hf --include_path <dir>
--tasks lmforge_val` scores the exported model offline on exactly our documents."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

TASK = "lmforge_val"

TEMPLATE = """task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    validation: {data}
validation_split: validation
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
should_decontaminate: false
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
metadata:
  version: 1.0
"""


def write_task(task_dir: Path, final_task_dir: Path, texts: Iterable[str]) -> int:
    """Write `<task>.yaml` and `val.jsonl` into `task_dir`; the YAML names the data file by its
    path once the artifact is committed (`final_task_dir`). Returns the number of documents."""
    task_dir.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(task_dir / "val.jsonl", "w", encoding="utf-8") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            n += 1
    yaml = TEMPLATE.format(task=TASK, data=json.dumps(str(final_task_dir / "val.jsonl")))
    (task_dir / f"{TASK}.yaml").write_text(yaml, encoding="utf-8")
    return n
