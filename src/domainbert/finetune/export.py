"""Saving a fine-tuned run's model and tokenizer as a Hugging Face folder (``finetune.save_models``).

A token classifier and a [CLS]-pooler sequence classifier (``pooling: cls``, the default) are transformers'
own classes and are saved as they are. A mean-pooling classifier (``pooling: mean``) is moved into
``modeling_mean_pool.MeanPoolForSequenceClassification`` and saved with that file, so it loads with
``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)``. Label names are in
``config.id2label`` either way. The tokenizer is saved beside the weights (``vocab.train.make_portable``, as
the pretrained arms are). Nothing here writes a local path into the folder.

Where the folder goes and when it counts as complete is ``stage.py``'s business (it lands inside the run's
atomic output folder); this module only writes the files and the model card is added by the stage.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from domainbert.finetune.pooling import MeanPoolClassifier
from domainbert.task_data.splits import TaskData

MODEL = "model"  # the folder name inside a run's result folder


def hub_model(model: Any, data: TaskData) -> Any:
    """``model`` as a class ``from_pretrained`` can rebuild: itself, or the mean-pooling classifier's weights in
    ``MeanPoolForSequenceClassification`` (registered for the Auto classes, so its code is saved with it)."""
    if not isinstance(model, MeanPoolClassifier):
        return model
    from domainbert.finetune.modeling_mean_pool import MeanPoolConfig, MeanPoolForSequenceClassification

    labels = data.label_list
    multi = data.config.multi_label
    # The encoder's own label names and the folder it was loaded from are not this model's.
    encoder = {
        k: v for k, v in model.encoder.config.to_dict().items() if k not in ("_name_or_path", "id2label", "label2id")
    }
    config = MeanPoolConfig(
        encoder=encoder,
        multi_label=multi,
        classifier_dropout=model.dropout.p,
        chunk_length=model.chunk_length,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
        problem_type="multi_label_classification" if multi else "single_label_classification",
    )
    MeanPoolConfig.register_for_auto_class()
    MeanPoolForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
    out = MeanPoolForSequenceClassification(config)
    out.load_state_dict(model.state_dict())  # the same names: encoder.*, classifier.*
    return out.eval()


def save_task_model(model: Any, tokenizer: Any, data: TaskData, folder: Path) -> Path:
    """Write ``model`` (safetensors) and ``tokenizer`` to ``folder``, replacing it."""
    from domainbert.core.errors import disk_errors
    from domainbert.core.tokenizer_files import make_portable

    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    with disk_errors(folder):  # safetensors says "no space left" as its own error, not an OSError
        hub_model(model, data).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    make_portable(folder)
    return folder
