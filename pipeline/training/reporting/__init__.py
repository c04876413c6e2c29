"""What a training run reports as it goes: tokens/s, MFU, where step time went, the progress
line with its ETA, and the MLflow step metrics."""
