"""How close `lmforge estimate` comes to measured runs it was not fitted on.

Runs every calibration case (`pipeline/estimate/calibration/cases.py`) at its fit sizes, fits
the coefficients on those samples alone (starting from the shipped file, fitted by `--calibrate`
at other sizes again), then runs the target sizes (the 1M- and 3M-document clean benches, the
`tiny` pipeline run and the `small` model's for 100 steps; `--quick`: smaller ones) and
compares, for each, the predicted wall time and peak memory of the largest process with the
measured ones. A pipeline run counts as a whole (its stages' summed time, its largest
process); its stages are listed too. The last line is JSON: `{"bench": "estimate_accuracy",
"checks": [...], "max_time_error", "max_memory_error", "all_within": bool}` (goal: every check
within +-30%).

    .venv/bin/python bench/estimate_accuracy.py [--quick] [--tolerance 0.3] [--keep DIR]
        [--case NAME ...]

With `--keep DIR`, a run started again on the same DIR reuses every size already measured there.
`--case pipeline` measures and checks that case alone (the other stages keep the shipped fit):
the demo's own run, every stage of it, without the clean and BPE scale cases.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from lmforge.pipeline.estimate.calibrate import fit
from lmforge.pipeline.estimate.calibration.case_runner import run_cases
from lmforge.pipeline.estimate.coefficients import load_coefficients, shipped_coefficients
from lmforge.pipeline.estimate.prediction import predict
from lmforge.pipeline.estimate.stage_costs import cost_models


def predicted(sample: dict, coefficients: dict) -> tuple[float, float]:
    """(wall seconds, largest measured process's MB) the fitted model gives for a sample."""
    cost = cost_models()[sample["stage"]].cost(sample["size"])
    result = predict(sample["stage"], cost, sample["size"], coefficients)
    pairs = zip(cost.processes, result.processes, strict=True)
    by_measure = {p.measure: q.peak_rss_mb for p, q in pairs}
    measured = [m for m in sample["measured"] if m.endswith("_rss_mb") and m in by_measure]
    peak = max((by_measure[m] for m in measured), default=result.peak_rss_mb)
    return result.wall_s, peak


def measured(sample: dict) -> tuple[float, float]:
    rss = [v for k, v in sample["measured"].items() if k.endswith("_rss_mb")]
    return sample["measured"]["wall_s"], max(rss, default=0.0)


def checks(targets: list[dict], coefficients: dict) -> tuple[list[dict], list[str]]:
    """One check per target run (a pipeline run's stages together), and table lines."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for sample in targets:
        runs.setdefault((sample["case"], sample["case_size"]), []).append(sample)
    found, lines = [], []
    for (case, size), samples in runs.items():
        rows = [(s["stage"], predicted(s, coefficients), measured(s)) for s in samples]
        for stage, (pt, pm), (mt, mm) in rows:
            lines.append(f"  {case:<16}{stage:<16}{pt:>9.1f}{mt:>9.1f}{pm:>9.0f}{mm:>9.0f}")
        time_p, time_m = sum(r[1][0] for r in rows), sum(r[2][0] for r in rows)
        mem_p, mem_m = max(r[1][1] for r in rows), max(r[2][1] for r in rows)
        found.append(
            {
                "case": case,
                "size": json.loads(size),
                "predicted_s": round(time_p, 1),
                "measured_s": round(time_m, 1),
                "time_error": round(time_p / time_m - 1, 3),
                "predicted_peak_rss_mb": round(mem_p),
                "measured_peak_rss_mb": round(mem_m),
                "memory_error": round(mem_p / mem_m - 1, 3) if mem_m else None,
            }
        )
    return found, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small fit and target sizes")
    parser.add_argument("--tolerance", type=float, default=0.3)
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    parser.add_argument("--case", action="append", help="only this calibration case (repeatable)")
    args = parser.parse_args()

    def chosen(sizes: tuple, case) -> tuple:
        return sizes if not args.case or case.name in args.case else ()

    root = args.keep or Path(tempfile.mkdtemp(prefix="lmforge-estimate-accuracy-"))
    try:
        fit_samples = run_cases(
            root / "fit", lambda c: chosen(c.quick_fit if args.quick else c.fit, c)
        )
        coefficients = fit(fit_samples, load_coefficients(shipped_coefficients()))
        targets = run_cases(
            root / "target", lambda c: chosen(c.quick_target if args.quick else c.target, c)
        )
        found, lines = checks(targets, coefficients)
        if args.keep:  # what was fitted and checked, to look into or refit later
            for name, data in (("fit", fit_samples), ("target", targets)):
                (root / f"{name}_samples.json").write_text(json.dumps(data, indent=1))
            (root / "coefficients.json").write_text(json.dumps(coefficients, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"  {'case':<16}{'stage':<16}{'pred s':>9}{'meas s':>9}{'pred MB':>9}{'meas MB':>9}")
    print("\n".join(lines))
    time_errors = [abs(c["time_error"]) for c in found]
    memory_errors = [abs(c["memory_error"]) for c in found if c["memory_error"] is not None]
    for c in found:
        print(
            f"{c['case']} {c['size']}: time {c['predicted_s']}s vs {c['measured_s']}s "
            f"({c['time_error']:+.0%}), peak {c['predicted_peak_rss_mb']} vs "
            f"{c['measured_peak_rss_mb']} MB ({(c['memory_error'] or 0):+.0%})"
        )
    result = {
        "bench": "estimate_accuracy",
        "quick": args.quick,
        "cases": args.case or "all",
        "fit_samples": len(fit_samples),
        "checks": found,
        "max_time_error": max(time_errors, default=None),
        "max_memory_error": max(memory_errors, default=None),
        "all_within": all(e <= args.tolerance for e in time_errors + memory_errors),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
