"""Builders the tests share: tiny corpora, tiny models, tiny tasks and domain configs, the flow tests' services,
and readers of what the trackers and the device saw. Plain modules, not tests; tests/conftest.py wraps the
shared ones in fixtures.

Tests import these as ``support.<module>``: ``tests/`` is on ``sys.path`` because pytest inserts the folder of
``tests/conftest.py`` there (``rootdir``-style layout, no ``__init__.py`` in the test folders), so a test finds
them from whichever lane folder it sits in.
"""
