"""The pretraining table's row of a replaced-token detection arm: what its figures are, and whether its
discriminator beats calling every token original (the economics run's own figures)."""

from __future__ import annotations

from pathlib import Path

from domainbert.report.inputs import RunArtifacts
from domainbert.report.pretrain_sections import _pretrain_rows

ECONOMICS_SCRATCH = {  # pretrain/scratch/summary.json of the offline economics run (bench/README.md)
    "objective": "rtd", "generator_layers": 3, "start_head": "random", "steps": 59, "tokens_consumed": 120832,
    "lr": 5e-4, "final_loss": 27.45, "domain_perplexity_before": 6339.3, "domain_perplexity": 1374.1,
    "general_perplexity_before": 6545.0, "general_perplexity": 2233.7,
    "discriminator_accuracy_before": 0.40859375, "discriminator_accuracy": 0.8609375,
    "discriminator_floor_accuracy_before": 0.8541666666666666, "discriminator_floor_accuracy": 0.8609375,
}


def _row(summary: dict) -> list[str]:
    [row] = _pretrain_rows(RunArtifacts(Path("run"), pretrain={"scratch": summary}))
    return row


def test_an_rtd_arm_names_its_generator_and_its_accuracy_floor():
    row = _row(ECONOMICS_SCRATCH)
    assert row[0] == ("scratch (replaced-token detection: perplexity of its 3-layer generator; discriminator "
                      "accuracy 40.9% -> 86.1%, calling every token original 85.4% -> 86.1%: no better than that, "
                      "the discriminator has not learned to detect yet)")
    assert row[5] == "random init -> 1,374.1"  # a new generator's perplexity has no meaningful "before"


def test_a_discriminator_above_its_floor_is_not_called_untrained():
    row = _row({**ECONOMICS_SCRATCH, "discriminator_accuracy": 0.93})
    assert row[0].endswith("calling every token original 85.4% -> 86.1%)")
    assert _row({**ECONOMICS_SCRATCH, "objective": "mlm"})[0] == "scratch"


def test_the_table_says_when_the_arms_had_their_own_budgets(tmp_path):
    """Study 3's design: scratch and continued each on its own budget, so the page must not call it one."""
    from domainbert.core.document import Table
    from domainbert.report.pretrain_sections import pretrain_section

    def caption(tokens: dict[str, int]) -> str:
        pretrain = {arm: {**ECONOMICS_SCRATCH, "objective": "mlm", "tokens_consumed": n} for arm, n in tokens.items()}
        section = pretrain_section(RunArtifacts(Path("run"), pretrain=pretrain), list(pretrain), tmp_path)
        [table] = [b for b in section.blocks if isinstance(b, Table)]
        return table.caption or ""

    assert caption({"continued": 786432, "control": 786432}).startswith("MLM pretraining of each arm on the same")
    own = caption({"continued": 786432, "scratch": 18432000})
    assert "its own token budget" in own and "not at equal compute" in own
