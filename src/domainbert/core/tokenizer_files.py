"""Saved tokenizer folders that load in transformers 4.40+ as well as 5.x (``make_portable``).

Used by every stage that writes a tokenizer (vocab, head warm-up, pretraining, fine-tuned models); it edits
the files of a folder in place and trains nothing.
"""

from __future__ import annotations

import json
from pathlib import Path


def make_portable(folder: Path) -> None:
    """Make a saved tokenizer folder load in transformers 4.40+ as well as 5.x.

    transformers 5 names a tokenizer built from a ``tokenizers`` object ``TokenizersBackend``, a class 4.x
    does not have. A WordPiece tokenizer is named ``BertTokenizerFast`` (both versions load it from
    ``tokenizer.json``; 5.x maps it to ``BertTokenizer``) and gets BERT's ``vocab.txt`` and ``do_lower_case``;
    any other kind is named ``PreTrainedTokenizerFast``. A folder already naming a concrete class is left as is.
    """
    config_path, tok_path = folder / "tokenizer_config.json", folder / "tokenizer.json"
    if not config_path.is_file() or not tok_path.is_file():
        return
    config = json.loads(config_path.read_text())
    data = json.loads(tok_path.read_text())
    wordpiece = data.get("model", {}).get("type") == "WordPiece"
    if wordpiece and not (folder / "vocab.txt").is_file():
        vocab = data["model"]["vocab"]
        (folder / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.__getitem__)) + "\n")
    if config.get("tokenizer_class") in (None, "TokenizersBackend"):
        config["tokenizer_class"] = "BertTokenizerFast" if wordpiece else "PreTrainedTokenizerFast"
        if wordpiece:
            config["do_lower_case"] = bool((data.get("normalizer") or {}).get("lowercase", False))
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
