"""The stages of the DAG, one folder each (`<stage>/stage.py`, its cost model `<stage>/cost.py`
and its helpers); importing this package registers them all."""

from lmforge.pipeline.stages.clean import stage as _clean  # noqa: F401 - registers the stage
from lmforge.pipeline.stages.dedup_across import stage as _dedup_across  # noqa: F401
from lmforge.pipeline.stages.harm import stage as _harm  # noqa: F401
from lmforge.pipeline.stages.perplexity import stage as _perplexity  # noqa: F401
from lmforge.pipeline.stages.pretrain import stage as _pretrain  # noqa: F401
from lmforge.pipeline.stages.report import stage as _report  # noqa: F401
from lmforge.pipeline.stages.sample import stage as _sample  # noqa: F401
from lmforge.pipeline.stages.sample_index import stage as _sample_index  # noqa: F401
from lmforge.pipeline.stages.tokenize import stage as _tokenize  # noqa: F401
from lmforge.pipeline.stages.train_tokenizer import stage as _train_tokenizer  # noqa: F401
