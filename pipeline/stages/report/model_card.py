"""A model card built once as sections, rendered both as markdown and as self-contained HTML
(plots embedded as base64 PNG), so the two never disagree."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(slots=True)
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    table: list[tuple[str, str]] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    images: list[Path] = field(default_factory=list)
    code: str = ""


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def to_markdown(title: str, sections: list[Section]) -> str:
    out = [f"# {title}"]
    for s in sections:
        out.append(f"## {s.title}")
        out += s.paragraphs
        if s.table:
            out.append("| metric | value |\n|---|---|")
            out[-1] += "".join(f"\n| {k} | {v} |" for k, v in s.table)
        if s.bullets:
            out.append("\n".join(f"- {b}" for b in s.bullets))
        if s.code:
            out.append(f"```\n{s.code}\n```")
        out += [f"![{p.stem}]({p.name})" for p in s.images]
    return "\n\n".join(out) + "\n"


def to_html(title: str, sections: list[Section]) -> str:
    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>"]
    for s in sections:
        body.append(f"<h2>{esc(s.title)}</h2>")
        body += [f"<p>{esc(p)}</p>" for p in s.paragraphs]
        if s.table:
            rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in s.table)
            body.append(f"<table><tr><th>metric</th><th>value</th></tr>{rows}</table>")
        if s.bullets:
            body.append("<ul>" + "".join(f"<li>{esc(b)}</li>" for b in s.bullets) + "</ul>")
        if s.code:
            body.append(f"<pre>{esc(s.code)}</pre>")
        for p in s.images:
            data = base64.b64encode(p.read_bytes()).decode()
            body.append(f'<img alt="{esc(p.stem)}" src="data:image/png;base64,{data}">')
    style = (
        "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px}"
        "pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )
