"""Configuration schemas: one module per stage's settings, ``domain.py`` composing them into a domain file.

Imports only ``domainbert.core``. See docs/architecture.md.
"""
