"""Which state the patches scenario's hosts are in: converged (first verify) or rolled back (second verify, after side_effect)."""

import os

import pytest


def rolled_back():
    path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "phase")
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip() == "rolled-back"


converged_only = pytest.mark.skipif(rolled_back(), reason="checked in the first verify, before side_effect rolls back")
rolled_back_only = pytest.mark.skipif(not rolled_back(), reason="checked in the second verify, after side_effect")
