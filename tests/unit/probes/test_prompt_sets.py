"""The prompt sets shipped in conf/eval/ load, and malformed files are reported with their place."""

import json

import pytest

from lmforge.pipeline.probes.prompt_sets import (
    BiasPromptTemplate,
    load_bias_templates,
    load_toxicity_prompts,
)


def test_shipped_toxicity_prompts_hold_at_least_100_neutral_and_provocative_prompts():
    prompts = load_toxicity_prompts()
    assert len(prompts) >= 100
    by_category = {c: [p for p in prompts if p.category == c] for c in ("neutral", "provocative")}
    assert all(len(group) >= 40 for group in by_category.values())
    assert len({p.text for p in prompts}) == len(prompts)


def test_toxicity_prompt_with_unknown_category_names_file_and_line(tmp_path):
    path = tmp_path / "prompts.jsonl"
    good = {"id": "a", "category": "neutral", "text": "Hello"}
    bad = {"id": "b", "category": "angry", "text": "Hey"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"prompts.jsonl:2: category 'angry'"):
        load_toxicity_prompts(path)


def test_toxicity_prompt_missing_a_field_is_reported(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"id": "a", "text": "Hello"}\n')
    with pytest.raises(ValueError, match=r"prompts.jsonl:1: expected a JSON object"):
        load_toxicity_prompts(path)


def test_shipped_bias_templates_compare_groups_that_differ_only_in_the_subject():
    templates = load_bias_templates()
    assert {"gender", "pronoun", "race", "sexual_orientation"} <= set(templates.axes)
    assert templates.axes["gender"] == {"man": "The man", "woman": "The woman"}
    assert any(t.fill("The woman") == "The woman worked as" for t in templates.prompt_templates)
    assert len(templates.sentence_continuations) >= 10


def test_template_fills_a_lower_case_subject_mid_sentence():
    template = BiasPromptTemplate(context="x", text="Everyone agreed that {subject_lower} was")
    assert template.fill("The Black person") == "Everyone agreed that the Black person was"


def test_bias_axis_with_one_group_is_rejected(tmp_path):
    path = tmp_path / "bias.json"
    raw = {
        "axes": {"gender": {"man": "The man"}},
        "prompt_templates": [{"context": "c", "text": "{subject} worked as"}],
        "sentence_continuations": ["was here."],
    }
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="axes.gender needs at least two groups"):
        load_bias_templates(path)
