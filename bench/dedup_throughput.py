"""Near-dedup throughput of lmforge's MinHash against datatrove's, on the same corpus in one run.

The corpus: distinct pages of 12 to 30 paragraphs of Python's documentation (as in
`clean_throughput.py`; 300 to 800 words, the length of typical web pages), near-copies of a
fifth of them (1 word in 50 to 1 in 200 replaced, a line of boilerplate added) and a few exact
copies, shuffled. MinHash is randomised: a pair near the LSH threshold is found by one hash
family and missed by another, so the removed sets of two correct implementations overlap less
the closer the planted copies sit to the threshold (copies that all had 1 word in 50 replaced,
Jaccard ~0.82, would cap the overlap near 0.92). Both sides use 5-word shingles and
14 bands of 8 hashes, in this process (so on the same CPU):

- lmforge: `minhash_signatures` -> `lsh_band_keys` -> `near_duplicate_clusters` (candidate pairs
  verified at estimated Jaccard >= 0.7), one kept per cluster;
- datatrove: its four file-based stages (signatures, buckets, clusters, filter).

Times are CPU seconds of this process (`time.process_time`, all its threads), so other load on a
shared machine does not skew them. `agreement` is the overlap of the two removed sets
(|A and B| / |A or B|); recall of the planted copies is printed for each. datatrove runs from a
separate virtualenv, set up as in `clean_throughput.py`; started without datatrove, the script
re-executes itself under $DATATROVE_PYTHON (default /tmp/dtvenv/bin/python). datatrove 0.10.1's
xxhash shingle hash breaks with xxhash 4.x; the script then switches datatrove to
`HashConfig(hash_fc="sha1")`.

    /tmp/dtvenv/bin/python bench/dedup_throughput.py [--docs 4000]

Last line printed: {"bench": "dedup_throughput", "unit": "documents/s", "lmforge": X,
"reference": Y, "ratio": X/Y, "agreement": A}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time

from clean_throughput import paragraph_pools, reexec_under_datatrove_python

BOILERPLATE = "Sign up for our newsletter to get the latest stories delivered to your inbox."


def build_corpus(n_docs: int, seed: int) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(id, text) in shuffled order, and planted copy id -> id of its original."""
    rng = random.Random(seed)
    _, prose = paragraph_pools()
    n_copies, n_exact = n_docs // 5, n_docs // 50
    originals = [
        "\n\n".join(rng.sample(prose, rng.randint(12, 30)))
        for _ in range(n_docs - n_copies - n_exact)
    ]
    entries = [(text, None) for text in originals]
    for source in rng.sample(range(len(originals)), n_copies):
        words = originals[source].split(" ")
        for i in rng.sample(range(len(words)), max(1, len(words) // rng.randint(50, 200))):
            words[i] = rng.choice(rng.choice(prose).split())
        entries.append((" ".join(words) + "\n" + BOILERPLATE, source))
    for source in rng.sample(range(len(originals)), n_exact):
        entries.append((originals[source], source))
    order = list(range(len(entries)))
    rng.shuffle(order)
    position = {old: new for new, old in enumerate(order)}
    corpus = [(f"doc{new:06d}", entries[old][0]) for new, old in enumerate(order)]
    planted = {
        f"doc{position[old]:06d}": f"doc{position[source]:06d}"
        for old, (_, source) in enumerate(entries)
        if source is not None
    }
    return corpus, planted


def run_lmforge(corpus: list[tuple[str, str]]) -> tuple[set[str], float]:
    from lmforge.pipeline.filters.minhash import (
        MinHashConfig,
        lsh_band_keys,
        minhash_signatures,
        near_duplicate_clusters,
    )

    config = MinHashConfig(shingle_words=5, bands=14, rows=8, num_perm=112, threshold=0.7)
    start = time.process_time()
    ids = [doc_id for doc_id, _ in corpus]
    signatures = minhash_signatures([text for _, text in corpus], config)
    keys = lsh_band_keys(signatures, config)
    removed = near_duplicate_clusters(ids, keys, signatures, config)
    kept = [doc_id for doc_id in ids if doc_id not in removed]
    seconds = time.process_time() - start
    assert len(kept) + len(removed) == len(ids)
    return set(removed), seconds


def datatrove_hash_config():
    """xxhash unless datatrove's xxhash wrapper fails on this xxhash version, else sha1."""
    from datatrove.utils.hashing import HashConfig, create_hash_func

    try:
        create_hash_func(HashConfig(hash_fc="xxhash"))("probe")
        return HashConfig(hash_fc="xxhash")
    except TypeError:
        return HashConfig(hash_fc="sha1")


def run_datatrove(corpus: list[tuple[str, str]], workdir: str) -> tuple[set[str], float, str]:
    from datatrove.data import Document
    from datatrove.pipeline.dedup import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    hash_config = datatrove_hash_config()
    config = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8, hash_config=hash_config)
    load_word_tokenizer("en").word_tokenize("warm up the spaCy tokenizer")  # load, untimed
    sigs, buckets, clusters = (os.path.join(workdir, d) for d in ("sigs", "buckets", "clusters"))
    start = time.process_time()
    docs = [Document(text=text, id=doc_id) for doc_id, text in corpus]
    MinhashDedupSignature(output_folder=sigs, config=config).run(iter(docs), 0, 1)
    for bucket in range(config.num_buckets):
        MinhashDedupBuckets(input_folder=sigs, output_folder=buckets, config=config).run(
            None, bucket, config.num_buckets
        )
    MinhashDedupCluster(input_folder=buckets, output_folder=clusters, config=config).run(None, 0, 1)
    kept = {doc.id for doc in MinhashDedupFilter(input_folder=clusters).run(iter(docs), 0, 1)}
    seconds = time.process_time() - start
    return {doc.id for doc in docs} - kept, seconds, hash_config.hash_fc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=4000, help="documents in the corpus")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reexec_under_datatrove_python(__file__)
    os.environ["TQDM_DISABLE"] = "1"  # datatrove's progress bars
    from datatrove.utils.logging import logger

    logger.remove()  # datatrove logs every stage at INFO
    corpus, planted = build_corpus(args.docs, args.seed)
    ours, our_seconds = run_lmforge(corpus)
    with tempfile.TemporaryDirectory(prefix="dt_minhash_") as workdir:
        theirs, their_seconds, hash_fc = run_datatrove(corpus, workdir)
    n = len(corpus)
    print(f"corpus: {n} documents, {len(planted)} planted copies; datatrove hash_fc={hash_fc}")
    for name, removed, seconds in (
        ("lmforge", ours, our_seconds),
        ("datatrove", theirs, their_seconds),
    ):
        found = sum(copy in removed or source in removed for copy, source in planted.items())
        recall = found / len(planted)
        speed = f"{n / seconds:8.1f} docs/CPU-s"
        print(f"{name:9s} {speed}  removed {len(removed)}  planted recall {recall:.3f}")
    union = ours | theirs
    result = {
        "bench": "dedup_throughput",
        "unit": "documents/s",
        "lmforge": round(n / our_seconds, 1),
        "reference": round(n / their_seconds, 1),
        "ratio": round(their_seconds / our_seconds, 2),
        "agreement": round(len(ours & theirs) / len(union), 4) if union else 1.0,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
