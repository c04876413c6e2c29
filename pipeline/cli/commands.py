"""What each `lmforge` command does, given parsed arguments and the composed config."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from lmforge.pipeline.cli.status import status_json, status_table
from lmforge.pipeline.engine.run_records import PipelineRecord, RecordBook
from lmforge.pipeline.engine.run_request import RunRequest
from lmforge.pipeline.engine.runner import run_pipeline
from lmforge.pipeline.engine.tracking import resolve_tracking_uri
from lmforge.pipeline.engine.workdir import Workdir
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.redaction import redact_text


def _workdir(config: dict) -> Workdir:
    return Workdir(Path(config["workdir"]).expanduser().resolve())


def _finish(record: PipelineRecord, workdir: Workdir, config: dict) -> int:
    print()
    print(status_table(record))
    report = next((s for s in record.stages if s.stage == "report" and s.artifact), None)
    if report:
        print()
        for number, line in enumerate(_headline(config, workdir, report.key)):
            print(f"{'model:' if number == 0 else '':7}{line}")
        print(f"model card: {report.artifact}/model_card.md")
    uri = resolve_tracking_uri(workdir.root, config["cluster"].get("tracking_uri"))
    print(f"results: {redact_text(str(config['cluster'].get('store_uri') or workdir.store))}")
    print(f"MLflow: {redact_text(uri)}   (open the UI with: lmforge ui workdir={workdir.root})")
    return 0


def _store(config: dict, root: Path):
    """The artifact store the config names (`cluster.store_uri`, else the workdir's)."""
    from lmforge.pipeline.storage.artifact_store import open_store
    from lmforge.pipeline.storage.settings import StoreSettings

    settings = StoreSettings.from_cluster(config["cluster"], root)
    return open_store(config["cluster"].get("store_uri"), root, settings)


def _headline(config: dict, workdir: Workdir, key: str) -> list[str]:
    """The report's headline lines (its manifest's summary), or none: a report cached before
    it had them, or a store that does not answer now, leaves the run's outcome as it is."""
    try:
        manifest = _store(config, workdir.root).manifest("report", key) or {}
    except (LmforgeError, OSError):
        return []
    lines = manifest.get("summary", {}).get("headline", [])
    return [line for line in lines if isinstance(line, str)]


def run(args: argparse.Namespace, config: dict) -> int:
    request = RunRequest(
        config=config,
        command="run",
        until=args.until,
        verify=args.verify,
        lease_wait_s=args.lease_wait,
    )
    record = run_pipeline(request)
    return _finish(record, _workdir(config), config)


def rerun(args: argparse.Namespace, config: dict) -> int:
    request = RunRequest(
        config=config,
        command=f"rerun {args.stage}",
        rerun=args.stage,
        downstream=args.downstream,
        verify=args.verify,
        lease_wait_s=args.lease_wait,
    )
    return _finish(run_pipeline(request), _workdir(config), config)


def _record(config: dict, run_id: str) -> PipelineRecord:
    book = RecordBook(_workdir(config).records)
    if run_id == "latest":
        record = book.latest()
        if record is None:
            raise LmforgeError(
                f"no pipeline run in {_workdir(config).root} yet; start one with `lmforge run`"
            )
        return record
    try:
        return book.load(run_id)
    except FileNotFoundError as exc:
        raise LmforgeError(str(exc)) from exc


def status(args: argparse.Namespace, config: dict) -> int:
    if args.sweep:
        from lmforge.pipeline.cli.sweep import sweep_status

        return sweep_status(args, config)
    record = _record(config, args.run)
    print(status_json(record) if args.json else status_table(record))
    return 0


def dag(args: argparse.Namespace, config: dict) -> int:
    from lmforge.pipeline.engine.dag import Dag
    from lmforge.pipeline.engine.execute import load_stages
    from lmforge.pipeline.engine.source_instances import for_config

    print(Dag(for_config(load_stages(), config)).describe())
    return 0


def ui(args: argparse.Namespace, config: dict) -> int:
    workdir = _workdir(config)
    uri = resolve_tracking_uri(workdir.root, config["cluster"].get("tracking_uri"))
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri]
    command += ["--host", "127.0.0.1", "--port", str(args.port)]
    # One person's browser on one workdir: one server process, not MLflow's four (each imports
    # the whole server, seconds of CPU apiece, on the laptop that is training)
    command += ["--workers", "1"]
    if uri.startswith("sqlite:"):
        command += ["--default-artifact-root", (workdir.root / "mlartifacts").as_uri()]
    print(f"MLflow UI on http://127.0.0.1:{args.port} (Ctrl-C to stop)")
    # Nor MLflow's job execution (consumers that poll all the time, for GenAI features lmforge
    # does not use), unless the user turns it on.
    env = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **os.environ}
    return subprocess.call(command, env=env)


def _artifact(config: dict, run_id: str, stage: str) -> Path:
    """A local directory holding `stage`'s artifact of a pipeline run (downloaded if remote)."""
    record = _record(config, run_id)
    for entry in record.stages:
        if entry.stage == stage and entry.artifact and entry.state in ("ran", "cached"):
            return _store(config, _workdir(config).root).materialize(stage, entry.key)
    raise LmforgeError(
        f"pipeline run {record.run_id} has no {stage} artifact; run `lmforge run` first"
    )


def sample(args: argparse.Namespace, config: dict) -> int:
    from lmforge.model.generate import SamplingConfig
    from lmforge.pipeline.evaluation.trained_model import TrainedModel

    trained = TrainedModel(
        _artifact(config, args.run, "pretrain"), _artifact(config, args.run, "train_tokenizer")
    )
    sampling = SamplingConfig(
        max_new_tokens=args.max_new_tokens,
        greedy=args.greedy,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
    )
    print(args.prompt + trained.complete([args.prompt], sampling)[0])
    return 0


def tokenize_text(args: argparse.Namespace, config: dict) -> int:
    from lmforge.tokenizer.describe import describe_tokens, format_tokens
    from lmforge.tokenizer.io import load_tokenizer

    tok = load_tokenizer(_artifact(config, args.run, "train_tokenizer"))
    print(format_tokens(describe_tokens(tok, args.text)))
    return 0


def inspect_clean(args: argparse.Namespace, config: dict) -> int:
    """Sampled documents each filter removed, duplicates with the document kept, and the lines
    or paragraphs repeated across documents that paragraph dedup removed most.

    Reads the records file by file, batch by batch, keeping counts and `--limit` rows per group,
    so a corpus with a billion removals is inspected in bounded memory. In a mixture, each
    source's `clean[<source>]` in turn."""
    record = _record(config, args.run)
    names = [e.stage for e in record.stages if e.stage.startswith("clean[")] or ["clean"]
    for name in names:
        if name != "clean":
            print(f"# {name}")
        _inspect_one(args, _artifact(config, args.run, name))
    return 0


def _inspect_one(args: argparse.Namespace, artifact: Path) -> None:
    from lmforge.pipeline.stages.clean.paragraph_removal import STEP, most_repeated_units

    wanted = args.filter
    counts: dict[tuple[str, str], int] = {}
    samples: dict[tuple[str, str], list[dict]] = {}
    for row in _removal_records(artifact):
        group = (row["step"], row["reason"])
        if wanted and wanted not in group:
            continue
        counts[group] = counts.get(group, 0) + 1
        kept = samples.setdefault(group, [])
        if len(kept) < args.limit:
            kept.append(row)
    repeated = most_repeated_units(artifact, args.limit) if wanted in (None, STEP) else []
    if not counts and not repeated:
        print(f"no document was removed{f' by {wanted}' if wanted else ''} in {artifact}")
        return
    for group, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"== {group[0]} / {group[1]}: {n} documents")
        for row in samples[group]:
            snippet = " ".join(str(row["snippet"]).split())[:160]
            print(f"  {row['id']}: {snippet}")
    if repeated:
        print(f"== {STEP}: the most repeated units removed (documents holding it, copies removed)")
        for unit in repeated:
            text = " ".join(unit["unit"].split())[:120]
            print(f"  {unit['documents']:>8} {unit['removed']:>8}  {text}")


def _removal_records(artifact: Path):
    """Every excluded document, then every removed duplicate, as rows of the excluded schema."""
    import pyarrow.dataset as ds

    for batch in ds.dataset(artifact / "excluded.parquet", format="parquet").to_batches():
        yield from batch.to_pylist()
    for batch in ds.dataset(artifact / "duplicates.parquet", format="parquet").to_batches():
        for row in batch.to_pylist():
            yield {
                "id": row["id"],
                "step": "dedup",
                "reason": row["kind"],
                "snippet": f"(same as {row['kept_id']})",
                "source": "",
            }


def eval_perplexity(args: argparse.Namespace, config: dict) -> int:
    """Perplexity and bits per byte of a run's model on the user's documents."""
    from lmforge.pipeline.evaluation.trained_model import TrainedModel, score_documents
    from lmforge.pipeline.sources.files import expand_paths, read_source

    trained = TrainedModel(
        _artifact(config, args.run, "pretrain"), _artifact(config, args.run, "train_tokenizer")
    )
    field, max_mb = config["data"]["text_field"], config["data"]["max_text_file_mb"]
    texts = (
        doc.text
        for path in expand_paths(args.data)
        for doc in read_source(path, field, max_mb)
        if isinstance(doc.text, str)
    )
    score = score_documents(trained, texts, args.stride)
    if not score.tokens:
        raise LmforgeError(f"no text to score in {' '.join(args.data)}")
    print(f"documents      {score.documents}")
    print(f"tokens         {score.tokens}")
    print(f"perplexity     {score.perplexity:.3f}")
    print(f"bits per byte  {score.bits_per_byte:.4f}")
    return 0


def report(args: argparse.Namespace, config: dict) -> int:
    if args.sweep:
        from lmforge.pipeline.cli.sweep import sweep_report

        return sweep_report(args, config)
    card = _artifact(config, args.run, "report") / "model_card.md"
    print(card.read_text(encoding="utf-8") if args.print else card)
    return 0
