"""Safetensors round trips, the model directory, and the Hugging Face GPT-2 export: transformers
loads it offline and computes the same logits and greedy tokens as lmforge."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from lmforge.model.generate import SamplingConfig, generate
from lmforge.model.hf_export import export_hf
from lmforge.model.weights import load_model_dir, load_weights, save_model_dir, save_weights

IDS = torch.tensor(
    [[3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26], [2, 71, 82, 81, 82, 8, 4, 5, 9, 0, 45, 23]]
)


@pytest.mark.parametrize(
    "overrides", [{}, {"tie_weights": False}, {"positions": "sinusoidal", "norm": "post"}], ids=str
)
def test_saved_weights_load_into_a_fresh_model_with_identical_logits(
    make_model, tmp_path, overrides
):
    source, target = make_model(seed=0, **overrides), make_model(seed=1, **overrides)
    path = save_weights(source, tmp_path / "model.safetensors")
    load_weights(target, path)
    assert torch.equal(source(IDS)[0], target(IDS)[0])
    assert (target.lm_head.weight is target.wte.weight) == source.config.tie_weights


def test_tied_weights_are_stored_once(make_model, tmp_path):
    path = save_weights(make_model(), tmp_path / "tied.safetensors")
    with safe_open(str(path), framework="pt") as f:
        keys = set(f.keys())
    assert "wte.weight" in keys and "lm_head.weight" not in keys


def test_loading_weights_of_another_shape_names_the_file(make_model, tmp_path):
    path = save_weights(make_model(d_ff=64), tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match="other.safetensors does not match the model"):
        load_weights(make_model(), path)


def test_model_dir_rebuilds_the_same_model(make_model, tmp_path):
    model = make_model(norm="post", activation="relu", bias=False)
    save_model_dir(model, tmp_path / "m")
    assert json.loads((tmp_path / "m" / "config.json").read_text())["norm"] == "post"
    loaded = load_model_dir(tmp_path / "m")
    assert loaded.config == model.config
    assert torch.equal(loaded(IDS)[0], model(IDS)[0])


def _tokenizer_dir(path) -> str:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=97,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()[:60],
    )
    tok.train_from_iterator(["the cat sat on the mat", "the next token"] * 20, trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    wrapped.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"positions": "sinusoidal", "activation": "relu"},
        {"activation": "relu", "bias": False, "tie_weights": False},
        {"activation": "gelu_exact"},
    ],
    ids=str,
)
def test_hf_export_loads_in_transformers_with_the_same_logits_and_tokens(
    make_model, tmp_path, monkeypatch, overrides
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = make_model(**overrides)
    result = export_hf(model, tmp_path / "hf", eos_token_id=0)
    assert result.format == "hf-gpt2"
    hf = AutoModelForCausalLM.from_pretrained(result.path).eval()
    assert type(hf).__name__ == "GPT2LMHeadModel"
    with torch.no_grad():
        assert (hf(IDS).logits - model(IDS)[0]).abs().max() < 1e-4
        hf_tokens = hf.generate(IDS[:1], do_sample=False, max_new_tokens=12, eos_token_id=None)
    ours = generate(model, [IDS[0].tolist()], SamplingConfig(max_new_tokens=12, greedy=True))
    assert hf_tokens[0, IDS.size(1) :].tolist() == ours[0]


def test_hf_export_carries_the_tokenizer(make_model, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokenizer_dir = _tokenizer_dir(tmp_path / "tok")
    source = AutoTokenizer.from_pretrained(tokenizer_dir)
    result = export_hf(make_model(), tmp_path / "hf", tokenizer_dir=tokenizer_dir, eos_token_id=0)
    assert (result.path / "tokenizer.json").is_file()
    assert (result.path / "generation_config.json").is_file()
    exported = AutoTokenizer.from_pretrained(result.path)
    assert exported("the cat sat")["input_ids"] == source("the cat sat")["input_ids"]
    assert exported.eos_token == "<|endoftext|>"


def test_post_norm_is_exported_in_the_native_format_with_a_note(make_model, tmp_path):
    model = make_model(norm="post")
    result = export_hf(model, tmp_path / "out")
    assert result.format == "lmforge"
    assert "post" in result.note and (result.path / "EXPORT_NOTE.txt").is_file()
    assert torch.equal(load_model_dir(result.path)(IDS)[0], model(IDS)[0])
