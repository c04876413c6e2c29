"""Count the words (pre-tokens) of a text stream in Rust, and feed counts back to a trainer.

`tokenizers` exposes no word counts, but a trained `WordLevelTrainer` keeps the count of every
pre-token it was fed, and its (JSON) state carries them; that pass costs the counts alone, not
BPE's per-word symbols and pairs. `feed_counts` writes each word back as often as it was counted,
joined by spaces: byte-level pre-tokens never contain whitespace (every byte is shown as a
printable character), so a `WhitespaceSplit` pre-tokenizer gives the trainer exactly those words.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

CHUNK_CHARS = 1 << 16
"""About how much text one fed string holds: a frequent word is written in pieces of this size."""


def count_words(texts: Iterable[str], pre_tokenizer: pre_tokenizers.PreTokenizer) -> dict[str, int]:
    """{pre-token: occurrences} over `texts`, as `pre_tokenizer` splits (and maps) them."""
    counter = Tokenizer(models.WordLevel(unk_token="<unk>"))
    counter.pre_tokenizer = pre_tokenizer
    trainer = trainers.WordLevelTrainer(vocab_size=1, show_progress=False)
    counter.train_from_iterator(texts, trainer=trainer)
    serialized = trainer.__getstate__()
    del counter, trainer  # the Rust-side counts go before Python's copy of them is built
    state = json.loads(serialized)
    del serialized
    try:
        words = state["WordLevelTrainer"]["words"]
    except (KeyError, TypeError):
        raise RuntimeError(
            "this version of `tokenizers` keeps no word counts in its WordLevelTrainer state; "
            "set tokenizer.min_word_count=1 to train on the text directly"
        ) from None
    if not isinstance(words, dict):
        raise RuntimeError(f"WordLevelTrainer state holds words as {type(words).__name__}")
    return words


def feed_counts(counts: dict[str, int]) -> Iterator[str]:
    """Strings that hold each word of `counts` as often as counted, space-separated, in a fixed
    order (sorted words), none much longer than CHUNK_CHARS unless one word is."""
    for word in sorted(counts):
        remaining = counts[word]
        per_chunk = max(1, CHUNK_CHARS // (len(word) + 1))
        while remaining > 0:
            n = min(remaining, per_chunk)
            remaining -= n
            yield " ".join([word] * n)
