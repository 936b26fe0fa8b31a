"""A fine-tuning task's data: its splits read into examples (``splits``), NER tag schemes (``tag_schemes``) and
the examples its evaluation splits share with its training split (``split_overlap``).

Above ``domainbert.config``, under every stage (the corpus reads the tasks' texts to decontaminate against
them). See docs/architecture.md.
"""
