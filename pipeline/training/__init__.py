"""Distributed pretraining with Ray Train and DeepSpeed ZeRO, used by the `pretrain` stage.

Read in this order:
- `config.TrainConfig`: the typed `train` config group;
- `launch.run_pretraining`: starts the Ray Train run and exports the final weights;
- `worker_entry.train_loop_per_worker`: what every worker runs with its `payload.TrainingPayload`,
  `worker.WorkerRun` (the loop, checkpoints, validation), `checkpoint.restore` (its starting
  state), `reporting.progress_report` (rank 0's step metrics and progress line);
- `train_step`: the DeepSpeed engine and one optimizer step; `schedule`: the learning rate;
- `sampler`: which windows each worker reads (one global order, independent of world size);
  `sample_index`: that order built once on disk and memory-mapped (the `sample_index` stage);
  `prefetch`: the next steps' windows read in a background thread;
- `async_save`: every rank saves its own shard in the background, rank 0 publishes;
  `zero_shards`: a rank's ranges of the parameters and AdamW moments at any ZeRO stage, and
  restoring them; `shard_format`: the shard files and `layout.json`; `checkpoint.store`: the
  checkpoints in a directory or a bucket (the one store of `storage.file_store`);
  `checkpoint.marker`: the `COMPLETE` marker and verification; `checkpoint.consolidated`: the
  consolidated format; `resume`: which checkpoint to continue from, checked by every rank;
- `export`: the final model and HF export streamed out of the shards in a Ray task;
  `ray_checkpoint`: the pointer Ray Train keeps; `zero3_init`: GPT's init into ZeRO-3 partitions;
- `zero_state`: the full parameters and AdamW moments of an engine (the consolidated format);
- `deepspeed_config`: conf/deepspeed/zeroN.json filled from the train config;
- `reporting/`: `mfu`, `progress`: MFU, tokens/s, ETA and the MLflow metrics; `step_times`:
  where step time goes;
- `fault`: fault injection; `collectives`: small objects exchanged between ranks.
"""
