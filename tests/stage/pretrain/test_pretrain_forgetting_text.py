"""The general-English task's glosses are in no general text a pretraining stream reads (warm-up, control,
replay) nor in the task text (TAPT), as the leak audit checks; with the task off the general text is whole."""

from __future__ import annotations

from domainbert.config.domain import load_domain
from domainbert.corpus.audit import LeakAudit
from domainbert.pretrain import warmup_training
from domainbert.pretrain.base_warmup import warmup_corpus
from domainbert.pretrain.data import read_jsonl_texts
from domainbert.pretrain.forgetting_text import forgetting_texts, general_corpus_texts
from domainbert.pretrain.general_text import shuffled_general_texts
from domainbert.pretrain.task_text import task_documents

GENERAL = "general-lexname"


def _verbatim_hits(cfg, texts: list[str]) -> dict[str, int]:
    dc = cfg.corpus.decontamination
    audit = LeakAudit(forgetting_texts(cfg), ngram=dc.ngram, min_words=dc.min_words)
    audit.add([str(i) for i in range(len(texts))], texts)
    return {owner: r["verbatim"] for owner, r in audit.result().items() if r["verbatim"]}


def test_no_stream_reads_the_general_task(monkeypatch):
    cfg = load_domain("science", ["finetune.forgetting_task.enabled=true"])
    files = warmup_corpus(cfg)
    whole = read_jsonl_texts(files, cfg.pretrain.base_warmup.max_documents)
    # the task was drawn from these glosses: the audit finds its train split in the unfiltered text
    assert _verbatim_hits(cfg, whole).get(f"{GENERAL}/train", 0) > 0
    kept = general_corpus_texts(cfg, files)
    assert _verbatim_hits(cfg, kept) == {}
    assert len(whole) - 1300 < len(kept) < len(whole)  # at most the task's glosses and the few holding one
    # the control's and the replay's text start from it; so does the warm-up's
    assert sorted(shuffled_general_texts(cfg, files)) == sorted(kept)
    seen: list[list[str]] = []
    monkeypatch.setattr(warmup_training, "pack_texts", lambda tok, texts, n: seen.append(texts) or object())
    warmup_training.warmup_data(cfg, None, files)
    assert sorted(seen[0]) == sorted(kept)
    # TAPT pretrains on the domain tasks' training text only
    docs, counts = task_documents(cfg)
    assert GENERAL not in counts and all(d["source"] != GENERAL for d in docs)


def test_with_the_task_off_the_general_text_is_whole():
    cfg = load_domain("science", ["finetune.forgetting_task.enabled=false"])
    files = warmup_corpus(cfg)
    assert forgetting_texts(cfg) == {}
    assert general_corpus_texts(cfg, files) == read_jsonl_texts(files, cfg.pretrain.base_warmup.max_documents)
