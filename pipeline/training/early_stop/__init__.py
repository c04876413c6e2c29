"""What a training run does for a sweep that stops early: it scores a fixed validation slice every
`train.eval_every` steps (`val_slice`) and follows the sweep's verdict on it (`requests`)."""
