"""A seeded generator of large JSONL.zst corpora from real words, with planted duplicates: the
corpus the `clean` calibration case and the clean benchmarks (`bench/clean_scale.py`,
`bench/corpus_synth.py` on the command line) run on.

Documents are sentences of the embedded corpus (Python's documentation: `pydoc_data.topics` and
standard-library docstrings, as `pipeline/sources/embedded.py` reads them), strung together to
a length around `words`, with one word in ten replaced by a word of the same vocabulary so that
two documents drawn from the same sentences are still far apart (word-5-gram Jaccard ~0.2).
Every block of 100 consecutive documents holds, in a seeded order, 5 exact copies and 20 near
copies of original documents with a smaller index (their block drawn uniformly, so copies cross
files); a near copy has words of its original replaced until the word-5-gram Jaccard of the two
(the shingles of `data.dedup.near`, as the MinHash stage hashes them) lies in [0.7, 0.9]
(quartiles about 0.73, 0.76, 0.81). A near copy that no replacement brings into that range (about
one document in ten million) is written as an original instead, and not listed.

Every document is a pure function of (seed, its index), so files can be written in parallel and
the same seed gives the same bytes (for a given Python, whose documentation is the word source).
Records are `{"id": "synth-0000000042", "text": ...}`; ids sort like indices, so the rule "keep
the smallest id of a cluster" keeps the original. Beside the files, `planted.json` lists the
planted pairs by index: `exact: [[copy, original], ...]`, `near: [[copy, original, jaccard], ...]`.
Point `data.paths` at `DIR/*.jsonl.zst` (the whole DIR would read `planted.json` as a source).

The default length (~40 words, ~290 bytes of JSON a document) makes 10 million documents about
2.9 GB of JSONL (`words=20`: about 2.3 GB).
"""

from __future__ import annotations

import json
import random
import re
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

import pyarrow as pa

from lmforge.durable import AtomicFile
from lmforge.pipeline.filters.minhash import shingle_hashes
from lmforge.pipeline.sources.embedded import embedded_documents

BLOCK = 100
EXACT_PER_BLOCK = 5
NEAR_PER_BLOCK = 20
NEAR_JACCARD = (0.7, 0.9)
SHINGLE_WORDS = 5
SUBSTITUTION_RATE = 0.1
"""Share of an original's words replaced by vocabulary words, so originals are distinct."""
ID_FORMAT = "synth-{:010d}"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_CODE_CHARS = re.compile(r"[{}\[\]()<>=_`|\\#@$%^*~/]")


@lru_cache(maxsize=1)
def word_pools() -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """(sentences as word tuples, vocabulary): the prose sentences of the embedded corpus."""
    sentences: list[tuple[str, ...]] = []
    for doc in embedded_documents():
        for paragraph in doc.text.split("\n\n"):
            if _CODE_CHARS.search(paragraph):
                continue
            for sentence in _SENTENCE_END.split(" ".join(paragraph.split())):
                words = tuple(sentence.split())
                alpha = sum(w.strip(".,;:!?'\"").isalpha() for w in words)
                if 5 <= len(words) <= 40 and alpha >= 0.9 * len(words):
                    sentences.append(words)
    vocabulary = sorted({w for s in sentences for w in s if w.isalpha()})
    return tuple(sentences), tuple(vocabulary)


def jaccard(a: str, b: str, shingle_words: int = SHINGLE_WORDS) -> float:
    """Jaccard similarity of the word-shingle sets of two texts, as near-dedup hashes them."""
    x, y = (
        set(shingle_hashes(a, shingle_words).tolist()),
        set(shingle_hashes(b, shingle_words).tolist()),
    )
    return len(x & y) / len(x | y) if x | y else 1.0


@lru_cache(maxsize=4096)
def _block_roles(seed: int, block: int) -> tuple[str, ...]:
    roles = ["exact"] * EXACT_PER_BLOCK + ["near"] * NEAR_PER_BLOCK
    roles += ["original"] * (BLOCK - len(roles))
    random.Random(f"{seed}:block:{block}").shuffle(roles)
    return tuple(roles)


def _role(seed: int, index: int) -> str:
    return _block_roles(seed, index // BLOCK)[index % BLOCK]


def _source(seed: int, index: int, rng: random.Random) -> int | None:
    """A random original with a smaller index; None when there is none (the very first docs)."""
    block = index // BLOCK
    for _ in range(8):
        other = rng.randint(0, block)
        end = index % BLOCK if other == block else BLOCK
        roles = _block_roles(seed, other)
        originals = [p for p in range(end) if roles[p] == "original"]
        if originals:
            return other * BLOCK + rng.choice(originals)
    return None


def original_text(seed: int, index: int, words: int) -> str:
    """The text of original document `index`: sentences, one word in ten replaced."""
    sentences, vocabulary = word_pools()
    rng = random.Random(f"{seed}:doc:{index}")
    target = rng.randint(max(SHINGLE_WORDS * 3, words // 2), max(SHINGLE_WORDS * 3, 3 * words // 2))
    out: list[str] = []
    while len(out) < target:
        out.extend(sentences[rng.randrange(len(sentences))])
    for position in rng.sample(range(len(out)), max(2, round(SUBSTITUTION_RATE * len(out)))):
        out[position] = vocabulary[rng.randrange(len(vocabulary))]
    return " ".join(out)


@lru_cache(maxsize=1 << 16)
def _token_words(token: str) -> tuple[int, ...]:
    """The words near-dedup sees in one whitespace token, each as its 1-word shingle hash."""
    return tuple(shingle_hashes(token, 1).tolist())


def _shingle_set(tokens: list[str]) -> set[tuple[int, ...]]:
    """Word 5-grams of the tokens; the same sets (up to hash collisions) as `shingle_hashes`."""
    words = [w for token in tokens for w in _token_words(token)]
    return {tuple(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)}


def _replace_words(
    words: list[str], base: set, floor: float, target: float, rng: random.Random
) -> float | None:
    """Replace words of `words` in place, at shuffled positions, undoing any replacement that
    takes the Jaccard with `base` below `floor`; the Jaccard once at or below `target`, or None."""
    vocabulary = word_pools()[1]
    positions = list(range(len(words)))
    rng.shuffle(positions)
    for position in positions:
        kept = words[position]
        words[position] = vocabulary[rng.randrange(len(vocabulary))]
        now = _shingle_set(words)
        similarity = len(base & now) / len(base | now)
        if similarity < floor:
            words[position] = kept
        elif similarity <= target:
            return similarity
    return None


def near_copy(text: str, rng: random.Random) -> tuple[str, float] | None:
    """`text` with words replaced, one at a time, until its Jaccard with `text` reaches a random
    target in [0.72, 0.88]. A replacement that would overshoot the target by more than 0.03 is
    undone and another position tried (replacements near the ends change fewer shingles); a
    second pass accepts anything down to 0.7. None when no copy lands in the range (a rare text
    where every single replacement changes too many shingles)."""
    low, high = NEAR_JACCARD
    target = rng.uniform(low + 0.02, high - 0.02)
    words = text.split(" ")
    base = _shingle_set(words)
    for floor in (max(low, target - 0.03), low):
        if _replace_words(words, base, floor, target, rng) is not None:
            break
    copy = " ".join(words)
    similarity = jaccard(text, copy)
    if not low <= similarity <= high:
        return None
    return copy, similarity


def document(seed: int, index: int, words: int) -> tuple[str, tuple | None]:
    """(text, planted entry or None) of document `index`."""
    role = _role(seed, index)
    rng = random.Random(f"{seed}:copy:{index}")
    source = None if role == "original" else _source(seed, index, rng)
    if source is None:
        return original_text(seed, index, words), None
    text = original_text(seed, source, words)
    if role == "exact":
        return text, ("exact", index, source)
    near = near_copy(text, rng)
    if near is None:  # planted nothing: this document is an original after all
        return original_text(seed, index, words), None
    copy, similarity = near
    return copy, ("near", index, source, round(similarity, 4))


def file_name(number: int) -> str:
    return f"part-{number:05d}.jsonl.zst"


def write_file(out_dir: str, number: int, start: int, stop: int, seed: int, words: int) -> list:
    """Documents [start, stop) into one `.jsonl.zst` file; returns their planted entries."""
    planted = []
    path = Path(out_dir) / file_name(number)
    with AtomicFile(path) as file, pa.output_stream(str(file.partial), compression="zstd") as out:
        for index in range(start, stop):
            text, entry = document(seed, index, words)
            out.write((json.dumps({"id": ID_FORMAT.format(index), "text": text}) + "\n").encode())
            if entry:
                planted.append(entry)
    return planted


def synthesize(
    out_dir: Path, docs: int, files: int, seed: int = 0, words: int = 32, workers: int = 1
) -> dict:
    """Write `docs` documents into `files` `.jsonl.zst` files and `planted.json`; return it."""
    if docs < 1 or not 1 <= files <= docs:
        raise ValueError(f"need docs >= files >= 1, got docs={docs}, files={files}")
    out_dir.mkdir(parents=True, exist_ok=True)
    word_pools()  # once, before forking workers
    bounds = [(k, k * docs // files, (k + 1) * docs // files) for k in range(files)]
    args = [(str(out_dir), k, a, b, seed, words) for k, a, b in bounds]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(write_file, *zip(*args, strict=True)))
    else:
        results = [write_file(*a) for a in args]
    entries = [e for part in results for e in part]
    planted = {
        "docs": docs,
        "seed": seed,
        "words": words,
        "id_format": ID_FORMAT,
        "files": [file_name(k) for k in range(files)],
        "exact": [[e[1], e[2]] for e in entries if e[0] == "exact"],
        "near": [[e[1], e[2], e[3]] for e in entries if e[0] == "near"],
    }
    (out_dir / "planted.json").write_text(json.dumps(planted, separators=(",", ":")))
    return planted
