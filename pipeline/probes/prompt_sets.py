"""Loaders for the prompt sets shipped in `conf/eval/`: toxicity prompts (JSONL) and bias templates.

Both were written for lmforge. A user may pass their own file of the same shape; every problem is
reported with the file and line or key to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

TOXICITY_CATEGORIES = ("neutral", "provocative")
DEFAULT_TOXICITY_PROMPTS = "toxicity_prompts.jsonl"
DEFAULT_BIAS_TEMPLATES = "bias_templates.json"


@dataclass(frozen=True, slots=True)
class ToxicityPrompt:
    """One prompt of the toxicity probe."""

    id: str
    """Stable identifier, e.g. "provocative-007"."""
    category: str
    """"neutral" or "provocative" (invites an insulting or angry continuation)."""
    text: str
    """The prompt the model continues."""


@dataclass(frozen=True, slots=True)
class BiasPromptTemplate:
    """A prompt with a `{subject}` (or `{subject_lower}`) slot for the group's subject phrase."""

    context: str
    """Kind of prompt, e.g. "respect" or "occupation" (Sheng et al. 2019)."""
    text: str
    """Template text, e.g. "{subject} worked as"."""

    def fill(self, subject: str) -> str:
        return self.text.format(subject=subject, subject_lower=subject[:1].lower() + subject[1:])


@dataclass(frozen=True, slots=True)
class BiasTemplates:
    """Groups along demographic axes, prompt templates and sentence continuations."""

    axes: dict[str, dict[str, str]]
    """axis -> group -> subject phrase, e.g. {"gender": {"man": "The man", ...}}."""
    prompt_templates: list[BiasPromptTemplate]
    """Prompts continued by the model; continuations are scored for toxicity."""
    sentence_continuations: list[str]
    """Sentence ends scored by log P(end | subject) for every group."""


def eval_data_text(name: str) -> str:
    """Text of a data file shipped in `conf/eval/` (installed as `lmforge.conf`)."""
    source = resources.files("lmforge.conf").joinpath("eval", name)
    if not source.is_file():
        raise FileNotFoundError(f"conf/eval/{name} is not shipped with lmforge.conf")
    return source.read_text(encoding="utf-8")


def _read(path: str | Path | None, default: str) -> tuple[str, str]:
    if path is None:
        return eval_data_text(default), f"conf/eval/{default}"
    return Path(path).read_text(encoding="utf-8"), str(path)


def load_toxicity_prompts(path: str | Path | None = None) -> list[ToxicityPrompt]:
    """Read prompts from a JSONL file of {"id", "category", "text"} (default: the shipped set)."""
    text, where = _read(path, DEFAULT_TOXICITY_PROMPTS)
    prompts: list[ToxicityPrompt] = []
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            prompt = ToxicityPrompt(
                id=str(record["id"]), category=record["category"], text=record["text"]
            )
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(
                f"{where}:{line_no}: expected a JSON object with id, category, text ({err})"
            ) from err
        if prompt.category not in TOXICITY_CATEGORIES:
            raise ValueError(
                f"{where}:{line_no}: category {prompt.category!r} is not one of "
                f"{TOXICITY_CATEGORIES}"
            )
        if not prompt.text.strip():
            raise ValueError(f"{where}:{line_no}: empty prompt text")
        prompts.append(prompt)
    if not prompts:
        raise ValueError(f"{where}: no prompts")
    if len({p.id for p in prompts}) != len(prompts):
        raise ValueError(f"{where}: prompt ids are not unique")
    return prompts


def load_bias_templates(path: str | Path | None = None) -> BiasTemplates:
    """Read bias templates from JSON (default: the shipped `conf/eval/bias_templates.json`)."""
    text, where = _read(path, DEFAULT_BIAS_TEMPLATES)
    try:
        raw = json.loads(text)
        axes = {
            str(a): {str(g): str(s) for g, s in groups.items()} for a, groups in raw["axes"].items()
        }
        templates = [
            BiasPromptTemplate(context=t["context"], text=t["text"])
            for t in raw["prompt_templates"]
        ]
        continuations = [str(c) for c in raw["sentence_continuations"]]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(
            f"{where}: expected keys axes (axis -> group -> subject), prompt_templates "
            f"([{{context, text}}]) and sentence_continuations ([str]) ({err!r})"
        ) from err
    for axis, groups in axes.items():
        if len(groups) < 2:
            raise ValueError(f"{where}: axes.{axis} needs at least two groups to compare")
    for template in templates:
        if "{subject}" not in template.text and "{subject_lower}" not in template.text:
            raise ValueError(f"{where}: prompt template {template.text!r} has no {{subject}} slot")
    if not templates or not continuations:
        raise ValueError(f"{where}: prompt_templates and sentence_continuations must be non-empty")
    return BiasTemplates(
        axes=axes, prompt_templates=templates, sentence_continuations=continuations
    )
