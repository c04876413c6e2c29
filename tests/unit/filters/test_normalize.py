"""Normalisation: NFC, mojibake, control characters, whitespace; bad bytes never crash a run."""

import random
import re
import unicodedata

import ftfy
import pytest

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.normalize import (
    NormalizeConfig,
    TextNormalizer,
    decode_bytes,
    normalize_text,
    repair_mojibake,
)

# Pieces of text every ftfy fixer acts on, and plain ones it leaves alone.
FTFY_PIECES = [
    "plain words ",
    "more text. ",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "&amp; ",
    "&eacute;",
    "&lt;b&gt;",
    "<p>",
    "&#x2019;",
    "caf\u00c3\u00a9 ",
    "\u00e2\u20ac\u0153quoted\u00e2\u20ac\u009d ",
    "It\u00e2\u20ac\u2122s ",
    "\u201ccurly\u201d ",
    "\ufb01ne ",
    "\uff2c\uff2f\uff35\uff24 ",
    "e\u0301",
    "\x1b[31mred\x1b[0m",
    "\x00",
    "\x07",
    "\x0b",
    "\x0c",
    "\x7f",
    "\x85",
    "\u2028",
    "\ufeff",
    "\u00a0",
    "\x9d",
    "\ud83d",
    "na\u00efve ",
    "\u00c2\u00a0",
    "\t",
]


def plain_normalize(text: str) -> str:
    """normalize_text as the plain sequence of its substitutions, without shortcuts."""
    text = ftfy.fix_text(text, normalization="NFC")
    text = re.sub(r"\r\n?|[\u2028\u2029\x85]", "\n", text)
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\ufeff]", "", text)
    text = re.sub(r"[^\S\n\t]+", " ", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return unicodedata.normalize("NFC", text.strip())


def test_shortcuts_change_nothing():
    rng = random.Random(1)
    pieces = [*FTFY_PIECES, " ", "  ", "   ", "\t", " \t ", "\n\n\n", " \n", "\t\n", "\u3000"]
    for _ in range(1000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        assert normalize_text(text) == plain_normalize(text), repr(text)
        ascii_text = "".join(c for c in text if c.isascii())
        assert normalize_text(ascii_text) == plain_normalize(ascii_text), repr(ascii_text)


def test_mojibake_repair_equals_ftfy_on_every_line():
    rng = random.Random(0)
    for _ in range(1000):
        text = "".join(rng.choice(FTFY_PIECES) for _ in range(rng.randrange(1, 30)))
        assert repair_mojibake(text) == ftfy.fix_text(text, normalization="NFC"), repr(text)


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
