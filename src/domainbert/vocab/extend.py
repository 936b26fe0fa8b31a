"""Vocabulary extension: add frequent, badly fragmented domain words to the base tokenizer and model.

Selection: candidate words are the train split's words under the base tokenizer's normaliser (lower-cased for
an uncased base), seen at least ``min_count`` times, holding a letter, not already a token, and cut by the
base tokenizer into 2+ pieces none of which is UNK; they are ranked by ``count x (pieces - 1)`` (the tokens the
word costs beyond one). The vocab stage adds the ones the recommendation counts, or the top
``vocab.extension.num_tokens`` when the config sets it.

How the tokens are added (the choice matters: transformers' "added tokens" are matched in the raw text before
the model runs, so ``token`` would also fire inside ``tokens`` unless ``single_word`` is set, and they bypass
the model's own segmentation):

- WordPiece base (BERT): each word goes **into the WordPiece vocabulary itself** as a word-initial entry with
  the next free id. Greedy longest-match-first then produces it as one piece exactly where the word (or a
  word starting with it, followed by ``##`` pieces) occurs, after the same normalisation as every other word.
- Unigram base (XLM-R): ``\u2581word`` joins the Unigram vocabulary with the highest existing score, so the
  Viterbi segmentation always prefers it for that word.
- any other model (byte-level BPE): ``AddedToken(word, single_word=True, normalized=True)``, matched only as a
  whole word of the normalised text.

Initialisation (``vocab.init``):

- ``mean_of_pieces`` (AdaLM, the default): each new embedding row is the mean of the base embeddings of the
  pieces the base tokenizer cut the word into; the MLM decoder is tied to the embeddings so its rows follow,
  and its bias gets the mean of the pieces' biases.
- ``random``: each new row is drawn as the model's own initializer draws an embedding, normal with mean 0 and
  standard deviation ``initializer_range``, from a generator seeded with ``RANDOM_SEED`` (so the warmed base,
  re-extended in ``pretrain.start``, gets the same rows). An untied decoder's new rows are drawn the same way,
  and the decoder bias of a new token is zero, as the model's initializer sets a new decoder's bias: the mean
  of the pieces' biases would hand the random row a prior learnt for other tokens.

FOCUS is not among the choices (docs/pipeline.md says why). The result is saved as a model + tokenizer
folder the pretraining stage loads with ``load_mlm_model`` / ``load_tokenizer``; ``extension.json`` names a
non-default init. This module does not decide whether to extend.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import AddedToken, Tokenizer

from domainbert.core.models import embedding_rows, input_embeddings
from domainbert.core.tokenizer_files import make_portable
from domainbert.vocab.fertility import normalized_counts, pieces
from domainbert.vocab.reference_vocabs import TokenizerInfo
from domainbert.vocab.train import METASPACE

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)
DEFAULT_INIT = "mean_of_pieces"
RANDOM_SEED = 0  # the generator of random new rows: the vocab stage and the warmed re-extension draw alike


def extension_candidates(word_counts: Counter, base: TokenizerInfo, min_count: int) -> list[dict]:
    """All candidate words, best first: ``{"word", "count", "pieces", "score"}`` (see the module docstring)."""
    counts = normalized_counts(word_counts, base.tokenizer)
    vocab = base.tokenizer.get_vocab(with_added_tokens=True)
    words = sorted(
        w
        for w, n in counts.items()
        if n >= min_count
        and len(w) >= 2
        and any(c.isalpha() for c in w)
        and w not in vocab
        and METASPACE + w not in vocab
    )
    unk = base.unk_id
    unk_token = base.tokenizer.id_to_token(unk) if unk is not None else None
    out = []
    for word, ps in zip(words, pieces(base, words), strict=True):
        if len(ps) < 2 or (unk_token is not None and unk_token in ps):
            continue
        out.append({"word": word, "count": counts[word], "pieces": ps, "score": counts[word] * (len(ps) - 1)})
    out.sort(key=lambda c: (-c["score"], c["word"]))
    return out


def extend_tokenizer(base: TokenizerInfo, words: list[str]) -> tuple[Tokenizer, str]:
    """The base tokenizer with ``words`` added (see the module docstring); returns it and the method used."""
    data = json.loads(base.tokenizer.to_str())
    model = data["model"]
    ids = [t["id"] for t in data.get("added_tokens", [])]
    if model["type"] == "WordPiece":
        next_id = max(list(model["vocab"].values()) + ids) + 1
        for i, w in enumerate(words):
            model["vocab"][w] = next_id + i
        return Tokenizer.from_str(json.dumps(data)), "wordpiece_vocab"
    if model["type"] == "Unigram" and max(ids + [0]) < len(model["vocab"]):
        top = max(score for _, score in model["vocab"])
        model["vocab"].extend([[METASPACE + w, top] for w in words])
        return Tokenizer.from_str(json.dumps(data)), "unigram_vocab"
    tok = Tokenizer.from_str(base.tokenizer.to_str())
    tok.add_tokens([AddedToken(w, single_word=True, normalized=True) for w in words])
    return tok, "added_tokens_single_word"


def extend_model(
    model: PreTrainedModel, new_ids: list[int], piece_ids: list[list[int]], init: str = DEFAULT_INIT
) -> PreTrainedModel:
    """Resize ``model``'s embeddings and set each new row by ``init`` (see the module docstring)."""
    import torch

    size = max(embedding_rows(model), max(new_ids, default=-1) + 1)
    model.resize_token_embeddings(size, mean_resizing=False)
    emb = input_embeddings(model)
    out = model.get_output_embeddings()
    untied = out is not None and out.weight is not emb.weight and out.weight.shape == emb.weight.shape
    bias = getattr(out, "bias", None) if out is not None else None
    bias = bias if bias is not None and bias.shape[0] == size else None
    gen = torch.Generator().manual_seed(RANDOM_SEED)
    std = float(getattr(model.config, "initializer_range", 0.02))

    def drawn(weight: torch.Tensor) -> torch.Tensor:
        return torch.normal(0.0, std, size=(weight.shape[1],), generator=gen).to(weight.dtype)

    with torch.no_grad():
        for tid, pids in zip(new_ids, piece_ids, strict=True):
            if init == "random":
                emb.weight[tid] = drawn(emb.weight)
                if untied and out is not None:
                    out.weight[tid] = drawn(out.weight)
                if bias is not None:
                    bias[tid] = 0.0
                continue
            emb.weight[tid] = emb.weight[pids].mean(dim=0)
            if untied and out is not None:
                out.weight[tid] = out.weight[pids].mean(dim=0)
            if bias is not None:
                bias[tid] = bias[pids].mean()
    return model


def build_extended_model(
    base_ref: str,
    base_hf: PreTrainedTokenizerBase,
    base: TokenizerInfo,
    chosen: list[dict],
    folder: Path,
    decision: dict | None = None,
    init: str = DEFAULT_INIT,
) -> dict:
    """Write the extended model + tokenizer to ``folder``; returns a summary of what was added.

    Args:
        base_ref: the base model reference (``package:...``, a folder or a hub id).
        base_hf: the base transformers tokenizer (its special tokens and length limit are kept).
        base: the base ``TokenizerInfo``.
        chosen: the selected candidates (``extension_candidates`` rows); none gives the base model unchanged.
        folder: the output folder (created).
        decision: how the number was chosen (``source``: recommendation or override, ``recommended_tokens``),
            kept in ``extension.json`` so the pretraining model card can state it.
        init: ``vocab.init``, how the new rows start; a non-default one is kept in ``extension.json``.
    """
    import torch
    from transformers import PreTrainedTokenizerFast

    from domainbert.core.models import load_mlm_model

    words = [c["word"] for c in chosen]
    tok, method = extend_tokenizer(base, words)
    new_ids = [_id_of(tok, w if method != "unigram_vocab" else METASPACE + w) for w in words]
    piece_ids = [[_id_of(base.tokenizer, p) for p in c["pieces"]] for c in chosen]
    # A base without its MLM head gets a new one at loading, drawn from torch's generator: seeded, so a rebuilt
    # vocabulary stage writes the same extended model (and the extended arm keeps its fingerprint).
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        base_model = load_mlm_model(base_ref)
    model = extend_model(base_model, new_ids, piece_ids, init)
    specials = {k: v for k, v in base_hf.special_tokens_map.items() if isinstance(v, str)}
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        model_max_length=min(base_hf.model_max_length, 10**6),
        model_input_names=list(base_hf.model_input_names),
        **specials,
    )
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    hf.save_pretrained(str(folder))
    make_portable(folder)
    summary = {
        "method": method,
        "num_tokens": len(words),
        **(decision or {}),
        # only a non-default init is written, so the folders of mean-of-pieces runs keep their content hash
        **({"init": init} if init != DEFAULT_INIT else {}),
        "vocab_size": model.get_input_embeddings().num_embeddings,
        "tokens": [
            {"word": c["word"], "id": i, "count": c["count"], "base_pieces": c["pieces"]}
            for c, i in zip(chosen, new_ids, strict=True)
        ],
    }
    (folder / "extension.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    log.info("extended %s by %d tokens (%s) -> %s", base_ref, len(words), method, folder)
    return summary


def _id_of(tok: Tokenizer, token: str) -> int:
    """The id of a token ``tok`` has: the words were just added and the pieces come from the base tokenizer's
    own encoding, so every token has one (``token_to_id`` says None only for a token out of the vocabulary)."""
    tid = tok.token_to_id(token)
    if tid is None:
        raise RuntimeError(f"token {token!r} is not in the tokenizer's vocabulary")
    return tid
