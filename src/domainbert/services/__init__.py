"""Shared services that read a configuration: task reading and tag schemes, trackers, model cards.

Above ``domainbert.config``, under every stage. See docs/architecture.md.
"""
