"""Typed configuration of the byte-level BPE tokenizer and the special tokens stages rely on."""

from __future__ import annotations

from dataclasses import dataclass, field

EOT = "<|endoftext|>"
"""Separates documents; it also starts the first one (see `lmforge.tokenizer.convention`)."""
PAD = "<|pad|>"
"""Fills batches to equal length; never appears inside a packed token stream."""

EOT_ID = 0
PAD_ID = 1
N_BYTES = 256
"""Byte-level BPE starts from one token per byte, so no text is ever out of vocabulary."""


@dataclass(kw_only=True, slots=True)
class TokenizerConfig:
    """What `train_bpe` builds (vocabulary, merge threshold, special tokens) and from how much."""

    vocab_size: int = 4096
    """Total tokens: the 256 bytes, the special tokens and the learned merges."""
    min_frequency: int = 2
    """A pair is merged only if it occurs at least this often in the training text."""
    special_tokens: list[str] = field(default_factory=list)
    """User-defined special tokens, given ids right after `<|endoftext|>` (0) and `<|pad|>` (1)."""
    sample_bytes: int = 4_000_000_000
    """Train on about this many bytes of text, documents chosen by hash of their id; 0: all."""
    min_word_count: int = 2
    """Words (pre-tokens) seen fewer times in the sample are left out of BPE training; 1: none.
    Most distinct words of web text occur once, and each costs HF's trainer hundreds of bytes."""

    def __post_init__(self) -> None:
        if self.sample_bytes < 0:
            raise ValueError(
                f"tokenizer.sample_bytes must be >= 0 (0: all), got {self.sample_bytes}"
            )
        if self.min_word_count < 1:
            raise ValueError(f"tokenizer.min_word_count must be >= 1, got {self.min_word_count}")
        if self.min_frequency < 1:
            raise ValueError(f"tokenizer.min_frequency must be >= 1, got {self.min_frequency}")
        for token in self.special_tokens:
            if not isinstance(token, str) or not token:
                raise ValueError(
                    f"tokenizer.special_tokens has an empty or non-string entry: {token!r}"
                )
        names = self.all_special_tokens()
        if len(set(names)) != len(names):
            raise ValueError(
                f"tokenizer.special_tokens repeats a token (EOT and PAD are built in): {names}"
            )
        smallest = N_BYTES + len(names)
        if self.vocab_size < smallest:
            raise ValueError(
                f"tokenizer.vocab_size={self.vocab_size} is below {smallest}, "
                f"the 256 byte tokens plus {len(names)} special tokens"
            )

    def all_special_tokens(self) -> list[str]:
        """Special tokens in id order: EOT (0), PAD (1), then the user's tokens."""
        return [EOT, PAD, *self.special_tokens]
