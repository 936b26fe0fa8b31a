"""Builders for the pretraining tests: a corpus of FOLDOC entries, a WordPiece BERT (2 layers, hidden 128),
a SentencePiece-unigram tokenizer and a tiny domain config, all real and built on the fly."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from domainbert.config.domain import load_domain
from domainbert.core.paths import project_root
from domainbert.corpus.store import write_shard

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# a base warm-up small enough for a test: 400 documents, batches of 4 x 32 tokens
SMALL_WARMUP = (
    "pretrain.base_warmup.max_documents=400", "pretrain.base_warmup.batch_size=4", "pretrain.base_warmup.seq_len=32"
)


def foldoc_texts(n: int) -> list[str]:
    texts = []
    with gzip.open(project_root() / "corpora/science/foldoc.jsonl.gz", "rt") as f:
        for line in f:
            texts.append(json.loads(line)["text"][:600])
            if len(texts) >= n:
                break
    return texts


def write_corpus(folder: Path, texts: list[str], n_val: int = 20) -> Path:
    recs = [{"id": str(i), "text": t, "source": "foldoc", "meta": {}} for i, t in enumerate(texts)]
    write_shard(folder / "train" / "shard-00000.parquet", recs[n_val:], row_group_size=50)
    write_shard(folder / "validation" / "shard-00000.parquet", recs[:n_val])
    return folder


def wordpiece_tokenizer(texts: list[str], vocab_size: int = 600, lowercase: bool = True):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def unigram_tokenizer(texts: list[str], vocab_size: int = 400):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(texts, trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                                           unk_token="[UNK]"))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def tiny_bert(tokenizer, folder: Path) -> Path:
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id)
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_cfg(base: Path, *overrides: str, domain: str = "science"):
    """The shipped domain YAML with a tiny model and budget."""
    return load_domain(domain, overrides=[
        "pretrain.arms=[continued, extended, scratch]", f"base_model.name_or_path={base}", "pretrain.seq_len=32", "pretrain.batch_size=4",
        "pretrain.budget_tokens=1024", "pretrain.eval_documents=10", "pretrain.log_every=2",
        "pretrain.checkpoint_every=4", "pretrain.scratch_size=base_config", *overrides])


# Every precision an exactness test runs: auto would be bf16 on a CPU with AVX512-BF16 or AMX and fp32
# elsewhere, so a test left on auto checks a different computation on each machine.
PRECISIONS = ["fp32", "bf16"]


def exact_cfg(base: Path, precision: str, *overrides: str):
    """``make_cfg`` for a test that holds a training process's numbers equal to an in-process reference's.

    Both sides read the thread count and the precision from this config: the trainer applies
    ``pretrain.torch_threads`` over ``OMP_NUM_THREADS`` and ``torch.set_num_threads``, so without it a worker
    started with one thread is compared with a reference on every core, and the sums round differently.
    """
    return make_cfg(base, "pretrain.torch_threads=1", f"pretrain.precision={precision}", *overrides)


def hf_zero_config(stage: int, offload: bool = False) -> dict:
    """A DeepSpeed config as the Hugging Face DeepSpeed guide writes it for the Trainer: "auto" wherever the
    Trainer fills a value (its ZeRO-2 and ZeRO-3 examples)."""
    zero: dict = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True, "reduce_bucket_size": "auto"}
    if stage == 2:
        zero.update({"allgather_partitions": True, "allgather_bucket_size": 2e8, "reduce_scatter": True})
    else:
        zero.update({"sub_group_size": 1e9, "stage3_prefetch_bucket_size": "auto",
                     "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
                     "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": True})
    if offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        if stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {
        "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
                 "hysteresis": 2, "min_loss_scale": 1},
        "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                  "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                          "warmup_num_steps": "auto", "total_num_steps": "auto"}},
        "zero_optimization": zero,
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "steps_per_print": 2000,
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "wall_clock_breakdown": False,
    }
