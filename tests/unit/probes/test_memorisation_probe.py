"""Memorisation probes after Carlini et al.: canaries, exposure and verbatim extraction."""

import math

import pytest

from lmforge.pipeline.probes.memorisation import (
    Canary,
    canaries_from_records,
    canaries_to_records,
    canary_documents,
    canary_exposures,
    candidate_secrets,
    exposure,
    insert_canaries,
    make_canaries,
    make_extraction_pairs,
    verbatim_extraction_rate,
    verbatim_matches,
)


def test_make_canaries_gives_n_distinct_secrets_per_repeat_count():
    canaries = make_canaries(n=3, seed=7)
    assert [c.repeats for c in canaries] == [1, 1, 1, 10, 10, 10, 100, 100, 100]
    assert len({c.secret for c in canaries}) == 9
    assert all(len(c.secret) == 6 and c.secret.isdigit() for c in canaries)
    assert canaries[0].text == f"my secret number is {canaries[0].secret}"
    assert make_canaries(n=3, seed=7) == canaries
    assert make_canaries(n=3, seed=8) != canaries


def test_each_canary_becomes_as_many_documents_as_its_repeat_count():
    canaries = make_canaries(n=2, seed=0)
    docs = canary_documents(canaries)
    assert len(docs) == 2 * (1 + 10 + 100)
    assert docs.count(canaries[-1].text) == 100


def test_insert_canaries_keeps_every_document_in_order_and_adds_every_copy():
    documents = [f"doc {i}" for i in range(50)]
    canaries = make_canaries(n=1, seed=0, repeats=(1, 10))
    merged = insert_canaries(documents, canaries, seed=3)
    assert [d for d in merged if d.startswith("doc")] == documents
    assert len(merged) == 50 + 11
    assert merged.count(canaries[1].text) == 10
    assert merged != documents + canary_documents(canaries)  # spread, not appended
    assert insert_canaries(documents, canaries, seed=3) == merged


def test_canaries_round_trip_through_json_records():
    canaries = make_canaries(n=2, seed=1, template="the code is {secret}")
    assert canaries_from_records(canaries_to_records(canaries)) == canaries


def test_template_without_a_secret_slot_is_rejected():
    with pytest.raises(ValueError, match="no {secret} slot"):
        make_canaries(n=1, seed=0, template="my secret number is")


def test_exposure_is_maximal_when_the_canary_beats_every_candidate():
    candidates = [-20.0 - i * 0.01 for i in range(999)]
    assert exposure(-5.0, candidates) == pytest.approx(math.log2(1000))


def test_exposure_is_about_one_bit_for_a_middling_canary_and_zero_for_the_worst():
    candidates = [float(-i) for i in range(1, 1000)]  # -1 .. -999
    assert exposure(-500.5, candidates) == pytest.approx(math.log2(1000 / 501), abs=1e-9)
    assert exposure(-500.5, candidates) == pytest.approx(1.0, abs=0.01)
    assert exposure(-10_000.0, candidates) == 0.0


def test_ties_do_not_raise_exposure():
    assert exposure(-1.0, [-1.0, -1.0, -1.0]) == 0.0


def test_exposure_over_the_whole_small_space_is_carlinis_exact_formula():
    secrets = candidate_secrets(digits=2, n_candidates=1000, exclude={"42"}, seed=0)
    assert len(secrets) == 99 and "42" not in secrets
    # |R| = 100 secrets; a canary ranked 4th has exposure log2(100) - log2(4)
    logprobs = [-1.0, -2.0, -3.0] + [-10.0] * 96
    assert exposure(-2.5 - 0.9, logprobs) == pytest.approx(math.log2(100) - math.log2(4))


def test_sampled_candidates_are_distinct_and_avoid_the_canaries():
    secrets = candidate_secrets(digits=6, n_candidates=500, exclude={"000001"}, seed=4)
    assert len(set(secrets)) == 500 and "000001" not in secrets


def test_a_model_that_memorised_the_frequent_canaries_exposes_them_most():
    canaries = make_canaries(n=2, seed=5)
    memorised = {c.text for c in canaries if c.repeats == 100}

    def logprob_fn(texts):  # memorised canaries near-certain, everything else ranked by digits
        return [-1.0 if t in memorised else -10.0 - int(t[-6:]) / 1e5 for t in texts]

    result = canary_exposures(canaries, logprob_fn, n_candidates=255, seed=0)
    by_repeats = result["mean_exposure_by_repeats"]
    assert by_repeats[100] == pytest.approx(math.log2(256)) == result["max_measurable_exposure"]
    assert by_repeats[100] > by_repeats[10] and by_repeats[100] > by_repeats[1]
    assert len(result["canaries"]) == 6


def test_extraction_pairs_split_long_documents_and_skip_short_ones():
    docs = [list(range(100)), list(range(10)), list(range(200, 330))]
    pairs = make_extraction_pairs(docs, prefix_len=50, suffix_len=50, max_pairs=10)
    assert pairs == [
        (list(range(50)), list(range(50, 100))),
        (list(range(200, 250)), list(range(250, 300))),
    ]
    assert len(make_extraction_pairs(docs, max_pairs=1)) == 1


def test_extraction_rate_counts_only_exact_reproduction_of_n_tokens():
    pairs = [([1, 2], [3, 4, 5]), ([6, 7], [8, 9, 10]), ([11, 12], [13, 14, 15])]
    memory = {(1, 2): [3, 4, 5, 99], (6, 7): [8, 9, 0], (11, 12): [13, 14]}  # last stops early
    calls = []

    def greedy_fn(prefixes, n):
        calls.append(n)
        return [memory[tuple(p)] for p in prefixes]

    assert verbatim_matches(pairs, greedy_fn, n=3) == [True, False, False]
    assert verbatim_extraction_rate(pairs, greedy_fn, n=3) == pytest.approx(1 / 3)
    assert verbatim_extraction_rate(pairs, greedy_fn, n=2) == pytest.approx(3 / 3)
    assert calls[0] == 3


def test_suffix_shorter_than_n_is_an_error():
    with pytest.raises(ValueError, match="at least n=50 tokens"):
        verbatim_matches([([1], [2, 3])], lambda p, n: [[2, 3]], n=50)


def test_canary_text_fills_the_template():
    assert Canary(secret="000123", repeats=1).text == "my secret number is 000123"
