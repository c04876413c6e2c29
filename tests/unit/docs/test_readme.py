"""The README stays a five-minute read, and its links lead somewhere."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
MAX_BYTES = 16 * 1024
LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchors(page: Path) -> set[str]:
    """The anchors Python-Markdown's `toc` gives the page's headings (as mkdocs and GitHub do for
    plain headings)."""
    anchors = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip().replace("`", "")
        text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
        text = re.sub(r"[^\w\s-]", "", text).strip().lower()
        anchors.add(re.sub(r"[-\s]+", "-", text))
    return anchors


def test_the_readme_is_at_most_16_kb():
    size = README.stat().st_size
    assert size <= MAX_BYTES, (
        f"README.md is {size} bytes, over {MAX_BYTES}: move the depth into a page of docs/"
    )


def test_every_relative_link_of_the_readme_names_a_file_and_heading_that_exist():
    broken = []
    for target in LINK.findall(README.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        page = REPO / path
        if not page.exists() or (anchor and anchor not in heading_anchors(page)):
            broken.append(target)
    assert not broken, f"README.md links to what does not exist: {broken}"
