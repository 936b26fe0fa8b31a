"""Domain YAMLs: every shipped file validates in every profile; mistakes are named precisely."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from domainbert.config.domain import DomainConfig, apply_override, deep_merge, load_domain
from domainbert.core.errors import ConfigError
from domainbert.core.paths import available_domains, domains_dir

DOMAIN_FILES = sorted(domains_dir().glob("*.yaml"))


def test_the_four_domains_ship():
    assert {"science", "economics", "law", "tweets"} <= set(available_domains())


@pytest.mark.parametrize("path", DOMAIN_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("profile", ["offline", "full"])
def test_every_domain_file_validates(path: Path, profile: str):
    cfg = load_domain(path, profile=profile)
    assert isinstance(cfg, DomainConfig)
    assert cfg.name == path.stem
    assert cfg.profile == profile


@pytest.mark.parametrize("path", DOMAIN_FILES, ids=lambda p: p.stem)
def test_offline_profile_uses_only_shipped_files(path: Path):
    cfg = load_domain(path, profile="offline")
    for source in cfg.corpus.sources:
        assert source.type == "local", f"{path.name}: offline source {source.name} is not local"
        for pattern in source.paths:
            assert list(Path(pattern).parent.glob(Path(pattern).name)), pattern
    for task in cfg.finetune.tasks:
        assert Path(task.path).is_dir(), task.path
    assert cfg.base_model.name_or_path.startswith("package:")


def test_relative_paths_resolve_against_the_yaml_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a different cwd must not matter
    cfg = load_domain("science")
    assert Path(cfg.corpus.sources[0].paths[0]).is_file()
    assert Path(cfg.corpus.sources[0].paths[0]).is_absolute()


def _write_domain(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load((domains_dir() / "science.yaml").read_text())
    mutate(data)
    out = tmp_path / "domains" / "mine.yaml"
    out.parent.mkdir()
    # keep relative paths working from the new location
    text = yaml.safe_dump(data).replace("../corpora/", str(domains_dir().parent / "corpora") + "/")
    out.write_text(text)
    return out


def test_misspelt_key_names_file_and_field(tmp_path):
    path = _write_domain(tmp_path, lambda d: d["pretrain"].update({"seq_lenn": 64}))
    with pytest.raises(ConfigError) as err:
        load_domain(path)
    message = str(err.value)
    assert str(path) in message
    assert "pretrain.seq_lenn" in message
    assert "unknown key" in message


def test_missing_required_field_is_named(tmp_path):
    path = _write_domain(tmp_path, lambda d: d["tokenizer"].pop("kind"))
    with pytest.raises(ConfigError, match=r"tokenizer\.kind: required field is missing"):
        load_domain(path)


def test_wrong_type_is_named(tmp_path):
    path = _write_domain(tmp_path, lambda d: d["pretrain"].update({"seq_len": "long"}))
    with pytest.raises(ConfigError, match=r"pretrain\.seq_len"):
        load_domain(path)


def test_unknown_domain_lists_known_ones():
    with pytest.raises(ConfigError, match=r"unknown domain 'astrology'.*science"):
        load_domain("astrology")


def test_unknown_profile_is_named():
    with pytest.raises(ConfigError, match=r"unknown profile 'cloud'"):
        load_domain("science", profile="cloud")


def test_invalid_yaml_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ncorpus: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+"):
        load_domain(path)


def test_overrides_apply_and_are_validated():
    cfg = load_domain("science", ["pretrain.max_steps=50", "finetune.seeds=[7, 8]"])
    assert cfg.pretrain.max_steps == 50
    assert cfg.finetune.seeds == [7, 8]
    with pytest.raises(ConfigError, match=r"pretrain\.max_stpes: unknown key.*overrides"):
        load_domain("science", ["pretrain.max_stpes=50"])
    with pytest.raises(ConfigError, match="key.path=value"):
        load_domain("science", ["pretrain.max_steps"])


def test_profile_patch_replaces_lists_and_merges_mappings():
    merged = deep_merge({"a": {"x": 1, "y": [1, 2]}, "b": 1}, {"a": {"y": [3]}, "c": 2})
    assert merged == {"a": {"x": 1, "y": [3]}, "b": 1, "c": 2}
    assert apply_override({"a": {"b": 1}}, "a.c=true") == {"a": {"b": 1, "c": True}}


def test_full_profile_points_at_real_data():
    cfg = load_domain("science", profile="full")
    assert any(s.type == "hf" for s in cfg.corpus.sources)
    assert not cfg.base_model.name_or_path.startswith("package:")


def test_a_hub_task_id_stays_an_id_while_task_folders_resolve_against_the_domain_file(tmp_path):
    import json

    from domainbert.cards.finetuned_and_corpus import dataset_ids

    saved = tmp_path / "saved-dataset"
    saved.mkdir()
    tasks = [{"name": "hub", "type": "classification", "format": "hf", "path": "org/set", "labels": ["a"]},
             {"name": "disk", "type": "classification", "format": "hf", "path": str(saved), "labels": ["a"]},
             {"name": "files", "type": "classification", "format": "jsonl", "path": "../corpora/x", "labels": ["a"]}]
    cfg = load_domain("science", ["finetune.tasks=" + json.dumps(tasks)])
    paths = [t.path for t in cfg.finetune.tasks]
    assert paths[0] == "org/set" and paths[1] == str(saved)
    assert paths[2] == str((domains_dir() / ".." / "corpora" / "x").resolve())
    assert "org/set" in dataset_ids(cfg) and str(saved) not in dataset_ids(cfg)


def test_only_tasks_keeps_the_named_tasks_and_rejects_unknown_names():
    both = load_domain("science")
    assert [t.name for t in both.finetune.tasks] == ["science-terms-ner", "science-subject"]
    one = load_domain("science", ["finetune.only_tasks=[science-subject]"])
    assert [t.name for t in one.finetune.tasks] == ["science-subject"]
    assert one.finetune.tasks[0].max_train_examples == 250  # the profile's settings, not the top level's
    with pytest.raises(ConfigError, match=r"only_tasks names \['sci-subject'\]"):
        load_domain("science", ["finetune.only_tasks=[sci-subject]"])


def test_only_models_must_name_a_model_the_run_compares():
    cfg = load_domain("science", ["finetune.only_models=[base, tapt]"])
    assert cfg.finetune.only_models == ["base", "tapt"]
    with pytest.raises(ConfigError, match=r"only_models names \['scratch'\], not among the models \['base', "):
        load_domain("science", ["pretrain.arms=[continued]", "finetune.only_models=[base, scratch]"])


def test_a_domain_name_resolves_in_the_current_directory_first(tmp_path, monkeypatch):
    """Run from another checkout (or a project folder with its own domains/), its YAMLs are the ones used,
    not those of the checkout the package was installed from nor DOMAINBERT_HOME's; from a folder without
    domains/, DOMAINBERT_HOME's are."""
    other = tmp_path / "other-checkout"
    (other / "domains").mkdir(parents=True)
    text = (domains_dir() / "science.yaml").read_text().replace(
        "description: Computer science and computing terminology", "description: Edited in the other checkout")
    (other / "domains" / "science.yaml").write_text(text)
    monkeypatch.delenv("DOMAINBERT_HOME", raising=False)
    installed = load_domain("science").description
    monkeypatch.chdir(other)
    assert load_domain("science").description.startswith("Edited in the other checkout")
    monkeypatch.setenv("DOMAINBERT_HOME", str(Path(__file__).resolve().parents[3]))  # this checkout
    assert load_domain("science").description.startswith("Edited in the other checkout")  # where the user is
    monkeypatch.chdir(tmp_path)  # no domains/ here: the environment's checkout
    assert load_domain("science").description == installed
    monkeypatch.setenv("DOMAINBERT_HOME", str(other))
    assert load_domain("science").description.startswith("Edited in the other checkout")


def test_a_bare_on_or_off_switches_the_base_warmup():
    """YAML 1.1 reads on/off as booleans: `pretrain.base_warmup.enabled=off` must still mean "off"."""
    assert load_domain("science", ["pretrain.base_warmup.enabled=off"]).pretrain.base_warmup.enabled == "off"
    assert load_domain("science", ["pretrain.base_warmup.enabled=on"]).pretrain.base_warmup.enabled == "on"
    assert load_domain("science", ["pretrain.base_warmup.enabled=auto"]).pretrain.base_warmup.enabled == "auto"
