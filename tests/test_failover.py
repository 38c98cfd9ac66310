"""PostgreSQL failover with nothing acknowledged lost (issue 39, item 1), end to end: a primary
and a synchronous streaming standby started here on loopback (tests/pg.py), two `ridepush`
nodes on the multi-host URI with `target_session_attrs=read-write`, clients walking rides
through start/pause/resume/end on both nodes and retrying by id, the primary SIGKILLed mid-load
and the standby promoted with `pg_ctl promote` (the scenario and its checks: tests/failover_load.py,
shared with tests/test_auto_failover.py, where pg_auto_failover promotes). Every wait is bounded;
every process started here is stopped by PID. Takes about 40 s."""
import time

import pytest

from failover_load import run_failover
from pg import Postgres, bin_dir
from test_cluster import wait_until

PROMOTE_AFTER = 1.0        # seconds without any primary (the failover manager's detection time)


@pytest.fixture
def primary_and_standby():
    if not bin_dir():
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql, or `make test`)")
    primary = Postgres().start(settings=Postgres.PRIMARY_SETTINGS)
    standby = None
    try:
        db = primary.create_database()
        standby = primary.standby_of("standby1").start(settings=("hot_standby=on",))
        primary.require_synchronous("standby1")
        wait_until(lambda: ("standby1", "streaming", "sync") in primary.sync_state(), 30,
                   "the standby streaming as the synchronous one")
        yield primary, standby, db
    finally:
        if standby:
            standby.close()
        primary.kill()
        primary.close()


def test_primary_killed_and_standby_promoted_loses_nothing_acknowledged(primary_and_standby, tmp_path):
    primary, standby, db = primary_and_standby
    uri = "postgresql://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?target_session_attrs=read-write" % (primary.port, standby.port, db)

    def fail_over():
        killed = time.monotonic()
        primary.kill()
        time.sleep(PROMOTE_AFTER)
        standby.promote()
        return killed, time.monotonic()

    run_failover(uri, "127.0.0.1:%d,127.0.0.1:%d" % (primary.port, standby.port), fail_over,
                 lambda sql: standby.psql(sql, db), tmp_path)
