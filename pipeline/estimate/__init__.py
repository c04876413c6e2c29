"""`lmforge estimate`: a run's time, memory and storage predicted per stage before it runs, and
checked against what each stage measured once it ran.

- `cost_model.py`: the contract of a stage's cost model (`pipeline/stages/<stage>/cost.py`);
- `stage_costs.py`: every stage's cost model, named and wired by the stage's declaration;
- `coefficients.py`: the fitted coefficients file, shipped or calibrated on this machine;
- `prediction.py`: the estimate of a whole run, for a corpus and a cluster;
- `measured.py`: what a finished stage cost beside its prediction (its manifest's `estimate`);
- `calibrate.py`: fitting the coefficients to measured runs (`lmforge estimate --calibrate`);
- `calibration/`: the measurements that fit runs on.
"""
