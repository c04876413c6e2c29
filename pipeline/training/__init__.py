"""Distributed pretraining with Ray Train and DeepSpeed ZeRO, used by the `pretrain` stage.

Read in this order:
- `config.TrainConfig`: the typed `train` config group;
- `driver.run_pretraining`: starts the Ray Train run and exports the final weights;
- `worker.train_loop_per_worker`: what every worker runs (resume, loop, checkpoints, logging);
- `train_step`: the DeepSpeed engine and one optimizer step; `schedule`: the learning rate;
- `sampler`: which windows each worker reads (one global order, independent of world size);
  `sample_index`: that order built once on disk and memory-mapped (the `sample_index` stage);
  `prefetch`: the next steps' windows read in a background thread;
- `checkpoint`: atomic, verified, world-size-independent checkpoints; `resume`: which one to use;
- `zero_state`: the full parameters and AdamW moments of an engine at any ZeRO stage;
- `deepspeed_config`: conf/deepspeed/zeroN.json filled from the train config;
- `mfu`, `progress`: MFU, tokens/s, ETA and the MLflow metrics; `step_times`: where step time
  goes; `fault`: fault injection.
"""
