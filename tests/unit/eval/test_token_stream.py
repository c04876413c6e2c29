"""A split's token shards read as one stream: any range, across shard boundaries, equals the
same slice of the shards laid end to end; a cap cuts the stream and its documents."""

from __future__ import annotations

import numpy as np
import pytest

from lmforge.pipeline.stages.perplexity.token_stream import TokenStream, plan_stream
from lmforge.tokenizer.shards import TokenShardWriter
from lmforge.tokenizer.split_index import index_committed_shards

DOCS = [[0, 5, 6, 7], [0, 8], [0, 9, 10, 11, 12], [0, 13, 14]]


@pytest.fixture
def shards(tmp_path):
    """Shards 0: docs 0-1, 1: empty, 2: docs 2-3 (written out of index order)."""
    for index, docs in ((2, DOCS[2:]), (0, DOCS[:2]), (1, [])):
        with TokenShardWriter(tmp_path, "val", index, vocab_size=16) as shard:
            shard.write_documents(docs)
    index_committed_shards(tmp_path, "val")
    return tmp_path


def test_every_range_equals_the_slice_of_the_shards_end_to_end(shards):
    whole = np.concatenate([np.array(d) for d in DOCS])
    stream = TokenStream(plan_stream(shards, "val"))
    assert stream.spec.n_tokens == whole.size and stream.spec.n_docs == 4
    for begin in range(whole.size + 1):
        for end in range(begin, whole.size + 1):
            np.testing.assert_array_equal(stream.read(begin, end), whole[begin:end])
    expected = np.repeat([0, 1, 2, 3], [4, 2, 5, 3])  # the document of every position
    np.testing.assert_array_equal(stream.documents(np.arange(whole.size)), expected)
    np.testing.assert_array_equal(stream.documents(np.array([3, 4, 13])), [0, 1, 3])
    with pytest.raises(IndexError, match="outside the stream"):
        stream.read(0, whole.size + 1)


def test_a_cap_cuts_the_stream_and_keeps_the_documents_that_start_before_it(shards):
    spec = plan_stream(shards, "val", max_tokens=7)
    assert (spec.n_tokens, spec.n_docs, spec.vocab_size) == (7, 3, 16)
    np.testing.assert_array_equal(TokenStream(spec).read(0, 7), [0, 5, 6, 7, 0, 8, 0])
    assert plan_stream(shards, "val", max_tokens=6).n_docs == 2  # cut at a shard's end
    assert plan_stream(shards, "val", max_tokens=11).n_docs == 3
    assert plan_stream(shards, "val", max_tokens=12).n_docs == 4


def test_a_split_without_shards_says_to_run_tokenize(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the tokenize stage first"):
        plan_stream(tmp_path, "val")


def test_the_plan_keeps_its_source_object_so_each_reader_reads_through_it(shards):
    """A bucket input (`InputPath`) fetches the whole artifact when turned into a string; the
    plan hands the object itself to the actors, which read only the blocks they need."""

    class Source:  # a path-like whose str() must not be taken
        def __fspath__(self) -> str:
            return str(shards)

        def __truediv__(self, other):
            return shards / other

        def __str__(self) -> str:
            raise AssertionError("the source was turned into a string")

    source = Source()
    spec = plan_stream(source, "val")
    assert spec.directory is source
