"""`lmforge sweep`: variants of one pipeline side by side over one store (docs/sweeps.md)."""
