import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from rp import Server  # noqa: E402


@pytest.fixture
def server():
    """A fresh in-memory server with auth off, on a free port."""
    with Server() as s:
        yield s
