"""The Hugging Face cards a run writes beside its models and its corpus: fine-tuned models and the corpus
(``finetuned_and_corpus``, with what every card shares) and a pretrained arm (``arm``).

Above ``domainbert.config`` and ``domainbert.literature``, under the corpus and every later stage. See
docs/architecture.md.
"""
