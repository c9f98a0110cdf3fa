"""Fixtures of the source tests."""

from __future__ import annotations

import pytest

from tests.helpers import open_new


@pytest.fixture(scope="session")
def new_warehouse():
    """`open_for_write(path)`, a new file starting as a copy of a new warehouse made once (tests.helpers.open_new)."""
    return open_new
