"""Checks run before step 1, so a mismatched model/tokenizer fails in seconds with a clear error.

Each check raises ``ModelError`` (the model or tokenizer folder is inconsistent) or ``ConfigError`` (the
domain YAML asks for something this model/tokenizer cannot do), naming the folder and the field:
tokenizer size vs embedding rows, special-token ids, casing vs vocabulary, sequence length vs position
embeddings, whole-word masking vs tokenizer type, next-sentence prediction vs segment embeddings and NSP
head. This module does not fix anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from domainbert.core.errors import ConfigError, ModelError
from domainbert.core.models import embedding_rows

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

REQUIRED_SPECIAL = ("cls_token", "sep_token", "mask_token", "pad_token")


def check_vocab_size(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, source: str) -> None:
    rows = embedding_rows(model)
    if len(tokenizer) > rows:
        raise ModelError(
            f"tokenizer has {len(tokenizer)} tokens but the model has only {rows} embedding rows "
            "(resize the embeddings, or use the extended model written by the vocab stage)",
            file=source,
        )


def check_special_tokens(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, source: str) -> None:
    rows = embedding_rows(model)
    for name in REQUIRED_SPECIAL:
        token = getattr(tokenizer, name, None)
        token_id = getattr(tokenizer, f"{name}_id", None)
        if token is None or token_id is None:
            raise ModelError(f"tokenizer has no {name} (MLM needs [CLS], [SEP], [MASK] and [PAD])", file=source)
        if token_id == tokenizer.unk_token_id and name != "unk_token":
            raise ModelError(f"{name} {token!r} maps to the unknown token", file=source)
        if not 0 <= token_id < rows:
            raise ModelError(f"{name} id {token_id} is outside the {rows} embedding rows", file=source)


def tokenizer_lowercases(tokenizer: PreTrainedTokenizerBase) -> bool:
    """True if the tokenizer's normaliser lowercases ("ABC" and "abc" tokenize alike)."""
    upper = tokenizer("ABCDEFG Hello", add_special_tokens=False)["input_ids"]
    lower = tokenizer("abcdefg hello", add_special_tokens=False)["input_ids"]
    return upper == lower


def check_casing(tokenizer: PreTrainedTokenizerBase, lowercase: bool, source: str, field: str) -> None:
    actual = tokenizer_lowercases(tokenizer)
    if actual != lowercase:
        want = "lowercases" if lowercase else "keeps case"
        got = "lowercases" if actual else "keeps case"
        raise ConfigError(
            f"the config says the model {want} but its tokenizer {got} ({source}); "
            f"set {field} to {str(actual).lower()} or use a matching tokenizer",
            field=field,
        )
    if not actual:
        # A cased tokenizer whose vocabulary has no uppercase entries maps every capital to [UNK]-ish pieces.
        vocab = tokenizer.get_vocab()
        if vocab and not any(any(c.isupper() for c in tok) for tok in vocab):
            raise ModelError("tokenizer keeps case but its vocabulary has no uppercase tokens", file=source)


def check_seq_len(model: PreTrainedModel, seq_len: int, source: str) -> None:
    limit = getattr(model.config, "max_position_embeddings", None)
    offset = 2 if getattr(model.config, "model_type", "") in ("roberta", "xlm-roberta") else 0
    if limit is not None and seq_len > limit - offset:
        raise ConfigError(
            f"sequence length {seq_len} exceeds the model's {limit - offset} position embeddings ({source})",
            field="pretrain.seq_len",
        )


def check_whole_word(tokenizer: PreTrainedTokenizerBase, whole_word: bool, source: str) -> None:
    if not whole_word:
        return
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(
            f"whole-word masking needs a fast tokenizer with word ids; {source} has a slow {type(tokenizer).__name__}",
            field="pretrain.whole_word_mask",
        )
    enc = tokenizer(["word boundaries"], add_special_tokens=False)
    if any(w is None for w in enc.word_ids(0)):
        raise ConfigError(
            f"tokenizer {source} gives no word ids; whole-word masking is impossible", field="pretrain.whole_word_mask"
        )


def check_nsp(model: PreTrainedModel, enabled: bool, source: str) -> None:
    """NSP needs two segment embeddings (token type 0 for A, 1 for B), a pooler and an NSP classifier."""
    if not enabled:
        return
    field = "pretrain.next_sentence_prediction"
    model_type = getattr(model.config, "model_type", type(model).__name__)
    types = getattr(model.config, "type_vocab_size", 0) or 0
    if types < 2:
        raise ConfigError(
            f"next-sentence prediction needs segment (token type) embeddings for A and B, but the "
            f"{model_type} model {source} has {types} (RoBERTa-style models have no NSP); set {field} "
            "to false",
            field=field,
        )
    head = getattr(getattr(model, "cls", None), "seq_relationship", None)
    if head is None or getattr(model.base_model, "pooler", None) is None:
        raise ConfigError(
            f"next-sentence prediction needs a pooler and an NSP head (BERT's cls.seq_relationship); "
            f"{type(model).__name__} from {source} has none; set {field} to false",
            field=field,
        )


def run_preflight(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    source: str,
    seq_len: int,
    lowercase: bool,
    lowercase_field: str,
    whole_word: bool,
    nsp: bool = False,
) -> None:
    """All checks, cheapest first.

    Raises:
        ModelError, ConfigError: the first failed check.
    """
    check_special_tokens(model, tokenizer, source)
    check_vocab_size(model, tokenizer, source)
    check_seq_len(model, seq_len, source)
    check_whole_word(tokenizer, whole_word, source)
    check_nsp(model, nsp, source)
    check_casing(tokenizer, lowercase, source, lowercase_field)
