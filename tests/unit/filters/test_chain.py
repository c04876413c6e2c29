"""The default chain: order, switches, typed config from dicts, and conservation of documents."""

import pytest

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DroppedDocument
from lmforge.pipeline.filters.chain import (
    FilterChainConfig,
    build_filter_chain,
    chain_counts,
    dropped_by_reason,
    merge_chain_counts,
    run_chain,
)

DEFAULT_ORDER = [
    "normalize",
    "length",
    "language",
    "gopher_quality",
    "gopher_repetition",
    "c4",
    "blocklist",
    "toxicity",
    "pii",
]


def mixed_corpus(good_prose: str) -> list[Document]:
    texts = [
        good_prose,
        good_prose.replace("town.", "town. Mail me at someone@example.org today."),
        "Too short.",
        "Der Garten hinter der alten Bibliothek ist ein ruhiger Ort für die Menschen der Stadt. "
        * 4,
        "\n".join(["- the item of value and price here"] * 30),
        good_prose + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit.",
        good_prose + " What the fuck.",
        b"caf\xe9 " + good_prose.encode(),
        "\n\n".join([good_prose.split("\n\n")[0]] * 4),
    ]
    return [Document(id=f"d{i}", text=t, source="mixed") for i, t in enumerate(texts)]


def test_default_chain_has_every_step_in_the_documented_order():
    assert [s.name for s in build_filter_chain(FilterChainConfig())] == DEFAULT_ORDER


def test_a_disabled_step_is_left_out():
    cfg = FilterChainConfig.from_dict(
        {"gopher_quality": {"enabled": False}, "pii": {"enabled": False}}
    )
    names = [s.name for s in build_filter_chain(cfg)]
    assert names == [n for n in DEFAULT_ORDER if n not in ("gopher_quality", "pii")]


def test_config_from_dict_overrides_nested_values_and_keeps_types():
    cfg = FilterChainConfig.from_dict(
        {
            "gopher_quality": {"min_words": 10, "max_mean_word_length": 12},
            "gopher_repetition": {"top_ngram_max_char_frac": [[2, 0.25]]},
            "language": {"languages": ["en", "fr"]},
        }
    )
    assert cfg.gopher_quality.min_words == 10
    assert cfg.gopher_quality.max_mean_word_length == 12.0
    assert cfg.gopher_repetition.top_ngram_max_char_frac == ((2, 0.25),)
    assert cfg.language.languages == ("en", "fr")
    assert FilterChainConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("d", "key"),
    [
        ({"gopher_qualty": {}}, "data.filters.gopher_qualty"),
        ({"c4": {"min_sentence": 3}}, "data.filters.c4.min_sentence"),
    ],
)
def test_an_unknown_key_fails_naming_it(d, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        FilterChainConfig.from_dict(d)


def test_a_value_of_the_wrong_type_fails_naming_the_key():
    with pytest.raises(ValueError, match=r"data\.filters\.length\.min_chars"):
        FilterChainConfig.from_dict({"length": {"min_chars": "many"}})


def test_documents_in_equal_kept_plus_dropped_by_reason(good_prose):
    docs = mixed_corpus(good_prose)
    sink: list[DroppedDocument] = []
    chain = build_filter_chain(FilterChainConfig(), exclusion_sink=sink.append)
    kept = list(run_chain(docs, chain, batch_size=4))
    reasons = dropped_by_reason(chain_counts(chain))
    assert len(docs) == len(kept) + sum(reasons.values())
    assert len(sink) == sum(reasons.values())
    assert {d.id for d in kept} | {d.id for d in sink} == {d.id for d in docs}
    assert reasons == {
        "length_too_few_chars": 1,
        "language_other": 1,
        "gopher_too_many_bullet_lines": 1,
        "c4_lorem_ipsum": 1,
        "blocklist_word": 1,
        "gopher_dup_para_frac": 1,
    }
    assert [d.id for d in kept] == ["d0", "d1", "d7"]
    assert "<EMAIL>" in kept[1].text
    assert kept[2].text.startswith("café ")
    for step in chain:
        assert step.counts.docs_in == step.counts.docs_out + step.counts.docs_dropped


def test_counts_of_partitions_merge_into_the_counts_of_the_whole(good_prose):
    whole = build_filter_chain(FilterChainConfig())
    list(run_chain(mixed_corpus(good_prose), whole))
    parts = []
    for part in (slice(0, 4), slice(4, None)):
        chain = build_filter_chain(FilterChainConfig())
        list(run_chain(mixed_corpus(good_prose)[part], chain))
        parts.append(chain_counts(chain))
    merged = merge_chain_counts(parts)

    def counted(counts: dict) -> dict:  # CPU time is measured, not counted: it differs
        return {k: {**v.to_dict(), "cpu_seconds": None} for k, v in counts.items()}

    assert counted(merged) == counted(chain_counts(whole))
    assert all(c.cpu_seconds > 0 for c in merged.values())
