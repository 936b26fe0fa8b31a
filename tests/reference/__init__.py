"""Reference implementations the package's fast paths are tested against: plain, one-document-at-a-time code
that says what a batched or vectorised path must compute, kept out of the package because nothing in the
pipeline runs it.

Test modules import these as ``reference.<module>``: ``tests/`` is on ``sys.path`` because pytest inserts the
folder of ``tests/conftest.py`` there (``rootdir``-style layout, no ``__init__.py`` in the test folders).
"""
