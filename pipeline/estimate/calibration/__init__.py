"""What `lmforge estimate --calibrate` measures, installed with the package: the cases (`cases.py`)
and their measuring functions (`measures.py`), run each in a fresh process (`case_runner.py`), and
the work they time, shared with the benchmarks in `bench/` that import it from here: a synthetic
corpus and the `clean` stage run in process, a synthetic split and BPE training, the tokenize
path, a sample index build, training steps."""
