"""The stages of the DAG, one module each; importing this package registers them all."""

from lmforge.pipeline.stages import (  # noqa: F401 - imported for registration
    clean,
    harm,
    perplexity,
    pretrain,
    report,
    sample,
    sample_index,
    tokenize,
    train_tokenizer,
)
