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


@pytest.fixture
def browsers():
    """make(size, lang) -> a fresh headless Chromium; all are closed after the test."""
    import browser as B
    made = []

    def make(size=None, lang="ko-KR"):
        d = B.make_driver(size or B.DESKTOP, lang)
        made.append(d)
        return d
    yield make
    for d in made:
        try:
            d.quit()
        except Exception:
            pass
