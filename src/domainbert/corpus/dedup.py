"""Corpus-wide deduplication over the per-shard hashes: exact duplicates, then MinHash LSH near-duplicates.

Workers store, per processed shard, a 64-bit exact key per document (hash of its lowercased, whitespace-collapsed text) and a
MinHash signature (``num_perm`` uint32). Here, over all shards and all sources in build order:

* exact: the first document with a key is kept, later ones are removed (``np.unique`` over the keys);
* near: among the exact survivors, documents sharing any LSH band (band count and width from datasketch's
  ``_optimal_param`` for the threshold) become candidate pairs; a pair is confirmed when the signatures
  agree on at least ``threshold`` of their values (estimated Jaccard), which drops LSH false positives;
  confirmed pairs are joined into clusters (scipy connected components) and each cluster keeps its first
  document.

Memory: the exact keys, one band column at a time with its sort order, the eligible index, masks and cluster
labels - about 64 bytes per document at the peak, so 64 MB per million documents; signatures stay in the shard files (memory-mapped, 4 B x num_perm
per document on disk) and only the rows of candidate pairs are read.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from domainbert.corpus.config import DedupConfig
from domainbert.corpus.hashing import band_keys

STATE_BYTES_PER_DOC = 64


@lru_cache(maxsize=16)
def _optimal_param(threshold: float, num_perm: int, fp_weight: float, fn_weight: float) -> tuple[int, int]:
    """datasketch's ``lsh._optimal_param``, the same search and integrals, without importing datasketch
    (whose package import pulls in its asyncio storage layers: a second of a small build)."""
    from scipy.integrate import quad

    best, opt = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = quad(lambda s, b=b, r=r: 1 - (1 - s ** float(r)) ** float(b), 0.0, threshold)[0]
            fn = quad(lambda s, b=b, r=r: 1 - (1 - (1 - s ** float(r)) ** float(b)), threshold, 1.0)[0]
            error = fp * fp_weight + fn * fn_weight
            if error < best:
                best, opt = error, (b, r)
    return opt


def lsh_params(cfg: DedupConfig) -> tuple[int, int]:
    """(bands, rows) minimising false positives + negatives at the threshold (datasketch's choice)."""
    return _optimal_param(cfg.threshold, cfg.num_perm, 0.5, 0.5)


def exact_first_mask(keys: np.ndarray) -> np.ndarray:
    """True for the first occurrence of each key (in order), False for later duplicates."""
    keep = np.zeros(len(keys), dtype=bool)
    if len(keys):
        _, first = np.unique(keys, return_index=True)
        keep[first] = True
    return keep


class SignatureStore:
    """Row access to the signatures of all shards (memory-mapped ``.npy`` files) by global index."""

    def __init__(self, paths: list[Path]) -> None:
        self.maps = [np.load(p, mmap_mode="r") for p in paths]
        self.offsets = np.cumsum([0] + [len(m) for m in self.maps])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def rows(self, index: np.ndarray) -> np.ndarray:
        width = self.maps[0].shape[1] if self.maps else 0
        out = np.empty((len(index), width), dtype=np.uint32)
        shard = np.searchsorted(self.offsets, index, side="right") - 1
        for s in np.unique(shard):
            sel = shard == s
            out[sel] = self.maps[s][index[sel] - self.offsets[s]]
        return out


def near_duplicate_mask(store: SignatureStore, eligible: np.ndarray, cfg: DedupConfig,
                        pair_chunk: int = 200_000) -> tuple[np.ndarray, int]:
    """Keep-mask after near-dedup among ``eligible`` documents, and the number of clusters (size > 1) found."""
    n = len(store)
    keep = eligible.copy()
    bands, rows = lsh_params(cfg)
    idx = np.flatnonzero(eligible)
    if len(idx) < 2:
        return keep, 0
    src_all, dst_all = [], []
    for b in range(bands):
        col = _band_column(store, b, bands, rows)[idx]
        order = np.argsort(col, kind="stable")
        sorted_col = col[order]
        same = sorted_col[1:] == sorted_col[:-1]
        a, c = idx[order[:-1][same]], idx[order[1:][same]]
        for lo in range(0, len(a), pair_chunk):
            pa, pc = a[lo: lo + pair_chunk], c[lo: lo + pair_chunk]
            agree = (store.rows(pa) == store.rows(pc)).mean(axis=1)
            ok = agree >= cfg.threshold
            src_all.append(pa[ok])
            dst_all.append(pc[ok])
    src = np.concatenate(src_all) if src_all else np.zeros(0, np.int64)
    dst = np.concatenate(dst_all) if dst_all else np.zeros(0, np.int64)
    if len(src) == 0:
        return keep, 0
    graph = coo_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    involved = np.unique(np.concatenate([src, dst]))
    lab = labels[involved]
    _, first = np.unique(lab, return_index=True)  # involved is sorted: first index of a label = earliest doc
    keep[involved] = False
    keep[involved[first]] = True
    return keep, len(first)


def _band_column(store: SignatureStore, band: int, bands: int, rows: int, block: int = 50_000) -> np.ndarray:
    """One band's keys for every document, computed block by block from the memory-mapped signatures."""
    out = np.empty(len(store), dtype=np.uint64)
    pos = 0
    for m in store.maps:
        for lo in range(0, len(m), block):
            part = np.asarray(m[lo: lo + block, band * rows: (band + 1) * rows])
            out[pos: pos + len(part)] = band_keys(part, 1, rows)[:, 0] ^ np.uint64(band)
            pos += len(part)
    return out
