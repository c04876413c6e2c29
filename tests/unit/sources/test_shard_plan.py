"""Output shards are cut across read units near the target size, in corpus order, each row
group of each unit used once."""

from __future__ import annotations

import random

from lmforge.pipeline.stages.clean.shard_output import plan_shards


def test_shards_are_cut_near_the_target_across_units_whatever_the_unit_sizes():
    rng = random.Random(0)
    target = 1000
    groups = {
        unit: {
            split: [(rng.randrange(1, 50), rng.randrange(1, target // 8)) for _ in range(n)]
            for split in ("train", "val")
        }
        for unit, n in enumerate(rng.choice([0, 1, 3, 40]) for _ in range(30))
    }
    plans = plan_shards(groups, target)
    for split in ("train", "val"):
        mine = [p for p in plans if p.split == split]
        assert [p.name for p in mine] == [f"{split}-{i:05d}.parquet" for i in range(len(mine))]
        used = [(u, g) for p in mine for u, gs in p.groups for g in gs]
        expected = [(u, g) for u in sorted(groups) for g in range(len(groups[u][split]))]
        assert used == expected  # every group once, in corpus order
        assert sum(p.rows for p in mine) == sum(r for u in groups for r, _ in groups[u][split])
        for plan in mine[:-1]:
            assert abs(plan.estimated_bytes - target) <= target // 16
        assert len({u for p in mine for u, _ in p.groups}) > len(mine) / 2  # shards span units


def test_an_empty_split_has_no_shard():
    assert plan_shards({0: {"train": [(3, 10)], "val": []}}, 100)[0].split == "train"
    assert len(plan_shards({0: {"train": [(3, 10)], "val": []}}, 100)) == 1
