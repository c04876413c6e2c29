"""Keeping secrets out of everything lmforge logs, records or hands to a Ray job.

A value is hidden when its key names a secret (`token`, `password`, `secret`, `key`... as a word
of the name), when it looks like a credential on its own (a long high-entropy string), and inside
text: the userinfo of a URI (`http://user:***@host`), secret query parameters (`?token=***`,
`X-Amz-Signature=***`), `name=value` pairs with a secret name, bearer headers and the tokens of
well-known providers (`ghp_...`, `AKIA...`, `hf_...`, JWTs).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

MASK = "***"
SECRET_WORDS = frozenset(
    {"token", "password", "passwd", "pwd", "secret", "key", "apikey", "credential", "credentials"}
)
"""Words that make a config key a secret (`mlflow_password`, `accessKey`, `api_token`)."""
QUERY_SECRET_WORDS = SECRET_WORDS | {"signature", "sig", "auth", "authorization", "session"}
"""In a URI's query or a `name=value` pair these name a secret too (`X-Amz-Signature`, `sig`)."""
SECRET_EXEMPT = frozenset({"cache_key", "key"})
"""Names that contain a secret word but hold none: the pipeline's own cache keys."""
NOT_SECRET_LAST_WORDS = frozenset({"path", "file", "dir", "mode", "env", "uri", "url", "name"})
"""A name ending in one of these holds where a secret is, or how it is used: `token_path`,
`RAY_AUTH_MODE`."""

_URI_AUTHORITY = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<authority>[^/?#\s'\"]*)")
_NAME_VALUE = re.compile(r"(?P<name>(?<![\w.-])[A-Za-z_][\w.-]*)=(?P<value>[^&#\s'\",;]+)")
_BEARER = re.compile(r"\b(?P<scheme>Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_PROVIDER_TOKENS = re.compile(
    r"\b(?:"
    r"gh[opusr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|sk-[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"  # JWTs
    r")"
)
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
_HEX = re.compile(r"[0-9a-fA-F]{32,}")


def is_secret_name(name: str, words: frozenset[str] = SECRET_WORDS) -> bool:
    """Whether a key (its last dotted part) names a secret: `aws_secret_access_key`, `apiKey`."""
    leaf = name.rsplit(".", 1)[-1].lstrip("+~")
    if leaf.lower() in SECRET_EXEMPT:
        return False
    split = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", leaf).lower()
    name_words = re.findall(r"[a-z0-9]+", split)
    if not name_words or name_words[-1] in NOT_SECRET_LAST_WORDS:
        return False
    return any(word in words for word in name_words)


def looks_like_token(value: str) -> bool:
    """A whole value that is a credential by its shape: long, one word, high entropy."""
    value = value.strip()
    if not _TOKEN_CHARS.fullmatch(value):
        return False
    if _HEX.fullmatch(value):
        return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    classes = (str.isupper, str.islower, str.isdigit)
    if not all(any(test(c) for c in value) for test in classes):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 4.3  # random base62/64 of 32+ chars is ~4.5-5; words and paths less


def redact_text(text: str) -> str:
    """`text` with URI credentials, secret parameters, bearer headers and known tokens masked."""
    text = _URI_AUTHORITY.sub(_mask_userinfo, text)
    text = _NAME_VALUE.sub(_mask_named_value, text)
    text = _BEARER.sub(lambda m: f"{m['scheme']} {MASK}", text)
    return _PROVIDER_TOKENS.sub(MASK, text)


def redact_value(value: Any) -> Any:
    """A config value with its secrets masked; lists, tuples and mappings are walked."""
    if isinstance(value, str):
        return MASK if looks_like_token(value) else redact_text(value)
    if isinstance(value, Mapping):
        return {k: MASK if is_secret_name(str(k)) else redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value)
    return value


def redact(params: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten nested params to dotted keys, masking secrets by key name and by value."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
            return
        flat[prefix] = MASK if is_secret_name(prefix) else redact_value(value)

    walk("", params)
    return flat


def _mask_userinfo(match: re.Match) -> str:
    authority = match["authority"]
    if "@" not in authority:
        return match[0]
    userinfo, host = authority.rsplit("@", 1)
    user, has_password, _ = userinfo.partition(":")
    if has_password and not looks_like_token(user) and not _PROVIDER_TOKENS.search(user):
        return f"{match['scheme']}{user}:{MASK}@{host}"
    return f"{match['scheme']}{MASK}@{host}"  # a lone userinfo is usually a token


def _mask_named_value(match: re.Match) -> str:
    if is_secret_name(match["name"], QUERY_SECRET_WORDS) or looks_like_token(match["value"]):
        return f"{match['name']}={MASK}"
    return match[0]
