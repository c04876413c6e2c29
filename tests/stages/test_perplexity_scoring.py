"""The validation split scored on a pool of model actors: one actor and two give the same figures,
and both equal one process scoring the whole stream in one pass, and the stage's own process
(`in_process`) the same again (real Ray, real token shards)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.perplexity import position_nll
from lmforge.model.weights import load_model_dir, save_model_dir
from lmforge.pipeline.evaluation.model_pool import ModelPool, ModelPoolConfig
from lmforge.pipeline.probes.ngram import fit_baselines
from lmforge.pipeline.probes.perplexity_math import document_sums
from lmforge.pipeline.sources.embedded import embedded_documents
from lmforge.pipeline.stages.perplexity.stage import PerplexityConfig, _stream_figures
from lmforge.pipeline.stages.perplexity.stream_scoring import StreamJob, score_stream
from lmforge.pipeline.stages.perplexity.token_stream import TokenStream, plan_stream
from lmforge.tokenizer.config import TokenizerConfig
from lmforge.tokenizer.convention import encode_documents
from lmforge.tokenizer.dataset import TokenDataset
from lmforge.tokenizer.describe import token_byte_lengths
from lmforge.tokenizer.io import save_tokenizer
from lmforge.tokenizer.shards import TokenShardWriter
from lmforge.tokenizer.split_index import index_committed_shards
from lmforge.tokenizer.train import train_bpe

pytestmark = pytest.mark.slow

BLOCK, STRIDE = 32, 20


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """A tokenizer, a small model and train/val token shards (val in two shards)."""
    root = tmp_path_factory.mktemp("scoring")
    texts = [d.text for d in embedded_documents() if 200 < len(d.text) < 2000][:260]
    tok = train_bpe(texts[:200], TokenizerConfig(vocab_size=400))
    save_tokenizer(tok, root / "tok", model_max_length=4096)
    vocab = tok.get_vocab_size()
    for split_name, index, part in (("train", 0, texts[:200]), ("val", 0, texts[200:230])):
        with TokenShardWriter(root / "shards", split_name, index, vocab) as shard:
            shard.write_documents(encode_documents(tok, part))
    with TokenShardWriter(root / "shards", "val", 1, vocab) as shard:
        shard.write_documents(encode_documents(tok, texts[230:]))
    index_committed_shards(root / "shards", "train")
    index_committed_shards(root / "shards", "val")
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=vocab, block_size=BLOCK, d_model=32, n_head=2, n_layer=2, d_ff=64
    )
    save_model_dir(GPT(config), root / "pretrain" / "model")
    return root, tok


def _figures(root, actors: int, baselines: dict, in_process: bool = False) -> dict:
    spec = plan_stream(root / "shards", "val")
    job = StreamJob(
        stream=spec,
        block_size=BLOCK,
        stride=STRIDE,
        batch_size=4,
        max_groups=10_000,
        baselines=baselines,
        init_ranges=3,
    )
    cfg = ModelPoolConfig(actors=actors, batch_size=4, in_process=in_process)
    with ModelPool(cfg, root / "pretrain", root / "tok", section="eval.perplexity") as pool:
        sums = score_stream(pool, job, windows_per_range=8, progress=None)
        assert len(pool.actors) == (0 if in_process else actors)
    figures = _stream_figures(PerplexityConfig(bootstrap_samples=200), sums, baselines)
    return {**figures, "bytes": sums.bytes, "groups": sums.by_group("model")}


def test_one_actor_and_two_give_the_figures_of_one_pass(split, local_ray):
    root, tok = split
    train = TokenStream(plan_stream(root / "shards", "train"))
    baselines = fit_baselines([train.read(0, train.spec.n_tokens)], tok.get_vocab_size(), k=0.1)
    one, two = _figures(root, 1, baselines), _figures(root, 2, baselines)
    groups_one, groups_two = one.pop("groups"), two.pop("groups")
    assert one.keys() == two.keys()
    for key, value in one.items():
        assert math.isclose(value, two[key], rel_tol=1e-6), (key, value, two[key])
    for a, b in zip(groups_one, groups_two, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)

    stream = TokenStream(plan_stream(root / "shards", "val"))
    ids = stream.read(0, stream.spec.n_tokens)
    doc_offsets = TokenDataset(root / "shards", "val", block_size=1).doc_offsets
    assert stream.spec.n_docs == 60 and len(doc_offsets) == 60
    model = load_model_dir(root / "pretrain" / "model")
    losses = position_nll(model, torch.from_numpy(ids), BLOCK, STRIDE).numpy()
    assert one["val_tokens_scored"] == losses.size == ids.size - 1
    assert math.isclose(one["val_loss"], losses.mean(), rel_tol=1e-6)
    doc_nll, doc_tokens = document_sums(losses, doc_offsets)
    np.testing.assert_allclose(groups_one[0], doc_nll, rtol=1e-6)
    np.testing.assert_array_equal(groups_one[1], doc_tokens)
    text_bytes = len(tok.decode(ids[1:].tolist(), skip_special_tokens=True).encode("utf-8"))
    assert one["bytes"] == text_bytes == int(token_byte_lengths(tok)[ids[1:]].sum())
    bigram = -baselines["bigram"].token_log_probs(ids)
    assert math.isclose(one["bigram_cross_entropy"], bigram.mean(), rel_tol=1e-9)


def test_the_stage_process_scores_what_an_actor_scores(split, local_ray):
    root, tok = split
    train = TokenStream(plan_stream(root / "shards", "train"))
    baselines = fit_baselines([train.read(0, train.spec.n_tokens)], tok.get_vocab_size(), k=0.1)
    here = _figures(root, 2, baselines, in_process=True)  # `actors` ignored: none started
    actor = _figures(root, 1, baselines)
    groups_here, groups_actor = here.pop("groups"), actor.pop("groups")
    assert here == actor  # the same model on one thread: the same numbers, to the bit
    for a, b in zip(groups_here, groups_actor, strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_actor_that_cannot_load_the_model_is_one_clear_error(split, local_ray, tmp_path):
    from lmforge.pipeline.errors import LmforgeError

    root, _ = split
    cfg = ModelPoolConfig(actors=1)
    pool = ModelPool(cfg, tmp_path / "no-pretrain", root / "tok", section="eval.sample")
    with pool, pytest.raises(LmforgeError, match=r"eval.sample: a model actor died: .*config.json"):
        pool.logprobs(["a sentence"])


def test_a_model_the_stage_process_cannot_load_is_one_clear_error(split, tmp_path):
    import shutil

    from lmforge.model.weights import WEIGHTS_FILE
    from lmforge.pipeline.errors import LmforgeError

    root, _ = split
    cfg = ModelPoolConfig(in_process=True)
    with pytest.raises(LmforgeError, match=r"eval.harm: the model did not load: .*config.json"):
        ModelPool(cfg, tmp_path / "no-pretrain", root / "tok", section="eval.harm")
    corrupt = tmp_path / "corrupt"
    shutil.copytree(root / "pretrain", corrupt)
    (corrupt / "model" / WEIGHTS_FILE).write_bytes(b"not safetensors")
    with pytest.raises(LmforgeError, match=r"eval.harm: the model did not load: "):
        ModelPool(cfg, corrupt, root / "tok", section="eval.harm")


def test_prompts_batched_over_two_actors_sample_what_one_batch_samples(split, local_ray):
    from lmforge.model.generate import SamplingConfig
    from lmforge.pipeline.evaluation.trained_model import TrainedModel

    root, _ = split
    prompts = ["The list", "A function", "", "Open the file", "x"]
    sampling = SamplingConfig(max_new_tokens=12, top_p=0.9, temperature=0.8, seed=3)
    alone = TrainedModel(root / "pretrain", root / "tok").complete(prompts, sampling)
    cfg = ModelPoolConfig(actors=2, batch_size=2)
    with ModelPool(cfg, root / "pretrain", root / "tok", section="eval.sample") as pool:
        assert pool.complete(prompts, sampling) == alone


def test_prompts_sampled_in_the_stage_process_are_those_of_one_batch(split):
    """No Ray: the stage's own process runs the model; the same rows and seeds as one batch."""
    from lmforge.model.generate import SamplingConfig
    from lmforge.pipeline.evaluation.trained_model import TrainedModel

    root, _ = split
    prompts = ["The list", "A function", "", "Open the file", "x"]
    sampling = SamplingConfig(max_new_tokens=12, top_p=0.9, temperature=0.8, seed=3)
    alone = TrainedModel(root / "pretrain", root / "tok").complete(prompts, sampling)
    cfg = ModelPoolConfig(batch_size=2, in_process=True)
    with ModelPool(cfg, root / "pretrain", root / "tok", section="eval.sample") as pool:
        assert pool.complete(prompts, sampling) == alone
        assert pool.device == "cpu" and pool.peak_rss_mb() is None
        (usage,) = pool.usage()
        assert usage["cpu_s"] > 0 and usage["peak_rss"] > 0
