"""Package discovery for the `package-dir` layout: the folders `pipeline/`, `model/`,
`tokenizer/` and `conf/` install as `lmforge.pipeline`, `lmforge.model`, ... Every package under
them is found by `find_packages`, so a new folder with an `__init__.py` installs without a
hand-kept list. The rest of the metadata is in pyproject.toml."""

from setuptools import find_packages, setup

ROOTS = {
    "lmforge": "lmforge",
    "lmforge.pipeline": "pipeline",
    "lmforge.model": "model",
    "lmforge.tokenizer": "tokenizer",
    "lmforge.conf": "conf",
}

setup(
    packages=[
        name + suffix
        for name, folder in ROOTS.items()
        for suffix in ["", *(f".{found}" for found in find_packages(folder))]
    ],
    package_dir=ROOTS,
)
