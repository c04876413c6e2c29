"""Scaling laws: grids of runs around the compute-optimal model, and the fit of L(N, D)."""
