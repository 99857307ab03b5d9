"""Every pass test runs with the full type rule in the verifier (another
test file may have removed it) and with TRACEC_CHECKS on."""
import pytest

from tracec.passes.simplify import install_type_rule


@pytest.fixture(autouse=True)
def _full_verifier(monkeypatch):
    install_type_rule()
    monkeypatch.setenv("TRACEC_CHECKS", "1")
