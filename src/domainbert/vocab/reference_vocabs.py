"""Reference vocabularies and the tokenizers compared in the vocab report, with their sanity checks.

Every tokenizer the report measures (each reference, the base model's, the domain's, the extended one) is
described by a ``TokenizerInfo``: a ``tokenizers.Tokenizer`` with padding and truncation off, its token
``style`` (``wordpiece``: ``##`` continuation pieces; ``metaspace``: ``\u2581`` word-initial pieces;
``bytelevel``: GPT-2 byte symbols, ``\u0120`` word-initial), whether it lower-cases, and its special tokens.

References load from a BERT ``vocab.txt`` (BERT's normaliser and pre-tokeniser rebuilt around it), a GPT-2 /
RoBERTa ``vocab.json`` + ``merges.txt`` (byte-level BPE), a tokenizer folder, or a hub id. Malformed files and
casing mistakes (a cased vocabulary behind a lower-casing normaliser, or the reverse) are ``DataError``s
naming the file, line or field. This module computes no figures.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

from domainbert.core.errors import ConfigError, DataError, ModelError
from domainbert.vocab.bytelevel import decode_bytelevel

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from domainbert.config.vocab import ReferenceVocab

SPECIAL_PATTERN = re.compile(r"^(\[[^\[\]\s]+\]|<[^<>\s]+>)$")
MIN_VOCAB = 100


@dataclass
class TokenizerInfo:
    """A tokenizer under comparison."""

    name: str
    tokenizer: Tokenizer
    style: str
    lowercase: bool
    source: str = ""
    special: set[str] = field(default_factory=set)

    @property
    def unk_id(self) -> int | None:
        for token in ("[UNK]", "<unk>"):
            if token in self.special and self.tokenizer.token_to_id(token) is not None:
                return self.tokenizer.token_to_id(token)
        return None

    @property
    def vocab(self) -> list[str]:
        """All tokens in id order."""
        v = self.tokenizer.get_vocab(with_added_tokens=True)
        return [t for t, _ in sorted(v.items(), key=lambda kv: kv[1])]


def lowercases(tok: Tokenizer) -> bool:
    """Whether the normaliser lower-cases (probed, so any normaliser pipeline is understood)."""
    return tok.normalizer is not None and tok.normalizer.normalize_str("QWERTY Xy") == "qwerty xy"


def strip_marker(token: str) -> str:
    for marker in ("##", "\u2581", "\u0120"):
        if token.startswith(marker):
            return token[len(marker) :]
    return token


def vocab_is_cased(tokens: list[str]) -> bool:
    """A vocabulary is cased when at least 1% of its alphabetic non-special tokens hold an upper-case letter."""
    alpha = [strip_marker(t) for t in tokens if not SPECIAL_PATTERN.match(t)]
    alpha = [t for t in alpha if any(c.isalpha() for c in t)]
    if not alpha:
        return False
    upper = sum(1 for t in alpha if any(c.isupper() for c in t))
    return upper >= 0.01 * len(alpha)


def check_casing(
    tokens: list[str], lowercase: bool, *, what: str, file: str | Path | None = None, field_name: str | None = None
) -> None:
    """Refuse a tokenizer whose lower-casing disagrees with its vocabulary (the SciBERT/BioBERT pitfall)."""
    if not any(c.lower() != c.upper() for t in tokens for c in strip_marker(t)):
        return  # a script without case (e.g. CJK): nothing to check
    cased = vocab_is_cased(tokens)
    if cased and lowercase:
        raise DataError(
            f"{what}: the vocabulary is cased but the tokenizer lower-cases its input, so its "
            f"upper-case tokens can never be produced; set lowercase: false",
            file=file,
            field=field_name,
        )
    if not cased and not lowercase:
        raise DataError(
            f"{what}: the vocabulary is uncased (no upper-case tokens) but the tokenizer keeps case, so "
            f"every capitalised word is fragmented or unknown; set lowercase: true",
            file=file,
            field=field_name,
        )


def token_style(tok: Tokenizer) -> str:
    """``wordpiece``, ``metaspace`` or ``bytelevel``, read from the tokenizer's JSON."""
    data = json.loads(tok.to_str())
    text = json.dumps({k: data.get(k) for k in ("pre_tokenizer", "decoder")})
    if data["model"]["type"] == "WordPiece":
        return "wordpiece"
    if '"ByteLevel"' in text:
        return "bytelevel"
    return "metaspace"


def describe(tok: Tokenizer, name: str, source: str = "", lowercase: bool | None = None) -> TokenizerInfo:
    """A ``TokenizerInfo`` over a copy of ``tok`` with padding and truncation turned off."""
    tok = Tokenizer.from_str(tok.to_str())
    tok.no_padding()
    tok.no_truncation()
    special = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    special |= {t for t in tok.get_vocab(with_added_tokens=True) if SPECIAL_PATTERN.match(t)}
    return TokenizerInfo(
        name=name,
        tokenizer=tok,
        style=token_style(tok),
        lowercase=lowercases(tok) if lowercase is None else lowercase,
        source=source,
        special=special,
    )


def read_wordpiece_vocab(path: Path) -> list[str]:
    """Read and validate a BERT ``vocab.txt`` (one token a line, unique, with ``[UNK]``)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read the vocabulary ({exc})", file=path) from None
    if lines and lines[-1] == "":
        lines.pop()
    seen: dict[str, int] = {}
    for i, token in enumerate(lines, start=1):
        if token == "" or token != token.strip() or any(c.isspace() for c in token):
            raise DataError(f"malformed vocabulary: token {token!r} is empty or holds whitespace", file=path, line=i)
        if token in seen:
            raise DataError(f"malformed vocabulary: {token!r} repeats line {seen[token]}", file=path, line=i)
        seen[token] = i
    if len(lines) < MIN_VOCAB:
        raise DataError(
            f"malformed vocabulary: {len(lines)} tokens (a WordPiece vocab has at least {MIN_VOCAB})", file=path
        )
    if "[UNK]" not in seen:
        raise DataError("malformed vocabulary: no [UNK] token (not a BERT WordPiece vocab.txt?)", file=path)
    return lines


def wordpiece_from_vocab(tokens: list[str], lowercase: bool) -> Tokenizer:
    """BERT's tokenizer around a vocabulary: BERT normaliser and pre-tokeniser, WordPiece with ``##``."""
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(tokens)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    # BERT's special tokens keep their vocab.txt ids; as added tokens they are never split or lower-cased.
    tok.add_special_tokens(
        [AddedToken(t, special=True) for t in tokens if t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
    )
    return tok


def _read_bytelevel(vocab_path: Path, merges_path: Path) -> Tokenizer:
    try:
        vocab = json.loads(vocab_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"malformed byte-level vocabulary ({exc})", file=vocab_path) from None
    if not isinstance(vocab, dict) or len(vocab) < MIN_VOCAB or not all(isinstance(v, int) for v in vocab.values()):
        raise DataError("malformed byte-level vocabulary: expected a JSON object token -> integer id", file=vocab_path)
    if len(set(vocab.values())) != len(vocab):
        raise DataError("malformed byte-level vocabulary: ids repeat", file=vocab_path)
    if not merges_path.is_file():
        raise DataError("merges file of the byte-level vocabulary not found (set 'merges:')", file=merges_path)
    merges = []
    for i, line in enumerate(merges_path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line or line.startswith("#version"):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or parts[0] not in vocab or parts[1] not in vocab or parts[0] + parts[1] not in vocab:
            raise DataError(
                f"malformed merges: {line!r} is not two vocabulary tokens whose join is one", file=merges_path, line=i
            )
        merges.append((parts[0], parts[1]))
    tok = Tokenizer(models.BPE(vocab, merges))
    # RoBERTa's convention: a word alone is encoded as if preceded by a space (its word-initial form).
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    return tok


def load_reference(ref: ReferenceVocab, field_name: str = "vocab.references") -> TokenizerInfo:
    """Load one ``ReferenceVocab`` (see the module docstring for the accepted forms)."""
    if ref.hub is not None:
        return _from_transformers(ref.hub, ref.name, ref.lowercase, field_name)
    if ref.path is None:  # the config's validator asks for exactly one of hub and path
        raise ConfigError(f"reference {ref.name!r} gives neither hub nor path", field=field_name)
    path = Path(ref.path)
    if path.is_dir():
        return _from_transformers(str(path), ref.name, ref.lowercase, field_name)
    if not path.is_file():
        raise DataError("reference vocabulary not found", file=path, field=field_name)
    if path.suffix == ".json":
        merges = Path(ref.merges) if ref.merges else path.with_name(path.name.replace("vocab.json", "merges.txt"))
        tok = _read_bytelevel(path, merges)
        tokens = list(json.loads(path.read_text(encoding="utf-8")))
        lowercase = False if ref.lowercase is None else ref.lowercase
        check_casing(
            [_bytes_surface(t) for t in tokens],
            lowercase,
            what=f"reference {ref.name!r}",
            file=path,
            field_name=field_name,
        )
        return describe(tok, ref.name, source=str(path), lowercase=lowercase)
    tokens = read_wordpiece_vocab(path)
    lowercase = (not vocab_is_cased(tokens)) if ref.lowercase is None else ref.lowercase
    check_casing(tokens, lowercase, what=f"reference {ref.name!r}", file=path, field_name=field_name)
    return describe(wordpiece_from_vocab(tokens, lowercase), ref.name, source=str(path), lowercase=lowercase)


def _bytes_surface(token: str) -> str:
    return decode_bytelevel(token) or ""


def _from_transformers(ref: str, name: str, lowercase: bool | None, field_name: str) -> TokenizerInfo:
    from domainbert.core.models import load_tokenizer

    try:
        hf = load_tokenizer(ref)
    except ModelError as exc:
        raise DataError(f"reference {name!r}: {exc}", field=field_name) from None
    info = describe(hf.backend_tokenizer, name, source=ref)
    if lowercase is not None and lowercase != info.lowercase:
        raise DataError(
            f"reference {name!r}: lowercase: {lowercase} but its tokenizer "
            f"{'lower-cases' if info.lowercase else 'keeps case'}",
            field=field_name,
        )
    check_casing(info.vocab, info.lowercase, what=f"reference {name!r}", file=ref, field_name=field_name)
    return info


def load_base_tokenizer(name_or_path: str, lowercase: bool) -> tuple[PreTrainedTokenizerBase, TokenizerInfo]:
    """The base model's transformers tokenizer and its ``TokenizerInfo``; casing checked against the config."""
    from domainbert.core.models import load_tokenizer

    hf = load_tokenizer(name_or_path)
    info = describe(hf.backend_tokenizer, "base", source=name_or_path)
    if info.lowercase != lowercase:
        raise ModelError(
            f"base_model.lowercase is {lowercase} but the base tokenizer "
            f"{'lower-cases' if info.lowercase else 'keeps case'}",
            field="base_model.lowercase",
        )
    check_casing(
        info.vocab,
        info.lowercase,
        what="base model tokenizer",
        file=name_or_path,
        field_name="base_model.name_or_path",
    )
    return hf, info
