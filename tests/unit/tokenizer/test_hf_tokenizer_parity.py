"""The saved tokenizer loads in transformers and gives the same ids; decode(encode(x)) == x."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from lmforge.tokenizer import EOT, PAD, TOKENIZER_FILES, decode_ids, load_tokenizer

HARD_TEXTS = [
    "",
    "plain ascii, the transformer reads it",
    "Ünïcödé: façade, naïve, Straße, ÆØÅ, Ελληνικά, русский, עברית, العربية",
    "emoji 🤗🚀👩‍👩‍👧‍👦 flags 🇫🇷 skin 👍🏽 and ✨",
    "CJK 中文字符 日本語のテキスト 한국어 텍스트",
    'def f(x: int) -> int:\n    """Doc."""\n\treturn {"a": [x ** 2, x // 3]}  # ok\n',
    "whitespace   runs\t\t\ttabs\n\n\n\nnewlines     \r\n\r\n   trailing   ",
    "control \x00\x01\x07\x1b[31m\x7f\x85\u200b\u2028\ufeff chars",
    "special tokens in text: <|endoftext|> and <|pad|> and <|user|>",
    "combining e\u0301 vs \u00e9, surrogate-range \U00010348 \U0010ffff",
]

_ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz ",
    " \t\n\r\x0b\x0c",
    "0123456789+-*/=()[]{}<>|&^%$#@!?.,;:'\"`~\\_",
    "éèêàçôûüößøåæñ",
    "中文字符日本語한국어",
    "🤗🚀✨👍🏽\u200d",
    "\x00\x01\x02\x7f\x80\x9f",
]


def random_strings(n: int, seed: int = 1234) -> list[str]:
    """Strings mixing scripts, whitespace, controls and arbitrary code points, fixed seed."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 8)):
            if rng.random() < 0.2:
                # any scalar value, skipping the surrogates that str cannot encode as UTF-8
                code = rng.choice([rng.randint(0, 0xD7FF), rng.randint(0xE000, 0x10FFFF)])
                parts.append(chr(code))
            else:
                alphabet = rng.choice(_ALPHABETS)
                parts.append("".join(rng.choices(alphabet, k=rng.randint(1, 12))))
        out.append("".join(parts))
    return out


def test_decode_of_encode_is_the_input_for_any_string(tok: Tokenizer) -> None:
    for text in HARD_TEXTS + random_strings(500):
        assert decode_ids(tok, tok.encode(text).ids) == text


@pytest.mark.parametrize("text", HARD_TEXTS)
def test_autotokenizer_from_saved_dir_gives_identical_ids(
    tok: Tokenizer, saved_dir: Path, text: str
) -> None:
    hf = AutoTokenizer.from_pretrained(str(saved_dir), local_files_only=True)
    assert hf(text)["input_ids"] == tok.encode(text).ids
    assert hf.decode(hf(text)["input_ids"]) == text


def test_pretrained_tokenizer_fast_agrees_with_tokenizers_on_random_strings(
    tok: Tokenizer, saved_dir: Path
) -> None:
    hf = PreTrainedTokenizerFast.from_pretrained(str(saved_dir), local_files_only=True)
    texts = random_strings(200, seed=99)
    assert hf(texts)["input_ids"] == [e.ids for e in tok.encode_batch(texts)]


def test_saved_files_declare_eot_as_bos_and_eos_pad_and_no_unknown_token(saved_dir: Path) -> None:
    assert sorted(p.name for p in saved_dir.iterdir()) == sorted(TOKENIZER_FILES)
    specials = json.loads((saved_dir / "special_tokens_map.json").read_text())
    assert specials["bos_token"] == specials["eos_token"] == EOT
    assert specials["pad_token"] == PAD
    assert specials["additional_special_tokens"] == ["<|user|>"]
    hf = AutoTokenizer.from_pretrained(str(saved_dir), local_files_only=True)
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (0, 0, 1)
    assert hf.unk_token is None
    assert hf.model_max_length == 128


def test_hf_tokenizer_adds_no_special_tokens_to_text(saved_dir: Path) -> None:
    hf = AutoTokenizer.from_pretrained(str(saved_dir), local_files_only=True)
    assert hf("")["input_ids"] == []
    assert EOT not in hf.convert_ids_to_tokens(hf("a transformer")["input_ids"])


def test_load_tokenizer_round_trips_the_saved_model(tok: Tokenizer, saved_dir: Path) -> None:
    loaded = load_tokenizer(saved_dir)
    text = HARD_TEXTS[4] + HARD_TEXTS[6]
    assert loaded.encode(text).ids == tok.encode(text).ids
    assert load_tokenizer(saved_dir / "tokenizer.json").get_vocab() == tok.get_vocab()


def test_load_tokenizer_names_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nowhere")):
        load_tokenizer(tmp_path / "nowhere")


def test_load_tokenizer_names_a_corrupt_file(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "model": ')
    with pytest.raises(ValueError, match="not a valid tokenizer.json"):
        load_tokenizer(tmp_path)


def test_load_tokenizer_refuses_a_tokenizer_without_our_special_ids(tmp_path: Path) -> None:
    foreign = Tokenizer.from_str(
        json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})
    )
    foreign.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="must have id 0"):
        load_tokenizer(tmp_path)
