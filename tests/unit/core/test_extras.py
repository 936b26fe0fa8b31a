"""An optional dependency that is not installed is one line naming the extra; a broken one keeps its error."""

from __future__ import annotations

import sys

import pytest

from domainbert.core.errors import DomainbertError
from domainbert.core.extras import require


def test_missing_extra_names_the_pip_command():
    with pytest.raises(DomainbertError) as err:
        require("domainbert_not_installed.sub", "tracking", "pretraining curves")
    message = str(err.value)
    assert "pip install 'domainbert[tracking]'" in message and "domainbert_not_installed" in message
    assert "\n" not in message
    assert require("json", "none", "x") is sys.modules["json"]


def test_a_package_whose_own_import_fails_is_not_hidden(tmp_path, monkeypatch):
    (tmp_path / "halfbroken.py").write_text("import domainbert_missing_dependency_of_it\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="domainbert_missing_dependency_of_it"):
        require("halfbroken", "x", "y")
