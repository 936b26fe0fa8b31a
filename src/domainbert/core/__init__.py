"""The bottom import layer: what every stage may use, importing no stage and no configuration.

Errors, paths and run layout, files and JSONL, atomic artifacts and their types, locks and signals, progress
lines, optimizer set-up, model and tokenizer loading, devices and launchers, documents and plots. See
docs/architecture.md.
"""
