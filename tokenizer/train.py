"""Train a byte-level BPE tokenizer from a stream of documents (the corpus never sits in memory).

Byte-level means the base alphabet is the 256 bytes (shown as printable characters, GPT-2 style),
so every string encodes without an unknown token and `decode(encode(x)) == x` for any `x`.

The tokenizer has no post-processor that adds tokens: `tok.encode(text)` returns exactly the
tokens of `text`. The one place that adds `<|endoftext|>` is `lmforge.tokenizer.convention`,
which `tokenize`, `perplexity` and the HF export all call, so no stage gets it twice or not at all.

With `tokenizer.min_word_count` > 1 the words (pre-tokens) of the text are counted first and the
rare ones left out before BPE runs: HF's trainer holds each distinct word with its symbols and
pairs (hundreds of bytes each), and in web-scale text most distinct words occur once while adding
little to the pair counts that decide the merges (`lmforge.tokenizer.word_counts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from lmforge.tokenizer.config import EOT, EOT_ID, PAD, PAD_ID, TokenizerConfig
from lmforge.tokenizer.word_counts import count_words, feed_counts


@dataclass(frozen=True, slots=True)
class TrainingWords:
    """How many distinct words the text held and how many of them BPE was trained on."""

    distinct_words: int | None
    """None when the words were not counted (`min_word_count` 1: the text went to BPE as is)."""
    trained_words: int | None

    def to_summary(self) -> dict[str, int]:
        if self.distinct_words is None or self.trained_words is None:
            return {}
        return {"sample_distinct_words": self.distinct_words, "bpe_words": self.trained_words}


def new_byte_level_bpe() -> Tokenizer:
    """An untrained byte-level BPE: GPT-2 pre-tokenization, no prefix space, no post-processor."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = byte_level_pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    return tok


def byte_level_pre_tokenizer() -> pre_tokenizers.ByteLevel:
    # add_prefix_space=False: an added leading space would break decode(encode(x)) == x.
    return pre_tokenizers.ByteLevel(add_prefix_space=False)


def train_bpe(texts: Iterable[str], cfg: TokenizerConfig) -> Tokenizer:
    """Learn merges from `texts` (consumed once, lazily) until `cfg.vocab_size` tokens exist.

    Ids: `<|endoftext|>` = 0, `<|pad|>` = 1, then `cfg.special_tokens`, then the 256 bytes, then
    the merges in the order they were learned.
    """
    return train_bpe_counted(texts, cfg)[0]


def train_bpe_counted(
    texts: Iterable[str], cfg: TokenizerConfig
) -> tuple[Tokenizer, TrainingWords]:
    """`train_bpe`, and the words it saw and kept."""
    if cfg.min_word_count > 1:
        counts = count_words(_as_strings(texts), byte_level_pre_tokenizer())
        distinct = len(counts)
        kept = {word: n for word, n in counts.items() if n >= cfg.min_word_count}
        del counts
        return train_on_word_counts(kept, cfg), TrainingWords(distinct, len(kept))
    tok = new_byte_level_bpe()
    tok.train_from_iterator(_as_strings(texts), trainer=_bpe_trainer(cfg))
    _check_trained(tok, cfg)
    return tok, TrainingWords(None, None)


def train_on_word_counts(counts: dict[str, int], cfg: TokenizerConfig) -> Tokenizer:
    """BPE trained on byte-level pre-tokens and their counts (`count_words`): the tokenizer that
    text holding exactly those words would give."""
    tok = new_byte_level_bpe()
    # The words are byte-level pre-tokens already, with no whitespace in them: BPE reads them
    # back split on whitespace, then the tokenizer gets its own pre-tokenizer again.
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator(feed_counts(counts), trainer=_bpe_trainer(cfg))
    tok.pre_tokenizer = byte_level_pre_tokenizer()
    _check_trained(tok, cfg)
    return tok


def _bpe_trainer(cfg: TokenizerConfig) -> trainers.BpeTrainer:
    return trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=cfg.all_special_tokens(),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )


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
