"""The schedule, masking-phase, replay and start settings enter an arm's fingerprint only when set: a default config keeps
the fingerprints it had before the settings existed, so nothing finished is trained again."""

from __future__ import annotations

import pytest

from domainbert.config.domain import load_domain
from domainbert.core.paths import RunLayout
from domainbert.pretrain import stage

NEW = ("lr_schedule", "mask_schedule", "replay", "start_from")


def _without_new_settings(monkeypatch):
    """``arm_fingerprint`` as a config without the new fields would compute it: their keys never dumped."""
    dump = stage.resolved_dict

    def old_dump(cfg):
        out = dump(cfg)
        for key in NEW:
            out.pop(key, None)
        return out

    monkeypatch.setattr(stage, "resolved_dict", old_dump)


@pytest.mark.parametrize("arm", ["continued", "control"])
def test_a_default_config_fingerprints_as_it_did_before_the_settings(tmp_path, monkeypatch, arm):
    cfg, layout = load_domain("science"), RunLayout(tmp_path)
    now = stage.arm_fingerprint(cfg, arm, layout)
    _without_new_settings(monkeypatch)
    assert stage.arm_fingerprint(cfg, arm, layout) == now


def test_each_setting_changes_the_fingerprint_of_the_arms_it_applies_to(tmp_path):
    layout = RunLayout(tmp_path)
    default = load_domain("science")
    fps = {arm: stage.arm_fingerprint(default, arm, layout) for arm in ("continued", "control")}
    for override in ("pretrain.lr_schedule.kind=wsd", "pretrain.lr_schedule.decay_shape=cosine",
                     "pretrain.mask_schedule=[{until: 0.5, rate: 0.3}, {until: 1.0, rate: 0.15}]"):
        assert stage.arm_fingerprint(load_domain("science", overrides=[override]), "continued", layout) != \
            fps["continued"], override
    replay = load_domain("science", overrides=["pretrain.replay.fraction=0.25"])
    assert stage.arm_fingerprint(replay, "continued", layout) != fps["continued"]
    assert stage.arm_fingerprint(replay, "control", layout) == fps["control"]  # the control never replays
    # which other arms replay is not this arm's recipe
    listed = load_domain("science", overrides=["pretrain.replay.fraction=0.25", "pretrain.replay.arms=[continued]"])
    assert stage.arm_fingerprint(listed, "continued", layout) == stage.arm_fingerprint(replay, "continued", layout)
