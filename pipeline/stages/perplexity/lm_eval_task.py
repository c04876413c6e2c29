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


class TaskWriter:
    """Writes `val.jsonl` into `task_dir` document by document, and `<task>.yaml` on close; the
    YAML names the data file by its path once the artifact is committed (`final_task_dir`)."""

    def __init__(self, task_dir: Path, final_task_dir: Path) -> None:
        task_dir.mkdir(parents=True, exist_ok=True)
        self.task_dir, self.final_task_dir = task_dir, final_task_dir
        self.documents = 0
        self._handle = open(task_dir / "val.jsonl", "w", encoding="utf-8")  # noqa: SIM115

    def add(self, texts: Iterable[str]) -> None:
        for text in texts:
            self._handle.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            self.documents += 1

    def close(self) -> int:
        """Finish the task; returns the number of documents."""
        if not self._handle.closed:
            self._handle.close()
            yaml = TEMPLATE.format(
                task=TASK, data=json.dumps(str(self.final_task_dir / "val.jsonl"))
            )
            (self.task_dir / f"{TASK}.yaml").write_text(yaml, encoding="utf-8")
        return self.documents

    def __enter__(self) -> TaskWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_task(task_dir: Path, final_task_dir: Path, texts: Iterable[str]) -> int:
    """Write the task of `texts` (see `TaskWriter`). Returns the number of documents."""
    with TaskWriter(task_dir, final_task_dir) as task:
        task.add(texts)
    return task.documents
