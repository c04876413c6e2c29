"""Loading the trained model and tokenizer from their artifacts, and text-level helpers the
eval stages share (continuations, sentence log-probabilities)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from lmforge.model.generate import SamplingConfig, generate
from lmforge.model.gpt import GPT
from lmforge.model.weights import load_model_dir
from lmforge.tokenizer.convention import encode_document, eot_id
from lmforge.tokenizer.io import load_tokenizer


class TrainedModel:
    """A trained GPT with its tokenizer, in eval mode (on CPU unless `device` says otherwise)."""

    def __init__(self, pretrain_dir: Path, tokenizer_dir: Path, device: str = "cpu") -> None:
        self.model: GPT = load_model_dir(Path(pretrain_dir) / "model").to(device).eval()
        self.tok = load_tokenizer(tokenizer_dir)
        self.eot = eot_id(self.tok)

    def complete(self, prompts: list[str], sampling: SamplingConfig) -> list[str]:
        """Continuations (text after the prompt) of each prompt, stopping at end-of-text."""
        ids = [encode_document(self.tok, p) for p in prompts]
        outputs = generate(self.model, ids, sampling, eos_id=self.eot)
        return [self.tok.decode([t for t in out if t != self.eot]) for out in outputs]

    def complete_ids(self, prompts: list[list[int]], sampling: SamplingConfig) -> list[list[int]]:
        return generate(self.model, prompts, sampling, eos_id=self.eot)

    @torch.no_grad()
    def logprobs(self, texts: list[str]) -> list[float]:
        """Sum of log p(token | previous tokens) of each text read as a document."""
        scores = []
        block = self.model.config.block_size
        for text in texts:
            ids = torch.tensor(encode_document(self.tok, text)[: block + 1]).unsqueeze(0)
            ids = ids.to(self.model.wte.weight.device)
            logits, _ = self.model(ids[:, :-1])
            logp = torch.log_softmax(logits.float(), dim=-1)
            scores.append(float(logp.gather(-1, ids[:, 1:].unsqueeze(-1)).sum()))
        return scores


@dataclass(slots=True)
class DocumentScore:
    """Summed negative log-likelihood of documents, each scored on its own from end-of-text."""

    nll: float
    tokens: int
    bytes: int
    documents: int

    def add(self, other: DocumentScore) -> None:
        self.nll += other.nll
        self.tokens += other.tokens
        self.bytes += other.bytes
        self.documents += other.documents

    @property
    def perplexity(self) -> float:
        return math.exp(self.nll / self.tokens) if self.tokens else float("nan")

    @property
    def bits_per_byte(self) -> float:
        return self.nll / (math.log(2) * self.bytes) if self.bytes else float("nan")


def score_documents(trained: TrainedModel, texts: Iterable[str], stride: int = 0) -> DocumentScore:
    """Each text read as a document ([EOT] + tokens), sliding windows of the model's block size;
    the same windows as lm-evaluation-harness's rolling log-likelihood when stride = block."""
    from lmforge.model.perplexity import token_nll

    block = trained.model.config.block_size
    score = DocumentScore(0.0, 0, 0, 0)
    for text in texts:
        ids = torch.tensor(encode_document(trained.tok, text))
        if ids.numel() < 2:
            continue
        nll, n = token_nll(trained.model, ids, block, stride or block)
        score.nll += nll
        score.tokens += n
        score.bytes += len(text.encode("utf-8"))
        score.documents += 1
    return score
