"""The bar the model is judged against cannot move: the n-gram baselines' smoothing and the
minimal-pair set are pinned. A change here is a change of the bar and must be made on purpose
(update the recorded figures in the same commit and say why)."""

import hashlib
import json
from importlib.resources import files

import pytest
import yaml

from lmforge.pipeline.probes.minimal_pairs import MINIMAL_PAIRS
from lmforge.pipeline.probes.ngram import ngram_baselines

TRAIN = "the cat sat on the mat and the dog sat on the log. " * 4
VAL = "the dog sat on the mat and the cat sat on the log."
CHARS = sorted(set(TRAIN + VAL))


def ids(text: str) -> list[int]:
    return [CHARS.index(c) for c in text]


@pytest.mark.parametrize(
    ("baseline", "recorded"),
    [
        ("unigram_perplexity", 10.493108715904206),
        ("bigram_perplexity", 2.4129771666509003),
        ("kn_trigram_perplexity", 1.384426436200473),
    ],
)
def test_the_ngram_baselines_score_a_fixed_text_as_recorded(baseline, recorded):
    stats = ngram_baselines([ids(TRAIN)], [ids(VAL)], vocab_size=len(CHARS) + 1, k=0.1)
    assert abs(stats[baseline] - recorded) < 1e-9


def test_the_pipeline_smooths_the_add_k_baselines_with_k_0_1():
    conf = files("lmforge.conf")
    default = yaml.safe_load((conf / "eval" / "default.yaml").read_text())
    assert default["perplexity"]["ngram_k"] == 0.1
    for preset in ("tiny", "small", "base", "gpu"):
        text = (conf / "preset" / f"{preset}.yaml").read_text()
        assert "ngram_k" not in text, f"preset {preset} moves the bar"


def test_the_minimal_pair_set_is_the_recorded_one():
    text = json.dumps([[p.good, p.bad, p.phenomenon] for p in MINIMAL_PAIRS], ensure_ascii=False)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert len(MINIMAL_PAIRS) == 26
    assert digest == "d8477f40542afcac8cfca89de5738fcbbdbea9e49b41dc0fdf9d0ebe0416a525"
