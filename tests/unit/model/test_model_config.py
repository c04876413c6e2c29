"""ModelConfig validates its fields and names the offending key."""

from __future__ import annotations

import pytest

from lmforge.model.config import MODEL_PRESETS, ModelConfig

VALID = {"vocab_size": 100, "block_size": 16, "d_model": 32, "n_head": 4, "n_layer": 2, "d_ff": 64}


def test_d_model_must_divide_into_heads():
    with pytest.raises(ValueError, match="d_model=30 is not divisible by model.n_head=4"):
        ModelConfig(**{**VALID, "d_model": 30})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("n_layer", 0, "model.n_layer must be a positive integer"),
        ("norm", "middle", "model.norm must be one of"),
        ("positions", "rotary", "model.positions must be one of"),
        ("activation", "swish", "model.activation must be one of"),
        ("dropout", 1.0, "model.dropout must be in"),
        ("pos_base", 0.0, "model.pos_base must be > 0"),
    ],
)
def test_invalid_values_are_rejected_naming_the_field(key, value, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{**VALID, key: value})


def test_sinusoidal_positions_need_an_even_width():
    with pytest.raises(ValueError, match="must be even"):
        ModelConfig(**{**VALID, "d_model": 9, "n_head": 3, "positions": "sinusoidal"})


def test_from_dict_rejects_unknown_keys_by_name():
    with pytest.raises(ValueError, match="n_heads"):
        ModelConfig.from_dict({**VALID, "n_heads": 4})


def test_config_round_trips_through_a_plain_dict():
    cfg = ModelConfig(**{**VALID, "norm": "post", "positions": "sinusoidal", "pos_base": 100.0})
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_presets_take_the_vocab_from_the_tokenizer():
    for name in MODEL_PRESETS:
        cfg = ModelConfig.from_preset(name, vocab_size=8192)
        assert cfg.vocab_size == 8192
    base = ModelConfig.from_preset("base", vocab_size=100)
    assert (base.d_model, base.n_head, base.d_ff, base.n_layer) == (512, 8, 2048, 6)  # A23
    assert base.head_dim == 64
    with pytest.raises(ValueError, match="unknown model preset 'huge'"):
        ModelConfig.from_preset("huge", vocab_size=100)


def test_a_misspelt_field_fails_loudly():
    with pytest.raises(TypeError):
        ModelConfig(**VALID, n_heads=4)


def test_every_name_the_package_exports_is_what_it_names_after_every_submodule_loaded():
    """A submodule import sets the package attribute of its name: an exported name equal to a
    submodule's would turn into that module (`from lmforge.model import generate` did)."""
    import importlib
    import pkgutil
    import types

    import lmforge.model as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"lmforge.model.{info.name}")
    for name in package.__all__:
        assert not isinstance(getattr(package, name), types.ModuleType), name
