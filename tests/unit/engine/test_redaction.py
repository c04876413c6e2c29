"""Secrets are masked by value, not only by key name: inside URIs, in query strings, as bearer
headers or provider tokens, and as whole high-entropy values, in lists and tuples too."""

from __future__ import annotations

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.run_records import PipelineRecord, RecordBook, StageRecord
from lmforge.pipeline.redaction import looks_like_token, redact, redact_text

SECRET = "s3cret"
GITHUB = "ghp_R8kQ2mZx7LwP4tYv9NbC3dHs6JfG1aUe5WqK"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
API_KEY = "Zx81kLmQ4pRt7WvB2nYc9HdF3sJg6aKe0uTi"
RAY_TOKEN = "9c1e4b7a2f6d8035e1b9c4a7d2f08e63b5a1c9d47e2f6b80a3d5c1e9f7b2a460"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"http://user:{SECRET}@127.0.0.1:5000", "http://user:***@127.0.0.1:5000"),
        (f"postgresql://mlflow:{SECRET}@x@db:5432/m", "postgresql://mlflow:***@db:5432/m"),
        (f"https://{GITHUB}@github.com/o/r.git", "https://***@github.com/o/r.git"),
        (f"s3://bucket/k?token={SECRET}&part=2", "s3://bucket/k?token=***&part=2"),
        (f"https://h/x?access_key={SECRET}", "https://h/x?access_key=***"),
        (f"https://h/x?password={SECRET}", "https://h/x?password=***"),
        (f"https://b.s3/k?X-Amz-Signature={SECRET}", "https://b.s3/k?X-Amz-Signature=***"),
        (f"https://acct.blob/c?sv=2024&sig={SECRET}", "https://acct.blob/c?sv=2024&sig=***"),
        (f"Authorization: Bearer {SECRET}.x", "Authorization: Bearer ***"),
        (f"uses {GITHUB} and {AWS_KEY_ID}", "uses *** and ***"),
        (f"+cluster.api_token={SECRET} train.lr=0.1", "+cluster.api_token=*** train.lr=0.1"),
    ],
)
def test_credentials_inside_text_are_masked(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "sqlite:////tmp/runs/mlflow.db",
        "s3://bucket/prefix/store",
        "http://127.0.0.1:5000",
        "RAY_AUTH_TOKEN_PATH=/home/me/.ray/auth_token does not exist",
        "lmforge run workdir=/shared/runs train.lr=0.01 --until tokenize",
    ],
)
def test_text_without_credentials_is_unchanged(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("value", [GITHUB, AWS_SECRET, RAY_TOKEN, API_KEY])
def test_long_high_entropy_values_look_like_tokens(value):
    assert looks_like_token(value)


@pytest.mark.parametrize(
    "value",
    ["my_long_experiment_name_version_two_final", "/data/Corpus2024/Shard00017/train", "a1" * 8],
)
def test_names_paths_and_short_hashes_do_not_look_like_tokens(value):
    assert not looks_like_token(value)


def test_config_values_are_redacted_by_value_in_mappings_lists_and_tuples():
    flat = redact(
        {
            "cluster": {"tracking_uri": f"http://u:{SECRET}@h:5000", "store_uri": "s3://b/p"},
            "data": {
                "paths": ["a.txt", f"https://u:{SECRET}@h/b.jsonl"],
                "sources": [{"name": "web", "token": SECRET}],
                "pair": ("ok", RAY_TOKEN),
            },
        }
    )
    assert flat["cluster.tracking_uri"] == "http://u:***@h:5000"
    assert flat["cluster.store_uri"] == "s3://b/p"
    assert flat["data.paths"] == ["a.txt", "https://u:***@h/b.jsonl"]
    assert flat["data.sources"] == [{"name": "web", "token": "***"}]
    assert flat["data.pair"] == ("ok", "***")
    assert SECRET not in str(flat)


def test_no_value_of_the_shipped_config_is_changed_by_redaction():
    config = compose(["preset=tiny"])
    flat = redact(config)
    assert flat["cluster.experiment"] == config["cluster"]["experiment"]
    assert "***" not in str(flat)


def test_a_run_record_never_holds_a_secret_from_a_stage_error(tmp_path):
    book = RecordBook(tmp_path)
    record = PipelineRecord(run_id="r1", command="run", stages=[StageRecord("clean", "k")])
    record.stages[0].error = f"LmforgeError: cannot open s3://u:{SECRET}@h/b: denied"
    book.save(record)
    saved = (tmp_path / "r1.json").read_text()
    assert SECRET not in saved
    assert book.load("r1").stages[0].error == "LmforgeError: cannot open s3://u:***@h/b: denied"
