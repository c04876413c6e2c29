"""Train a byte-level BPE tokenizer from a stream of documents (the corpus never sits in memory).

Byte-level means the base alphabet is the 256 bytes (shown as printable characters, GPT-2 style),
so every string encodes without an unknown token and `decode(encode(x)) == x` for any `x`.

The tokenizer has no post-processor that adds tokens: `tok.encode(text)` returns exactly the
tokens of `text`. The one place that adds `<|endoftext|>` is `lmforge.tokenizer.convention`,
which `tokenize`, `perplexity` and the HF export all call, so no stage gets it twice or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from lmforge.tokenizer.config import EOT, EOT_ID, PAD, PAD_ID, TokenizerConfig


def new_byte_level_bpe() -> Tokenizer:
    """An untrained byte-level BPE: GPT-2 pre-tokenization, no prefix space, no post-processor."""
    tok = Tokenizer(models.BPE())
    # add_prefix_space=False: an added leading space would break decode(encode(x)) == x.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def train_bpe(texts: Iterable[str], cfg: TokenizerConfig) -> Tokenizer:
    """Learn merges from `texts` (consumed once, lazily) until `cfg.vocab_size` tokens exist.

    Ids: `<|endoftext|>` = 0, `<|pad|>` = 1, then `cfg.special_tokens`, then the 256 bytes, then
    the merges in the order they were learned.
    """
    tok = new_byte_level_bpe()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=cfg.all_special_tokens(),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_as_strings(texts), trainer=trainer)
    _check_trained(tok, cfg)
    return tok


def _as_strings(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"train_bpe expects an iterable of str, got an item of {type(text)}")
        yield text


def _check_trained(tok: Tokenizer, cfg: TokenizerConfig) -> None:
    if tok.token_to_id(EOT) != EOT_ID or tok.token_to_id(PAD) != PAD_ID:
        raise RuntimeError(f"trained tokenizer put {EOT}/{PAD} at unexpected ids")
    missing = [c for c in pre_tokenizers.ByteLevel.alphabet() if tok.token_to_id(c) is None]
    if missing:
        raise RuntimeError(
            f"trained tokenizer lacks {len(missing)} byte tokens; text would be lost"
        )
    if tok.get_vocab_size() > cfg.vocab_size:
        raise RuntimeError(f"vocabulary {tok.get_vocab_size()} exceeds vocab_size={cfg.vocab_size}")
