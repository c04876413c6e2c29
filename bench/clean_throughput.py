"""Cleaning throughput of lmforge's filters against datatrove's, on the same corpus in one run.

Both sides run the same chain, one document at a time in this process (so on the same CPU):
Gopher quality, Gopher repetition, C4 quality, then exact dedup of the survivors (datatrove's
three file-based stages: signatures, finder, filter). Both compare whitespace-normalised text for
exact dedup and keep the first copy. The corpus is built offline and deterministically from
Python's own documentation (pydoc topics and standard-library docstrings) recombined into
web-like pages, with boilerplate, lists, repeated lines, code, lorem ipsum and exact copies mixed
in, so that every rule has something to drop. `agreement` is the share of documents on which
both make the same final keep/drop decision. Times are CPU seconds of this process
(`time.process_time`, all its threads), so other load on a shared machine does not skew them.

datatrove is not a dependency of lmforge; it runs from a separate virtualenv (its English word
tokenizer is spaCy's blank `en`, which needs no model download):

    python3 -m venv /tmp/dtvenv
    /tmp/dtvenv/bin/pip install "datatrove[processing]==0.10.1" spacy orjson pyarrow
    /tmp/dtvenv/bin/pip install --no-deps -e .      # lmforge itself, for our side
    /tmp/dtvenv/bin/python bench/clean_throughput.py [--docs 2000]

Started from an interpreter without datatrove, the script re-executes itself under
$DATATROVE_PYTHON (default /tmp/dtvenv/bin/python). Last line printed: {"bench":
"clean_throughput", "unit": "documents/s", "lmforge": X, "reference": Y, "ratio": X/Y,
"agreement": A}.

`--end-to-end` compares the whole `clean` stage (read -> chain -> exact + MinHash dedup ->
Parquet, on Ray) with datatrove's `LocalPipelineExecutor` pipelines, and measures the full
default chain's MB per CPU-second (`clean_end_to_end.py` says how). It runs from lmforge's
virtualenv and starts datatrove's side under $DATATROVE_PYTHON (set up as above; lmforge need not
be installed there):

    .venv/bin/python bench/clean_throughput.py --end-to-end [--mb 100] [--files 8] [--cpus 2]

Last line: {"bench", "unit", "lmforge", "reference", "ratio", "agreement", "scaling_2cpu",
"mb_per_cpu_s", "filter_cpu_s", ...}. `--mb 5` runs in about two minutes.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter

STDLIB_MODULES = (  # whose docstrings feed the corpus, separated by spaces
    "argparse abc asyncio bisect calendar codecs collections contextlib copy csv dataclasses "
    "datetime decimal difflib email enum fractions functools gettext glob heapq http.client io "
    "itertools json locale logging math operator pathlib pickle random re shutil socket sqlite3 "
    "statistics string subprocess tarfile tempfile textwrap threading timeit typing unittest "
    "urllib.request weakref zipfile"
)
NAVIGATION = ["Home | Products | About us | Contact", "Share on Facebook", "Menu", "Read more"]
BOILERPLATE = [
    "This website uses cookies to ensure you get the best experience on our website.",
    "Please enable JavaScript in your browser to view the comments.",
    "By using this site you agree to our Terms of Use and Privacy Policy.",
    "Copyright 2024 Example Media Group. All rights reserved.",
]
LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor."
CODE_CHARS = re.compile(r"[{}<>=_\[\]|#*]|::|>>>")
CODE = 'int main(void) {\n    printf("hello");\n    return 0;\n}'


def paragraph_pools() -> tuple[list[str], list[str]]:
    """Paragraphs of Python's documentation in a fixed order: all of them, and the prose-like
    ones (mostly plain words, no code characters) unwrapped onto one line as on web pages."""
    from pydoc_data.topics import topics

    texts = [topics[key] for key in sorted(topics)]
    for name in STDLIB_MODULES.split():
        module = importlib.import_module(name)
        texts.append(inspect.getdoc(module) or "")
        for attr in sorted(dir(module)):
            if not attr.startswith("_"):
                texts.append(inspect.getdoc(getattr(module, attr, None)) or "")
    every, prose = [], []
    for text in texts:
        for paragraph in text.split("\n\n"):
            words = paragraph.split()
            if len(words) < 8:
                continue
            every.append(paragraph.strip())
            plain = sum(w.strip(".,;:!?()\"'").isalpha() for w in words) / len(words)
            if plain >= 0.9 and not CODE_CHARS.search(paragraph):
                prose.append(" ".join(words))
    return every, prose


def sentence_paragraphs(prose: list[str], count: int, rng: random.Random) -> list[str]:
    """`count` paragraphs of 2 to 5 sentences drawn from all those of `prose`."""
    sentences = sorted({s.rstrip(".") + "." for p in prose for s in p.split(". ") if s})
    return [" ".join(rng.sample(sentences, rng.randint(2, 5))) for _ in range(count)]


def build_corpus(n_docs: int, seed: int, mixed: bool = False) -> list[tuple[str, str]]:
    """(id, text) of web-like pages; about one in twelve is an exact copy of an earlier page.

    With `mixed`, the prose paragraphs are new ones of random sentences (twice as many as
    pages), so that a large corpus does not reuse each of the ~2,000 paragraphs hundreds of times
    (which makes tens of thousands of page pairs near Jaccard 0.5, where any two MinHash
    implementations disagree by chance).
    """
    rng = random.Random(seed)
    every, prose = paragraph_pools()
    if mixed:
        prose = sentence_paragraphs(prose, 2 * n_docs, rng)
    pages: list[str] = []
    for _ in range(n_docs):
        kind = rng.random()
        body = "\n\n".join(rng.sample(prose, rng.randint(3, 9)))
        if kind < 0.08 and pages:
            text = rng.choice(pages)
            text = text.replace("\n\n", "\n \n") if rng.random() < 0.5 else text
        elif kind < 0.28:
            text = "\n".join(rng.sample(NAVIGATION, 2) + [body] + rng.sample(BOILERPLATE, 2))
        elif kind < 0.38:
            text = "\n\n".join(rng.sample(every, rng.randint(2, 6)))
        elif kind < 0.43:
            text = rng.choice(prose)
        elif kind < 0.48:
            text = "\n".join("- " + rng.choice(prose).split(". ")[0][:60] for _ in range(12))
        elif kind < 0.53:
            paragraph = rng.choice(prose)
            text = "\n\n".join([body, paragraph, paragraph, paragraph])
        elif kind < 0.57:
            text = body + "\n" + LOREM
        elif kind < 0.61:
            text = body + "\n\n" + CODE + "\nThe program above prints a greeting and exits."
        elif kind < 0.65:
            text = body + "\n" + "\n".join(["Click here to read more..."] * rng.randint(3, 9))
        else:
            text = body
        pages.append(text)
    return [(f"doc{i:06d}", text) for i, text in enumerate(pages)]


def run_lmforge(corpus: list[tuple[str, str]]) -> tuple[dict[str, str | None], float]:
    """Decision per id (None = kept, else the reason) and seconds taken."""
    from lmforge.pipeline.document import Document
    from lmforge.pipeline.filters.c4 import C4Filter
    from lmforge.pipeline.filters.dedup_exact import ExactDeduplicator, resolve_exact_duplicates
    from lmforge.pipeline.filters.gopher_quality import GopherQualityFilter
    from lmforge.pipeline.filters.gopher_repetition import GopherRepetitionFilter

    start = time.process_time()
    steps = [GopherQualityFilter(), GopherRepetitionFilter(), C4Filter()]
    decisions: dict[str, str | None] = {}
    survivors = []
    for doc_id, text in corpus:
        doc = Document(id=doc_id, text=text, source="bench")
        decisions[doc_id] = None
        for step in steps:
            result = step.filter(doc)
            if result is not True:
                decisions[doc_id] = result[1]
                break
        else:
            survivors.append(doc)
    dedup = ExactDeduplicator()
    _, removed = resolve_exact_duplicates(dedup.hash_documents(survivors))
    for doc_id in removed:
        decisions[doc_id] = "exact_duplicate"
    return decisions, time.process_time() - start


def run_datatrove(
    corpus: list[tuple[str, str]], workdir: str
) -> tuple[dict[str, str | None], float]:
    """The same chain with datatrove's filters and its three exact-dedup stages."""
    from datatrove.data import Document
    from datatrove.pipeline.dedup import ExactDedupConfig, ExactDedupFilter, ExactDedupSignature
    from datatrove.pipeline.dedup.exact_dedup import ExactFindDedups
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    def normalised_text(doc: Document) -> str:
        return " ".join(doc.text.split())

    steps = [GopherQualityFilter(), GopherRepetitionFilter(), C4QualityFilter()]
    steps[0].filter(Document(text="warm up the spaCy tokenizer " * 20, id="w"))  # load, untimed
    start = time.process_time()
    decisions: dict[str, str | None] = {}
    survivors = []
    for doc_id, text in corpus:
        doc = Document(text=text, id=doc_id)
        decisions[doc_id] = None
        for step in steps:
            result = step.filter(doc)
            if result is not True:
                decisions[doc_id] = result[1] if isinstance(result, tuple) else step.name
                break
        else:
            survivors.append(doc)
    config = ExactDedupConfig(content_getter=normalised_text)
    sigs, dups = os.path.join(workdir, "sigs"), os.path.join(workdir, "dups")
    ExactDedupSignature(output_folder=sigs, config=config).run(iter(survivors), 0, 1)
    ExactFindDedups(data_folder=sigs, output_folder=dups, config=config).run(None, 0, 1)
    kept = {doc.id for doc in ExactDedupFilter(data_folder=dups, config=config).run(survivors)}
    for doc in survivors:
        if doc.id not in kept:
            decisions[doc.id] = "exact_duplicate"
    return decisions, time.process_time() - start


def reexec_under_datatrove_python(script: str) -> None:
    """Run `script` again under $DATATROVE_PYTHON when this interpreter lacks datatrove."""
    try:
        import datatrove  # noqa: F401
    except ImportError:
        python = os.environ.get("DATATROVE_PYTHON", "/tmp/dtvenv/bin/python")
        if os.environ.get("LMFORGE_BENCH_REEXEC") or not os.path.exists(python):
            raise SystemExit(
                "datatrove is not importable; install it as this file's docstring says, "
                "or point DATATROVE_PYTHON at a Python that has it"
            ) from None
        os.environ["LMFORGE_BENCH_REEXEC"] = "1"
        os.execv(python, [python, os.path.abspath(script), *sys.argv[1:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000, help="documents in the corpus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--end-to-end", action="store_true", help="the whole stage, on Ray")
    parser.add_argument("--mb", type=float, default=100.0, help="end-to-end corpus size (MB)")
    parser.add_argument("--files", type=int, default=8, help="end-to-end corpus files")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs for Ray / datatrove workers")
    parser.add_argument(
        "--units", type=int, default=16, help="read units of lmforge (data.read_split_mb = MB / N)"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs of lmforge's stage per CPU count (best wall)"
    )
    args = parser.parse_args()
    if args.end_to_end:
        from clean_end_to_end import end_to_end

        print(json.dumps(end_to_end(args)))
        return
    reexec_under_datatrove_python(__file__)
    os.environ["TQDM_DISABLE"] = "1"  # datatrove's progress bars
    from datatrove.utils.logging import logger

    logger.remove()  # datatrove logs every stage at INFO

    corpus = build_corpus(args.docs, args.seed)
    ours, our_seconds = run_lmforge(corpus)
    with tempfile.TemporaryDirectory(prefix="dt_clean_") as workdir:
        theirs, their_seconds = run_datatrove(corpus, workdir)
    same = sum((ours[i] is None) == (theirs[i] is None) for i, _ in corpus)
    n = len(corpus)
    print(f"corpus: {n} documents, {sum(len(t) for _, t in corpus) / n:.0f} characters on average")
    for name, decisions, seconds in (
        ("lmforge", ours, our_seconds),
        ("datatrove", theirs, their_seconds),
    ):
        kept = sum(v is None for v in decisions.values())
        reasons = Counter(v for v in decisions.values() if v is not None)
        dropped = dict(reasons.most_common())
        print(f"{name:9s} {n / seconds:9.1f} docs/CPU-s  kept {kept}  dropped {dropped}")
    disagreements = Counter(
        (ours[i], theirs[i]) for i, _ in corpus if (ours[i] is None) != (theirs[i] is None)
    )
    print(f"disagreements (lmforge, datatrove): {dict(disagreements.most_common(8))}")
    result = {
        "bench": "clean_throughput",
        "unit": "documents/s",
        "lmforge": round(n / our_seconds, 1),
        "reference": round(n / their_seconds, 1),
        "ratio": round(their_seconds / our_seconds, 2),
        "agreement": round(same / n, 4),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
