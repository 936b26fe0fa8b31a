"""Corpus-wide deduplication over the per-shard hashes: exact duplicates, then MinHash LSH near-duplicates.

Workers store, per processed shard, a 64-bit exact key per document (hash of its lowercased, whitespace-collapsed text) and a
MinHash signature (``num_perm`` uint32). Here, over all shards and all sources in build order:

* exact: the first document with a key is kept, later ones are removed (``np.unique`` over the keys);
* near: among the exact survivors, documents sharing any LSH band (band count and width from datasketch's
  ``_optimal_param`` for the threshold) become candidate pairs; a pair is confirmed when the signatures
  agree on at least ``threshold`` of their values (estimated Jaccard), which drops LSH false positives;
  confirmed pairs are joined into clusters (scipy connected components) and each cluster keeps its first
  document.

Memory: the exact keys, every document's band keys (8 B x bands), one band column with its sort order, the
eligible index, masks and cluster labels - ``state_bytes_per_doc(bands)``, about 140 bytes per document at
0.8 / 128 permutations (9 bands), so 140 MB per million documents; signatures stay in the shard files (4 B x
num_perm per document on disk), read one shard at a time, and only the rows of candidate pairs are read back.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from domainbert.config.corpus import DedupConfig
from domainbert.corpus.hashing import band_keys


def state_bytes_per_doc(bands: int) -> int:
    """Peak merge memory per document: band keys, exact key, band column + sort order + eligible index, masks
    and labels (see the module docstring)."""
    return 8 * bands + 8 + 3 * 8 + 2 + 8 + 24


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
    """Row access to the signatures of all shards (``.npy`` files) by global index.

    A shard's file is memory-mapped only while its rows are read and unmapped right after: a mapping kept
    open for the whole merge leaves every page it touched resident, so the merge's memory would grow with the
    corpus (about 0.5 GB per million documents at 128 permutations).
    """

    def __init__(self, paths: list[Path]) -> None:
        self.paths = list(paths)
        shapes = [np.load(p, mmap_mode="r").shape for p in self.paths]  # reads the headers only
        self.width = shapes[0][1] if shapes else 0
        self.offsets = np.cumsum([0] + [shape[0] for shape in shapes])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def shard(self, s: int) -> np.ndarray:
        """All signatures of shard ``s`` (read into memory)."""
        return np.load(self.paths[s])

    def rows(self, index: np.ndarray) -> np.ndarray:
        out = np.empty((len(index), self.width), dtype=np.uint32)
        shard = np.searchsorted(self.offsets, index, side="right") - 1
        for s in np.unique(shard):
            sel = shard == s
            mapped = np.load(self.paths[s], mmap_mode="r")
            out[sel] = mapped[index[sel] - self.offsets[s]]
            del mapped  # unmapped here: its pages stop counting against this process
        return out


def near_duplicate_mask(
    store: SignatureStore, eligible: np.ndarray, cfg: DedupConfig, pair_chunk: int = 200_000
) -> tuple[np.ndarray, int]:
    """Keep-mask after near-dedup among ``eligible`` documents, and the number of clusters (size > 1) found."""
    n = len(store)
    keep = eligible.copy()
    bands, rows = lsh_params(cfg)
    idx = np.flatnonzero(eligible)
    if len(idx) < 2:
        return keep, 0
    all_bands = _band_keys(store, bands, rows)
    src_all, dst_all = [], []
    for b in range(bands):
        col = all_bands[idx, b]
        order = np.argsort(col, kind="stable")
        sorted_col = col[order]
        same = sorted_col[1:] == sorted_col[:-1]
        a, c = idx[order[:-1][same]], idx[order[1:][same]]
        for lo in range(0, len(a), pair_chunk):
            pa, pc = a[lo : lo + pair_chunk], c[lo : lo + pair_chunk]
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


def _band_keys(store: SignatureStore, bands: int, rows: int) -> np.ndarray:
    """Every document's LSH band keys ``[n, bands]``, reading each shard's signatures once."""
    out = np.empty((len(store), bands), dtype=np.uint64)
    for s in range(len(store.paths)):
        out[store.offsets[s] : store.offsets[s + 1]] = band_keys(store.shard(s), bands, rows)
    return out
