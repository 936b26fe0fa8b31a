"""The report's method section names the recipe the run chose: each task's rate from the grid and, where runs
stopped at the reference's step (``finetune.early_stopping: reference``), that step."""

from __future__ import annotations

from domainbert.config.domain import load_domain
from domainbert.report.finetune_sections import method_section


def _text(cfg) -> str:
    return "\n".join(b if isinstance(b, str) else "\n".join(b) for b in method_section(cfg, []).blocks)


def test_the_method_names_the_chosen_rate_and_the_references_stopping_step():
    plain = load_domain("science")
    assert "stopping point" not in _text(plain) and "learning rate was chosen" not in _text(plain)
    chosen = plain.model_copy(update={"finetune": plain.finetune.model_copy(update={
        "lr_grid": [1e-4, 3e-4], "lr_chosen": {"science-subject": 3e-4},
        "early_stopping": "reference", "stop_chosen": {"science-terms-ner": 57, "science-subject": 32}})})
    text = _text(chosen)
    assert "from 0.0001, 0.0003" in text and "science-subject 0.0003" in text
    assert "chosen on validation by the reference" in text
    assert "science-terms-ner step 57; science-subject step 32" in text
    # a stop given in the file while each run stops on its own: no run stopped there, and the page says nothing
    each = chosen.model_copy(update={"finetune": chosen.finetune.model_copy(update={"early_stopping": "each_run"})})
    assert "stopping point" not in _text(each) and "science-subject 0.0003" in _text(each)
