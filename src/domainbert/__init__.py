"""domainbert: domain-adaptive pretraining for BERT-style encoders.

Stages (each a typed function over a typed config, none imports Prefect):
corpus -> vocab -> pretrain -> finetune -> report. ``domainbert.flows`` wires them with Prefect.
"""

__version__ = "0.1.0"
