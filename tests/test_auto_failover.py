"""PostgreSQL failover through pg_auto_failover itself (issue 39): the recipe of
docs/failover.md run on loopback — a monitor and two data nodes made with `pg_autoctl create`
and run by `pg_autoctl run` (tests/autofailover.py), the standby synchronous, the `ridepush`
role made as the docs say, two `ridepush` nodes on the URI `pg_autoctl show uri` prints, and
the failover scenario of tests/test_failover.py (tests/failover_load.py) with this difference:
the primary's machine dies (its pg_autoctl and postgres SIGKILLed) and nobody promotes the
standby but the monitor. Needs Debian's `pg-auto-failover-cli` and
`postgresql-15-auto-failover`, which `make test` installs; without them the test fails and
says so. Takes about a minute and a half."""
import re
import time

import pytest

from autofailover import Formation, installed
from failover_load import run_failover

SETUP_LIMIT = 120      # seconds for the monitor and both nodes to be primary + secondary
PROMOTION_LIMIT = 60   # seconds from the kill to the standby accepting writes
ACCEPTS_WRITES = ("wait_primary", "primary")


@pytest.fixture
def formation():
    why = installed()
    if why:
        pytest.fail(why + ": `make deps-test` (or `bash .ci/apt-ensure.sh postgresql-15-auto-failover "
                    "pg-auto-failover-cli`) installs it", pytrace=False)
    f = Formation()
    try:
        f.create_monitor()
        f.create_node("node1")
        f.wait(lambda: f.states().get("node1") == ("single", "single"), SETUP_LIMIT, "node1 single")
        f.create_node("node2")
        settled = lambda: f.states() == {"node1": ("primary", "primary"), "node2": ("secondary", "secondary")}
        f.wait(settled, SETUP_LIMIT, "node1 primary and node2 secondary")
        # The standby synchronous: it takes part in the replication quorum, and with
        # number-sync-standbys 0 the primary waits for ANY 1 of the quorum's standbys at each
        # COMMIT (and goes to wait_primary, writing alone, only when none is left). Both are
        # pg_auto_failover's defaults for two nodes; set here so the recipe does not depend
        # on them. Each `set` makes the primary apply its settings: the next waits for that
        # (and is tried again while the monitor says the primary is still at it).
        # (pg_autoctl 2.0 logs an ERROR about get_nodes() at each `set`; the setting is made.)
        f.set("node", "replication-quorum", "true", "--pgdata", f.pgdata("node2"))
        f.wait(settled, 30, "the primary to apply the replication quorum")
        f.set("formation", "number-sync-standbys", "0", "--pgdata", f.pgdata("node1"))
        f.wait(settled, 30, "the primary to apply number-sync-standbys")
        shown = f.autoctl("show", "settings", "--pgdata", f.pgdata("node1"))
        assert re.search(r"node \| +node2 \| +replication quorum \| true", shown), shown
        f.wait(lambda: f.psql(f.ports["node1"], "postgres", "SELECT application_name, state, sync_state FROM pg_stat_replication")
               == [["pgautofailover_standby_2", "streaming", "quorum"]], 30, "node2 streaming as a synchronous (quorum) standby")
        names = f.psql(f.ports["node1"], "postgres", "SHOW synchronous_standby_names")[0][0]
        assert names == "ANY 1 (pgautofailover_standby_2)", names
        # The role RidePush uses, as docs/failover.md makes it (the password is not asked on
        # this test's trust-on-loopback formation).
        f.psql(f.ports["node1"], "ridepush", "CREATE ROLE ridepush LOGIN PASSWORD 'not-checked-here'; "
                                             "GRANT CREATE ON DATABASE ridepush TO ridepush")
        yield f
    finally:
        f.close()


def test_pg_auto_failover_promotes_the_standby_and_nothing_acknowledged_is_lost(formation, tmp_path):
    f = formation
    shown = f.formation_uri()
    hosts = "127.0.0.1:%d,127.0.0.1:%d" % (f.ports["node1"], f.ports["node2"])
    assert shown.startswith("postgres://%s/ridepush?" % hosts) and "target_session_attrs=read-write" in shown, shown
    # The nodes connect as `ridepush` (docs/failover.md: the user goes before the hosts).
    uri = shown.replace("postgres://", "postgres://ridepush@", 1)

    def fail_over():
        killed = time.monotonic()
        f.kill("node1")
        f.wait(lambda: f.states().get("node2", ("",))[0] in ACCEPTS_WRITES, PROMOTION_LIMIT,
               "the monitor to promote node2", every=0.1)
        return killed, time.monotonic()

    figures = run_failover(uri, hosts, fail_over, lambda sql: f.psql(f.ports["node2"], "ridepush", sql, timeout=30),
                           tmp_path, label="auto failover")
    # pg_auto_failover did it: the monitor's events say node2 was promoted after node1 was
    # found unhealthy (no `pg_ctl promote` here).
    events = f.autoctl("show", "events", "--pgdata", f.pgdata("monitor"), "--count", "30")
    assert "became unhealthy" in events and "prepare_promotion" in events, events
    assert f.in_recovery("node2") is False
    print("auto failover: %s" % ", ".join("%s %s" % (k, round(v, 2) if isinstance(v, float) else v) for k, v in figures.items()))
