"""Training a domain tokenizer on streamed text and saving it as a Hugging Face tokenizer folder.

Three kinds, all built with the ``tokenizers`` library so that training streams and the saved folder carries
offsets and word ids (the pretraining stage masks whole words from ``word_ids``):

- ``wordpiece``: BERT-compatible. BERT's normaliser (lower-casing and accent stripping when uncased) and
  pre-tokeniser, ``##`` continuation pieces, BERT's special tokens ``[PAD]`` (id 0), ``[UNK]``, ``[CLS]``,
  ``[SEP]``, ``[MASK]`` and the ``[CLS] A [SEP] B [SEP]`` template with token type ids.
- ``sentencepiece_unigram`` / ``sentencepiece_bpe``: SentencePiece-style (XLM-T / XLM-R): NFKC (+ lower-casing
  when configured), ``\u2581`` word-initial marker (Metaspace), XLM-R's special tokens ``<pad>`` (id 0, as
  BERT's pad), ``<unk>``, ``<s>`` (CLS), ``</s>`` (SEP), ``<mask>``, and BERT's template with ``<s>``/``</s>``.

A WordPiece vocabulary is a prefix of the merge order, so the vocabulary of any smaller size is the first
``size`` ids of a larger one (``truncate_wordpiece``; the same set as training at that size, checked in the
tests). The vocab-size curve uses this to train once. This module does not read corpora or compare vocabularies.
"""

from __future__ import annotations

import json
import logging
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from domainbert.config.vocab import TokenizerConfig
from domainbert.core.errors import DataError
from domainbert.core.tokenizer_files import make_portable

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

log = logging.getLogger(__name__)

WORDPIECE_SPECIALS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
SENTENCEPIECE_SPECIALS = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "cls_token": "<s>",
    "sep_token": "</s>",
    "mask_token": "<mask>",
}
METASPACE = "\u2581"


def special_tokens(kind: str) -> dict[str, str]:
    """The special tokens of a tokenizer kind, by role (``pad_token``, ``cls_token``, ...)."""
    return dict(WORDPIECE_SPECIALS if kind == "wordpiece" else SENTENCEPIECE_SPECIALS)


def _special_list(kind: str) -> list[str]:
    s = special_tokens(kind)
    # Order fixes the ids: pad=0 as in BERT (BertConfig.pad_token_id defaults to 0).
    return [s["pad_token"], s["unk_token"], s["cls_token"], s["sep_token"], s["mask_token"]]


@dataclass
class TextStats:
    """What a training pass streamed through (filled while the iterator is consumed)."""

    documents: int = 0
    words: int = 0
    bytes: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def counting(texts: Iterable[str], stats: TextStats) -> Iterator[str]:
    """Yield ``texts`` unchanged while counting documents, whitespace words and UTF-8 bytes into ``stats``."""
    for text in texts:
        stats.documents += 1
        stats.words += len(text.split())
        stats.bytes += len(text.encode("utf-8"))
        yield text


def empty_tokenizer(kind: str, lowercase: bool) -> Tokenizer:
    """An untrained tokenizer of ``kind`` with its normaliser and pre-tokeniser set."""
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        # strip_accents=None follows lowercase, exactly as BERT uncased (strip) / cased (keep) do.
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        return tok
    model = models.Unigram() if kind == "sentencepiece_unigram" else models.BPE(unk_token="<unk>")
    tok = Tokenizer(model)
    steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always")
    return tok


def _trainer(kind: str, vocab_size: int, min_frequency: int, seeded: Sequence[str] = ()) -> trainers.Trainer:
    specials = _special_list(kind) + list(seeded)
    if kind == "wordpiece":
        return trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=specials,
            continuing_subword_prefix="##",
            show_progress=False,
        )
    if kind == "sentencepiece_unigram":
        return trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=specials, unk_token="<unk>", max_piece_length=16, show_progress=False
        )
    return trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials, show_progress=False
    )


def train_tokenizer(
    texts: Iterable[str] | Callable[[], Iterable[str]],
    kind: str,
    vocab_size: int,
    lowercase: bool,
    min_frequency: int = 2,
    stats: TextStats | None = None,
) -> Tokenizer:
    """Train a tokenizer of ``kind`` on streamed ``texts``; the same text always gives the same file.

    Args:
        texts: the training text: a callable returning a fresh iterable (a generator is fine), or a list.
            WordPiece reads it twice (see ``continuing_pieces``), the other kinds once.
        kind: ``wordpiece``, ``sentencepiece_unigram`` or ``sentencepiece_bpe``.
        vocab_size: requested size, special tokens included (the trainer may stop short on little text).
        lowercase: lower-case in the normaliser (and strip accents, for WordPiece).
        min_frequency: pairs seen fewer times are not merged (WordPiece, BPE).
        stats: filled with the documents, words and bytes streamed and the training seconds.

    Returns:
        The trained ``tokenizers.Tokenizer`` with its post-processor and decoder set.

    Raises:
        DataError: when the text is empty.
    """
    stats = stats if stats is not None else TextStats()
    make = texts if callable(texts) else lambda: texts
    tok = empty_tokenizer(kind, lowercase)
    start = time.perf_counter()
    if kind == "sentencepiece_unigram":
        tok = _train_spm_unigram(tok, counting(make(), stats), vocab_size)
    elif kind == "wordpiece":
        seeded = continuing_pieces(make(), lowercase)
        tok.train_from_iterator(counting(make(), stats), _trainer(kind, vocab_size, min_frequency, seeded))
        tok = _without_added(tok, set(seeded))
    else:
        tok.train_from_iterator(counting(make(), stats), _trainer(kind, vocab_size, min_frequency))
    stats.seconds = time.perf_counter() - start
    if stats.documents == 0 or stats.words == 0:
        raise DataError("the training text is empty: no documents to train a tokenizer on")
    finish(tok, kind)
    log.info(
        "trained %s tokenizer: %d tokens from %d documents (%.1f MB) in %.1fs",
        kind,
        tok.get_vocab_size(),
        stats.documents,
        stats.bytes / 1e6,
        stats.seconds,
    )
    return tok


def continuing_pieces(texts: Iterable[str], lowercase: bool) -> list[str]:
    """The one-character ``##`` pieces WordPiece training can create on ``texts``, sorted.

    ``tokenizers``' trainer numbers these pieces in the iteration order of a hash map, and breaks ties between
    equally frequent merges by id, so two trainings on the same text can give different vocabularies
    (huggingface/tokenizers#1794). Passed to the trainer as leading special tokens in sorted order, they get
    fixed ids and training is deterministic. A piece exists for every character that follows another inside a
    word; this pass collects the text's distinct characters (a set update per text, no tokenising) and keeps
    those BERT's normaliser and pre-tokeniser leave inside words: not whitespace, punctuation or a CJK
    character (which the normaliser pads with spaces). That is a superset: a character seen only at the start
    of words (``£``, ``→``) also gets an (unused) piece, a handful on a real corpus.
    """
    chars: set[str] = set()
    for text in texts:
        chars.update(text)
    normalizer = empty_tokenizer("wordpiece", lowercase).normalizer
    pieces: set[str] = set()
    for char in chars:
        normalized = normalizer.normalize_str(char)
        if any(c.isspace() for c in normalized):  # whitespace, or a CJK character split off as its own word
            continue
        pieces.update(f"##{c}" for c in normalized if not _bert_punctuation(c))
    return sorted(pieces)


def _bert_punctuation(char: str) -> bool:
    """BERT's pre-tokeniser splits these off as words of their own: ASCII non-alphanumerics and Unicode P*."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _without_added(tok: Tokenizer, pieces: set[str]) -> Tokenizer:
    """``tok`` with ``pieces`` kept in the model's vocabulary but no longer registered as added tokens."""
    data = json.loads(tok.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in pieces]
    return Tokenizer.from_str(json.dumps(data))


def _train_spm_unigram(empty: Tokenizer, texts: Iterator[str], vocab_size: int) -> Tokenizer:
    """Unigram training with the ``sentencepiece`` library (several times faster than ``tokenizers``' trainer);
    its pieces and scores become a ``tokenizers`` Unigram model behind ``empty``'s normaliser and Metaspace.

    The text is normalised by ``empty``'s normaliser before sentencepiece sees it (sentencepiece's own rule is
    ``identity``), so training and encoding normalise alike.
    """
    import io

    import sentencepiece as spm

    norm = empty.normalizer.normalize_str
    specials = _special_list("sentencepiece_unigram")  # <pad> <unk> <s> </s> <mask> -> ids 0..4
    seen = []

    def sentences() -> Iterator[str]:
        for text in texts:
            seen.append(1)
            text = norm(text).strip()
            if text:
                yield text

    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences(),
            model_writer=model,
            model_type="unigram",
            vocab_size=vocab_size,
            normalization_rule_name="identity",
            character_coverage=0.9995,
            max_sentence_length=1 << 16,
            pad_id=0,
            unk_id=1,
            bos_id=2,
            eos_id=3,
            pad_piece=specials[0],
            unk_piece=specials[1],
            bos_piece=specials[2],
            eos_piece=specials[3],
            control_symbols=[specials[4]],
            hard_vocab_limit=False,
            minloglevel=2,
            num_threads=2,
        )
    except RuntimeError as exc:
        if not seen:
            raise DataError("the training text is empty: no documents to train a tokenizer on") from None
        raise DataError(
            f"sentencepiece could not train a {vocab_size}-token vocabulary: {exc}", field="tokenizer.vocab_size"
        ) from None
    proto = spm.SentencePieceProcessor(model_proto=model.getvalue())
    vocab = [(proto.id_to_piece(i), proto.get_score(i)) for i in range(proto.get_piece_size())]
    tok = Tokenizer(models.Unigram(vocab, unk_id=1, byte_fallback=False))
    tok.normalizer = empty.normalizer
    tok.pre_tokenizer = empty.pre_tokenizer
    tok.add_special_tokens([AddedToken(t, special=True) for t in specials])
    return tok


def finish(tok: Tokenizer, kind: str) -> Tokenizer:
    """Set BERT's ``CLS A SEP (B SEP)`` template (type ids 0/1) and the decoder of ``kind``."""
    s = special_tokens(kind)
    cls, sep = s["cls_token"], s["sep_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))],
    )
    tok.decoder = (
        decoders.WordPiece(prefix="##")
        if kind == "wordpiece"
        else decoders.Metaspace(replacement=METASPACE, prepend_scheme="always")
    )
    return tok


def ordered_vocab(tok: Tokenizer) -> list[str]:
    """The model's tokens in id order (added tokens included when they hold model ids)."""
    vocab = tok.get_vocab(with_added_tokens=True)
    return [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]


def truncate_wordpiece(tok: Tokenizer, size: int) -> Tokenizer:
    """The WordPiece tokenizer of the first ``size`` ids: what training at ``size`` gives (same token set)."""
    data = json.loads(tok.to_str())
    if data["model"]["type"] != "WordPiece":
        raise ValueError("only a WordPiece vocabulary can be truncated to a smaller size")
    data["model"]["vocab"] = {t: i for t, i in data["model"]["vocab"].items() if i < size}
    return Tokenizer.from_str(json.dumps(data))


def to_transformers(tok: Tokenizer, kind: str, model_max_length: int = 512) -> PreTrainedTokenizerFast:
    """Wrap a trained tokenizer as a transformers fast tokenizer with its special tokens named."""
    from transformers import PreTrainedTokenizerFast

    # token_type_ids as BERT's own tokenizer returns them (segment B of a pair gets 1)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        model_max_length=model_max_length,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        **special_tokens(kind),
    )


def save_tokenizer(tok: Tokenizer, cfg: TokenizerConfig, folder: Path) -> Path:
    """Save ``tok`` as a Hugging Face tokenizer folder that ``AutoTokenizer.from_pretrained`` loads as is."""
    hf = to_transformers(tok, cfg.kind, cfg.model_max_length)
    folder.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(folder))
    make_portable(folder)
    return folder


def check_trained_size(tok: Tokenizer, requested: int, what: str) -> None:
    """A trainer that stopped far short of the requested size means the corpus is too small for it."""
    got = tok.get_vocab_size()
    if got < 0.9 * requested:
        raise DataError(
            f"{what}: the corpus supports only {got} tokens of the {requested} requested "
            f"(too little text for this vocabulary size; lower tokenizer.vocab_size or add text)",
            field="tokenizer.vocab_size",
        )
