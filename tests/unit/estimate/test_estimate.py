"""`lmforge estimate`: the arithmetic of the stages' cost models, the JSON shape, the flags."""

from __future__ import annotations

import copy

import pytest

from lmforge.model.config import ModelConfig
from lmforge.model.flops import flops_per_token
from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.estimate.coefficients import load_coefficients, shipped_coefficients
from lmforge.pipeline.estimate.cost_model import KNOWN, Cluster
from lmforge.pipeline.estimate.prediction import estimate_run
from lmforge.pipeline.estimate.stage_costs import cost_models

GB = 10**9
CLUSTER = Cluster(nodes=64, cpus_per_node=32, memory_per_node=512 * GB)
ONE_B = [
    "model.d_model=2048",
    "model.n_layer=18",
    "model.n_head=16",
    "model.d_ff=8192",
    "model.block_size=2048",
    "tokenizer.vocab_size=50257",
    "train.micro_batch_size=2",
]
GPUS = Cluster(
    nodes=8,
    cpus_per_node=64,
    memory_per_node=1024 * GB,
    gpus_per_node=8,
    gpu_peak_flops=989e12,
    gpu_memory=80 * GB,
)


@pytest.fixture(scope="module")
def coefficients():
    return load_coefficients(shipped_coefficients())


def stage(result, name):
    return next(s for s in result.stages if s.stage == name)


def test_clean_time_is_start_up_plus_per_document_and_per_byte_work_over_all_cpus(coefficients):
    coef = copy.deepcopy(coefficients)
    coef["stages"]["clean"].update(
        fixed_s=10.0, cpu_s_per_doc=1e-4, cpu_s_per_byte=1e-7, filter_cpu_s_per_byte=2e-6
    )
    corpus = {"docs": 1e6, "bytes": 2e9}
    result = estimate_run(compose(), corpus, CLUSTER, coef)
    expected = 10 + (1e6 * 1e-4 + 2e9 * 1e-7 + 2e9 * 2e-6) / (64 * 32)
    assert stage(result, "clean").wall_s == pytest.approx(expected)
    bigger = estimate_run(compose(), corpus, Cluster(128, 32, 512 * GB), coef)
    assert stage(bigger, "clean").wall_s - 10 == pytest.approx((expected - 10) / 2)


def test_gpu_training_time_is_flops_over_peak_times_mfu(coefficients):
    config = compose(["preset=gpu", *ONE_B, "train.num_workers=64"])
    result = estimate_run(config, {"docs": 1e8, "bytes": 2e11, "mfu": 0.4}, GPUS, coefficients)
    pretrain = stage(result, "pretrain")
    model = ModelConfig(**{**config["model"], "vocab_size": 50257})
    per_token = flops_per_token(model) + 6 * 2048 * 50257
    tokens = 20000 * 256 * 2048  # max_steps x global_batch_size x block_size of preset=gpu
    params = pretrain.size["params"]
    # Every rank writes its 1/64 of the 12 bytes per parameter at once, in the background.
    checkpoints = 20000 // 200 * 12 * params / 64 / 250e6
    compute = tokens * per_token / (64 * 989e12 * 0.4)
    fixed = coefficients["stages"]["pretrain"]["fixed_s"]
    assert pretrain.wall_s == pytest.approx(fixed + compute + checkpoints)
    assert 0.95e9 < params < 1.1e9
    # The fp32 export and the two kept checkpoints; Ray Train keeps a pointer, not a copy.
    assert pretrain.store_bytes == pytest.approx(8 * params + 2 * 12 * params)


def test_sequence_level_steps_add_their_decoding_and_second_pass_to_cpu_training(coefficients):
    coef = copy.deepcopy(coefficients)
    coef["stages"]["pretrain"].update(
        fixed_s=10.0, cpu_s_per_flop=1e-11, s_per_decode_layer_step=3e-4
    )
    corpus = {"docs": 500, "bytes": 1e6}
    cluster = Cluster(nodes=1, cpus_per_node=2, memory_per_node=24 * GB)

    def pretrain(*overrides: str):
        return stage(
            estimate_run(compose(["preset=tiny", *overrides]), corpus, cluster, coef), "pretrain"
        )

    plain = pretrain("train.sequence_unlikelihood=0")
    phased = pretrain()
    size = phased.size
    per_token = size["flops_per_token"]
    # The preset's last 300 steps: 16 windows each continued from 32 tokens by 32 more, the
    # prefill and decoding forward (C/3 a token) and the second forward and backward (C).
    assert size["phase_flops"] == pytest.approx(300 * 16 * (32 + 32) * per_token * 4 / 3)
    # Each of the two ranks decodes its one micro-batch a step: 32 tokens through 4 layers.
    assert size["decode_layer_steps"] == 300 * 1 * 32 * 4
    assert plain.size["phase_flops"] == plain.size["decode_layer_steps"] == 0
    extra = size["phase_flops"] * 1e-11 / 2 + 300 * 32 * 4 * 3e-4
    assert phased.wall_s - plain.wall_s == pytest.approx(extra)
    # The term covers only the steps it runs on: a run shorter than the phase is all of it.
    short = pretrain("train.max_steps=100").size
    assert short["decode_layer_steps"] == 100 * 32 * 4
    # On every other step of the phase: 150 of its 300 steps decode and run the second pass.
    halved = pretrain("train.sequence_unlikelihood_every=2").size
    assert halved["decode_layer_steps"] == 150 * 32 * 4
    assert halved["phase_flops"] == pytest.approx(size["phase_flops"] / 2)
    # Prefix and decoded length are the settings', else a quarter and a half of the block.
    longer = pretrain("train.sequence_unlikelihood_tokens=null").size
    assert longer["phase_flops"] == pytest.approx(300 * 16 * (32 + 64) * per_token * 4 / 3)
    # Sizes recorded before these terms were costed still evaluate (refits read old manifests).
    model = cost_models()["pretrain"]
    old = {k: v for k, v in size.items() if k not in ("phase_flops", "decode_layer_steps")}
    assert model.cost(old).wall_s["s_per_decode_layer_step"] == 0


@pytest.mark.parametrize("name", ["perplexity", "harm", "sample"])
def test_gpu_actors_run_their_flops_at_peak_times_mfu_not_at_a_cpus_rate(coefficients, name):
    config = compose(["preset=gpu", *ONE_B, "train.num_workers=64"])
    corpus = {"docs": 1e8, "bytes": 2e11, "mfu": 0.4}
    slow = copy.deepcopy(coefficients)
    slow["stages"][name]["cpu_s_per_flop"] = 1e-8  # a CPU 100x slower than any we measured

    def run(coef, cluster):
        return stage(estimate_run(config, corpus, cluster, coef), name)

    on_gpus = run(coefficients, GPUS)
    assert on_gpus.size["gpu_flops_per_s"] == pytest.approx(989e12 * 0.4)
    assert run(slow, GPUS).wall_s == pytest.approx(on_gpus.wall_s)
    size = on_gpus.size
    if name == "perplexity":
        tokens = (2 * size["window_tokens"] + size["document_tokens"]) / size["actors"]
    else:
        tokens = size["generated"]
    form = cost_models()[name].cost(size).wall_s
    assert "cpu_s_per_flop" not in form
    assert form[KNOWN] == pytest.approx(tokens * size["forward_flops"] / (989e12 * 0.4))
    # On CPUs (no GPUs on the nodes) the fitted seconds per FLOP price the same work.
    on_cpus = run(coefficients, CLUSTER)
    assert on_cpus.size["gpu_flops_per_s"] == 0
    assert run(slow, CLUSTER).wall_s > 10 * on_cpus.wall_s


def test_json_is_a_stable_object_naming_the_bounding_stage(coefficients):
    result = estimate_run(compose(), {"docs": 1e9, "bytes": 1e12}, CLUSTER, coefficients)
    data = result.to_json()
    assert set(data) == {
        "format",
        "corpus",
        "cluster",
        "coefficients",
        "stages",
        "total_wall_s",
        "store_bytes",
        "bound_stage",
        "critical_path",
        "fits",
        "flags",
    }
    assert [s["stage"] for s in data["stages"]] == list(cost_models())
    for row in data["stages"]:
        assert set(row) == {
            "stage",
            "wall_s",
            "peak_rss_mb",
            "largest_process",
            "coordinator_rss_mb",
            "store_bytes",
            "fits",
            "processes",
            "notes",
        }
        assert row["peak_rss_mb"] >= row["coordinator_rss_mb"] > 0
    walls = {s["stage"]: s["wall_s"] for s in data["stages"]}
    assert data["bound_stage"] in data["critical_path"]
    assert walls[data["bound_stage"]] == max(walls[s] for s in data["critical_path"])
    assert data["critical_path"][0] == "clean" and data["critical_path"][-1] == "report"
    assert data["total_wall_s"] == pytest.approx(sum(walls[s] for s in data["critical_path"]), 1e-3)
    assert data["store_bytes"] == pytest.approx(sum(s["store_bytes"] for s in data["stages"]), 1e-6)


def test_a_rank_that_does_not_fit_its_gpu_is_told_to_shard_with_zero_3(coefficients):
    thirteen_b = ["model.d_model=5120", "model.n_head=40", "model.d_ff=20480", "model.n_layer=40"]
    base = ["preset=gpu", *ONE_B, *thirteen_b, "train.num_workers=64"]
    corpus = {"docs": 1e8, "bytes": 2e11}
    zero2 = estimate_run(compose([*base, "train.zero_stage=2"]), corpus, GPUS, coefficients)
    flags = [f for f in zero2.flags if f.stage == "pretrain" and "GPU" in f.process]
    assert flags and flags[0].change.startswith("train.zero_stage=3")
    assert flags[0].needs_mb > flags[0].available_mb
    zero3 = estimate_run(compose([*base, "train.zero_stage=3"]), corpus, GPUS, coefficients)
    assert not [f for f in zero3.flags if f.stage == "pretrain" and "GPU" in f.process]


def test_too_large_a_micro_batch_is_told_to_shrink(coefficients):
    config = compose(["preset=gpu", *ONE_B, "train.num_workers=64", "train.micro_batch_size=64"])
    result = estimate_run(config, {"docs": 1e8, "bytes": 2e11}, GPUS, coefficients)
    changes = [f.change for f in result.flags if f.stage == "pretrain"]
    assert "train.micro_batch_size=32 (activations)" in changes
    assert not stage(result, "pretrain").fits


def test_a_coordinator_too_big_for_the_head_node_names_the_setting(coefficients):
    small_head = Cluster(nodes=4, cpus_per_node=8, memory_per_node=2 * GB)
    result = estimate_run(compose(), {"docs": 1e9, "bytes": 1e13}, small_head, coefficients)
    clean = [f for f in result.flags if f.stage == "clean"]
    assert any("data.read_split_mb" in f.change for f in clean)
    assert not result.to_json()["fits"]


def test_every_process_that_does_not_fit_names_what_to_change(coefficients):
    tiny_nodes = Cluster(nodes=2, cpus_per_node=64, memory_per_node=GB)
    result = estimate_run(compose(), {"docs": 1e9, "bytes": 1e12}, tiny_nodes, coefficients)
    flagged = {(f.stage, f.process) for f in result.flags}
    assert ("tokenize", "coordinator (one node)") in flagged
    assert ("clean", "coordinator (one node)") in flagged
    for flag in result.flags:
        assert flag.change and not flag.change.startswith(("cannot", "tokenizer settings"))


def test_a_whole_split_tokenizer_sample_is_flagged_with_sample_bytes(coefficients):
    result = estimate_run(
        compose(["tokenizer.sample_bytes=0"]), {"docs": 1e9, "bytes": 1e12}, CLUSTER, coefficients
    )
    assert any(f.change.startswith("tokenizer.sample_bytes=") for f in result.flags)
    fits = estimate_run(
        compose(["tokenizer.sample_bytes=1000000000"]),
        {"docs": 1e9, "bytes": 1e12},
        CLUSTER,
        coefficients,
    )
    assert not [f for f in fits.flags if f.stage == "train_tokenizer"]


def test_training_on_gpus_the_cluster_lacks_is_flagged(coefficients):
    result = estimate_run(
        compose(["preset=gpu"]), {"docs": 1e6, "bytes": 2e9}, CLUSTER, coefficients
    )
    assert any("train.use_gpu=false" in f.change for f in result.flags)
    more = estimate_run(
        compose(["preset=gpu", "train.num_workers=128"]),
        {"docs": 1e6, "bytes": 2e9},
        GPUS,
        coefficients,
    )
    assert any("train.num_workers=64" in f.change for f in more.flags)


def test_the_sample_index_covers_whole_epochs_of_the_run(coefficients):
    config = compose(["train.max_steps=1000", "train.global_batch_size=64"])
    result = estimate_run(config, {"docs": 1e4, "bytes": 2e7}, CLUSTER, coefficients)
    size = stage(result, "sample_index").size
    assert size["positions"] >= 64_000 and size["positions"] % size["n_windows"] == 0
    assert stage(result, "sample_index").store_bytes == 4 * size["positions"]  # uint32 order


def test_perplexity_scoring_divides_over_the_actor_pool_each_holding_two_weight_copies(
    coefficients,
):
    corpus = {"docs": 1e9, "bytes": 1e12}

    def perplexity(nodes: int, *overrides: str):
        cluster = Cluster(nodes, 32, 512 * GB)
        pooled = ["eval.perplexity.in_process=false", *overrides]  # the tiny preset's is true
        run = estimate_run(compose(pooled), corpus, cluster, coefficients)
        return stage(run, "perplexity")

    w1, w2, w4 = (perplexity(n).wall_s for n in (16, 32, 64))
    # Fixed start-up and baselines, plus the scoring divided over 32 actors per node.
    assert w1 - w2 == pytest.approx(2 * (w2 - w4))
    assert w1 - w2 > 0
    pool = perplexity(16)
    assert pool.size["actors"] == 16 * 32 and pool.size["actors_per_node"] == 32
    fewer = perplexity(16, "eval.perplexity.threads_per_actor=4")
    assert fewer.size["actors_per_node"] == 8
    actor = next(p for p in pool.processes if p.name == "actor")
    assert actor.per_node == 32
    assert next(p for p in fewer.processes if p.name == "actor").per_node == 8
    # Each actor holds the trained and a fresh model's fp32 weights.
    params = stage(estimate_run(compose(), corpus, CLUSTER, coefficients), "pretrain").size[
        "params"
    ]
    bigger = perplexity(16, "model.d_model=1024", "model.d_ff=4096")
    big_params = stage(
        estimate_run(
            compose(["model.d_model=1024", "model.d_ff=4096"]), corpus, CLUSTER, coefficients
        ),
        "pretrain",
    ).size["params"]
    grown = next(p for p in bigger.processes if p.name == "actor").peak_rss_mb - actor.peak_rss_mb
    assert grown == pytest.approx(2 * 4 * (big_params - params) / 2**20, rel=0.05)


def test_pool_calls_go_out_in_batches_spread_over_the_actors():
    from lmforge.pipeline.evaluation.generation_cost import pooled_generation

    # 100 rows in batches of 16: 7 batches; on 2 actors the busiest runs 4 of them.
    work = pooled_generation([(100, 10)], batch_size=16, actors=2)
    assert work == {"generated": 4 * 16 * 10, "steps": 4 * 10}
    # With an actor per batch, one round: the busiest decodes one batch.
    assert pooled_generation([(100, 10)], 16, 7) == {"generated": 16 * 10, "steps": 10}
    # Fewer rows than a batch generate only their own tokens; empty calls cost nothing.
    assert pooled_generation([(4, 48), (0, 48), (8, 0)], 16, 1) == {"generated": 192, "steps": 48}
    # Calls add up: each is its own round of batches.
    assert pooled_generation([(4, 48)] * 2, 16, 1) == {"generated": 384, "steps": 96}


@pytest.mark.parametrize("name", ["sample", "harm"])
def test_generation_stages_run_on_a_pool_with_a_coordinator_holding_no_weights(coefficients, name):
    corpus = {"docs": 1e6, "bytes": 1e9}

    def run(nodes: int, *overrides: str):
        cluster = Cluster(nodes, 32, 512 * GB)
        pooled = [f"eval.{name}.in_process=false", *overrides]  # the tiny preset's is true
        return stage(estimate_run(compose(pooled), corpus, cluster, coefficients), name)

    # The default pool is one actor; `actors: 0` is one per CPU of the cluster.
    one_node = run(1)
    assert one_node.size["actors"] == 1
    spread = run(2, f"eval.{name}.actors=0")
    assert spread.size["actors"] == 64 and spread.size["actors_per_node"] == 32
    assert next(p for p in spread.processes if p.name == "actor").per_node == 32
    # Weights live in the actors: a bigger model grows the actor, never the coordinator.
    bigger = run(1, "model.d_model=1024", "model.d_ff=4096")
    coordinator = {r.name: r for r in one_node.processes}["coordinator"]
    assert {r.name: r for r in bigger.processes}[
        "coordinator"
    ].peak_rss_mb == coordinator.peak_rss_mb
    actor = {r.name: r for r in one_node.processes}["actor"]
    assert {r.name: r for r in bigger.processes}["actor"].peak_rss_mb > actor.peak_rss_mb
    # More rows than one actor's batch: a pool of one takes longer than a pool of many.
    many_rows = [f"eval.{name}.batch_size=1"]
    assert run(1, *many_rows).wall_s > run(1, *many_rows, f"eval.{name}.actors=0").wall_s


@pytest.mark.parametrize(("name", "copies"), [("sample", 1), ("harm", 1), ("perplexity", 2)])
def test_in_process_the_stage_process_holds_the_weights_and_no_actor_runs(
    coefficients, name, copies
):
    corpus = {"docs": 1e6, "bytes": 1e9}

    def run(*overrides: str):
        cluster = Cluster(4, 32, 512 * GB)
        return stage(estimate_run(compose(list(overrides)), corpus, cluster, coefficients), name)

    here = run(f"eval.{name}.in_process=true", f"eval.{name}.actors=0")
    assert [p.name for p in here.processes] == ["coordinator"]
    assert here.size["actors"] == 1 and here.size["actors_per_node"] == 1
    pooled = run(f"eval.{name}.in_process=false", f"eval.{name}.actors=1")
    # A base of its own (the stage's work and torch in one process) and the weights.
    base = coefficients["stages"][name]["in_process_mb"]
    weights = copies * 4 * here.size["params"] / 2**20
    assert here.processes[0].peak_rss_mb == pytest.approx(base + weights)
    # A cost form of its own: no actor start-up, its own seconds per FLOP.
    model = cost_models()[name]
    in_process, on_actor = model.cost(here.size).wall_s, model.cost(pooled.size).wall_s
    assert (in_process["actor_start_s"], on_actor["actor_start_s"]) == (0, 1)
    assert in_process["in_process_s_per_flop"] == on_actor["cpu_s_per_flop"] > 0
    assert "cpu_s_per_flop" not in in_process and "in_process_s_per_flop" not in on_actor
    bigger = run(f"eval.{name}.in_process=true", "model.d_model=1024", "model.d_ff=4096")
    params = {r.size["params"] for r in (here, bigger)}
    grown = bigger.processes[0].peak_rss_mb - here.processes[0].peak_rss_mb
    assert grown == pytest.approx(copies * 4 * (max(params) - min(params)) / 2**20, rel=0.05)
