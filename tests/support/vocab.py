"""Tiny synthetic text for the vocab tests (a domain corpus with computing terms and a general control) and a
2-layer base model whose vocabulary is trained on the general text. Not a test module."""

from __future__ import annotations

import json
import random
from pathlib import Path

from domainbert.config.domain import load_domain
from domainbert.corpus.store import write_shard

GENERAL = ("the a of and to in is was for on with as by at from that this it be are were an or which his her "
           "their time people year day way man woman child world life hand part place case week house water "
           "small large good new old great little long high young right early big important public bad same "
           "able walk talk give take make know think see come want look use find tell ask work seem feel try "
           "leave call keep").split()
DOMAIN = ("microprocessor immunohistochemistry compiler bytecode tokenizer hypervisor multiprocessing "
          "debugger filesystem kernel").split()


def make_texts(n_docs: int, seed: int, domain_share: float = 0.25, words: int = 14) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        ws = [rng.choice(DOMAIN) if rng.random() < domain_share else rng.choice(GENERAL) for _ in range(words)]
        docs.append(" ".join(ws).capitalize() + ".")
    return docs


def write_corpus(folder: Path, train: list[str], validation: list[str]) -> Path:
    for split, texts in (("train", train), ("validation", validation)):
        write_shard(folder / split / "shard-00000.parquet",
                    [{"id": f"{split}-{i}", "text": t, "source": "test"} for i, t in enumerate(texts)])
    return folder




def write_control(path: Path) -> Path:
    """600 texts without domain words as JSON lines: the general control text."""
    with path.open("w") as f:
        for i, text in enumerate(make_texts(600, 3, domain_share=0.0)):
            f.write(json.dumps({"id": str(i), "text": text}) + "\n")
    return path


def tiny_base(folder: Path) -> Path:
    """A 2-layer, hidden-128 BertForMaskedLM with an uncased WordPiece vocab trained on general text."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from domainbert.vocab.train import to_transformers, train_tokenizer

    tok = train_tokenizer(make_texts(400, 7, domain_share=0.0) + ["micro processor immuno histo chemistry"] * 3,
                          "wordpiece", 200, lowercase=True, min_frequency=1)
    hf = to_transformers(tok, "wordpiece", 128)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=128, pad_token_id=0)
    BertForMaskedLM(config).save_pretrained(str(folder))
    hf.save_pretrained(str(folder))
    (folder / "vocab.txt").write_text("\n".join(t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1]))
                                      + "\n")
    return folder


def stage_cfg(tiny_base, control_file, *extra):
    """The science domain's vocab stage on the tiny base, its vocabulary as the one reference, a tiny curve."""
    return load_domain("science", stage_overrides(tiny_base, control_file, *extra))


def stage_overrides(tiny_base, control_file, *extra):
    refs = f"[{{name: tiny, path: {tiny_base / 'vocab.txt'}}}]"
    return [
        "tokenizer.vocab_size=300", "tokenizer.min_frequency=1", "vocab.curve_sizes=[150, 300]",
        f"vocab.references={refs}", f"base_model.name_or_path={tiny_base}", f"vocab.control_corpus=[{control_file}]",
        "vocab.heldout_documents=10", "vocab.extension.num_tokens=3", "vocab.extension.min_count=2",
        "vocab.published=[{name: Paper, reference: tiny, overlap: 0.42, vocab_size: 31090, corpus_words: 3.17e9}]",
        *extra]
