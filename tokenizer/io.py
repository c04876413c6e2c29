"""Save a trained tokenizer so `tokenizers` and `transformers` load it, and load it back.

The directory holds `tokenizer.json` (the `tokenizers` model), `tokenizer_config.json` and
`special_tokens_map.json` (read by `transformers.AutoTokenizer`/`PreTrainedTokenizerFast`, offline).
HF sees `<|endoftext|>` as bos and eos, `<|pad|>` as pad, and no unknown token; it adds nothing to
encoded text, so a document's ids are `[tok.bos_token_id] + tok(text).input_ids` (see
`lmforge.tokenizer.convention`). `transformers` is imported only when saving or loading for HF.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import Tokenizer

from lmforge.tokenizer.config import EOT, EOT_ID, PAD, PAD_ID

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_FILES = (TOKENIZER_FILE, "tokenizer_config.json", "special_tokens_map.json")
"""Every file `save_tokenizer` writes; copy all of them to ship the tokenizer (e.g. HF export)."""

# Text that exercises bytes, Unicode, emoji, code and whitespace runs; checked after every save.
_PROBE = "Héllo wörld 🤗 中文\n\tdef f(x):\n        return x**2  \r\n\x00\x7f <|endoftext|>"


def save_tokenizer(tok: Tokenizer, out_dir: str | Path, model_max_length: int) -> None:
    """Write the tokenizer files into `out_dir` and check that HF reloads them to the same ids."""
    from transformers import PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    specials = _special_tokens_map(tok)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(tok.to_str()),  # HF may edit the object it gets
        model_max_length=model_max_length,
        unk_token=None,
        **specials,
    )
    hf.save_pretrained(str(out_dir))
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    # transformers 4 and 5 both resolve this class name; "TokenizersBackend" exists only in 5.
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    (out_dir / "special_tokens_map.json").write_text(json.dumps(specials, indent=2) + "\n")
    _check_hf_round_trip(tok, out_dir)


def _special_tokens_map(tok: Tokenizer) -> dict:
    added = tok.get_added_tokens_decoder()
    user = [t.content for i, t in sorted(added.items()) if t.special and i not in (EOT_ID, PAD_ID)]
    return {
        "bos_token": EOT,
        "eos_token": EOT,
        "pad_token": PAD,
        "additional_special_tokens": user,
    }


def _check_hf_round_trip(tok: Tokenizer, out_dir: Path) -> None:
    hf = load_hf_tokenizer(out_dir)
    ours = tok.encode(_PROBE, add_special_tokens=False).ids
    theirs = hf(_PROBE, add_special_tokens=True)["input_ids"]
    if ours != theirs:
        raise RuntimeError(
            f"transformers reloads {out_dir} with different ids than tokenizers; "
            "check the installed transformers version"
        )


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Load `tokenizer.json` from a directory written by `save_tokenizer` (or the file itself)."""
    path = Path(path)
    file = path / TOKENIZER_FILE if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(
            f"no tokenizer at {file}; run the train_tokenizer stage or point to its artifact"
        )
    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as err:  # tokenizers raises a bare Exception for every parse error
        raise ValueError(f"{file} is not a valid tokenizer.json ({err}); retrain it") from err
    if tok.token_to_id(EOT) != EOT_ID or tok.token_to_id(PAD) != PAD_ID:
        raise ValueError(
            f"{file}: {EOT} must have id {EOT_ID} and {PAD} id {PAD_ID}; "
            "it was not trained by lmforge.tokenizer.train_bpe"
        )
    return tok


def load_hf_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """The same tokenizer through `transformers.AutoTokenizer`, never touching the network."""
    from transformers import AutoTokenizer

    path = Path(path)
    if not (path / TOKENIZER_FILE).is_file():
        raise FileNotFoundError(f"no {TOKENIZER_FILE} in {path}; run the train_tokenizer stage")
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
