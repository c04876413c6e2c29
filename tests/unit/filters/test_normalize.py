"""Normalisation: NFC, mojibake, control characters, whitespace; bad bytes never crash a run."""

import random
import unicodedata

import pytest

from lmforge.pipeline.filters.document import Document
from lmforge.pipeline.filters.normalize import (
    NormalizeConfig,
    TextNormalizer,
    decode_bytes,
    normalize_text,
)


def test_text_comes_out_nfc():
    decomposed = "cafe\u0301 de\u0301ja\u0300 vu"
    out = normalize_text(decomposed)
    assert out == "café déjà vu"
    assert unicodedata.is_normalized("NFC", out)


def test_mojibake_is_repaired():
    assert (
        normalize_text("The cafÃ© servesÂ coffee â€” and tea.")
        == "The café serves coffee — and tea."
    )


def test_control_characters_go_but_newlines_and_tabs_stay():
    assert normalize_text("a\x00b\x07c\td\ne\x1bf\ufeff") == "abc\td\nef"


def test_line_endings_spaces_and_blank_lines_are_tidied():
    text = "  first  line   \r\nsecond\u00a0\u00a0line\r\r\n\n\n\nthird line  "
    assert normalize_text(text) == "first line\nsecond line\n\nthird line"


def test_invalid_utf8_bytes_are_repaired_and_counted():
    step = TextNormalizer(NormalizeConfig(on_invalid_utf8="repair"))
    doc = Document(id="d", text="naïve café".encode() + b" cr\xe8me br\xfbl\xe9e", source="s")
    kept = step.process(doc)
    assert kept is not None
    assert kept.text == "naïve café crème brûlée"
    assert step.counts.events["invalid_utf8_repaired"] == 1


def test_invalid_utf8_bytes_drop_the_document_when_configured():
    step = TextNormalizer(NormalizeConfig(on_invalid_utf8="drop"))
    bad = Document(id="bad", text=b"caf\xe9", source="s")
    good = Document(id="good", text="café".encode(), source="s")
    kept = step.process_batch([bad, good])
    assert [d.id for d in kept] == ["good"]
    assert kept[0].text == "café"
    assert step.counts.dropped_by_reason == {"invalid_utf8": 1}


def test_random_bytes_never_crash_either_policy():
    rng = random.Random(0)
    blobs = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))) for _ in range(300)]
    for policy in ("repair", "drop"):
        step = TextNormalizer(NormalizeConfig(on_invalid_utf8=policy))
        kept = step.process_batch(
            [Document(id=str(i), text=b, source="") for i, b in enumerate(blobs)]
        )
        assert all(isinstance(d.text, str) for d in kept)
        assert step.counts.docs_in == 300 == step.counts.docs_out + step.counts.docs_dropped
    assert decode_bytes(b"\x81\x8d")[1] is True


def test_unknown_policy_is_rejected_naming_the_key():
    with pytest.raises(ValueError, match="on_invalid_utf8"):
        NormalizeConfig(on_invalid_utf8="ignore")
