"""Tiny synthetic text for the vocab tests (a domain corpus with computing terms and a general control)."""

from __future__ import annotations

import random
from pathlib import Path

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


