"""A short soak (issue 15; the 10-minute one is tests/measure_soak.py, figures in
BENCHMARKS.md): 300 clients at once connecting at 30 per second for 20 s, each subscribing,
reading its ticks for 10 s and closing, against a server on an SQLite file with tokens on.
Every descriptor the churn opened is closed again, and nothing is logged at error or warn.
RSS is printed, not asserted (a debug build on a shared machine; the long run measures it)."""
import asyncio
import os

from measure_soak import SECRET, report, soak
from rp import Server


def test_short_soak_returns_every_descriptor_and_logs_no_error(tmp_path):
    with Server("--log-format", "json", store=os.path.join(tmp_path, "soak.db"), auth="jwt",
                env={"RIDEPUSH_JWT_SECRET": SECRET}) as srv:
        r = asyncio.run(soak(srv, clients=300, rate=30, seconds=20, rides=40, warmup=5, every=10, out=lambda _: None))
    report(r)
    assert r["failures"] == {}
    assert r["launched"] == 600 and r["connected"] == 600
    assert r["peak_fds"] >= r["baseline"][1] + 250  # the clients were really there at once
    assert r["baseline"][1] == r["started"][1]  # the warm-up returned every one too
    assert r["final"][1] == r["baseline"][1]
    assert r["errors"] == [] and r["warns"] == []
