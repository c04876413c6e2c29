"""lmforge: raw text to an evaluated language model (see README.md)."""

__version__ = "0.1.0"
