"""finetune.forgetting_task: on in the shipped domains, appended as the general task, and removable."""

from __future__ import annotations

import json

import pytest

from domainbert.config.domain import DomainConfig, load_domain

GENERAL = "general-lexname"


ON = "finetune.forgetting_task.enabled=true"  # the shipped domains keep it off; `make demo` turns it on


@pytest.mark.parametrize("domain", ["science", "economics", "law", "tweets"])
def test_the_domains_fine_tune_on_the_general_task_once(domain: str):
    assert GENERAL not in [t.name for t in load_domain(domain).finetune.tasks]  # off unless turned on
    cfg = load_domain(domain, [ON])
    general = [t for t in cfg.finetune.tasks if t.role == "general"]
    assert [t.name for t in general] == [GENERAL]
    assert all(t.role == "domain" for t in cfg.finetune.tasks if t.name != GENERAL)
    assert cfg.finetune.tasks[-1].name == GENERAL  # after the domain's own tasks


def test_enabled_false_removes_the_task():
    cfg = load_domain("science", [ON, "finetune.forgetting_task.enabled=false"])
    assert GENERAL not in [t.name for t in cfg.finetune.tasks]
    assert all(t.role == "domain" for t in cfg.finetune.tasks)


def test_a_config_validated_again_keeps_one_copy():
    # the workers validate the dumped config again: the task must not be appended twice
    cfg = load_domain("science", [ON])
    again = DomainConfig.model_validate(json.loads(cfg.model_dump_json()))
    assert [t.name for t in again.finetune.tasks] == [t.name for t in cfg.finetune.tasks]
    assert again.finetune.tasks[-1].role == "general"


def test_only_tasks_may_name_the_general_task():
    cfg = load_domain("science", [ON, f"finetune.only_tasks=[{GENERAL}]"])
    assert [t.name for t in cfg.finetune.tasks] == [GENERAL]
