"""A real PostgreSQL for the integration tests: `initdb` into a temp directory, `postgres`
on a free port of 127.0.0.1 with its socket in that directory, stopped by PID. PostgreSQL
refuses to run as root, so as root it runs as Debian's `postgres` user (the directory is
handed to that user). `make test` installs the `postgresql` package; without it the tests
that need it are skipped with a message saying so."""
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest


def bin_dir():
    if os.environ.get("RIDEPUSH_PG_BIN"):
        return os.environ["RIDEPUSH_PG_BIN"]
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """One PostgreSQL server. `stop()` and `start()` again keep the data (a restart);
    `close()` removes everything."""

    def __init__(self, init=True):
        self.bin = bin_dir()
        if not self.bin:
            raise RuntimeError("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin")
        self.dir = tempfile.mkdtemp(prefix="ridepush-pg-")
        self.port = free_port()
        self.proc = None
        self.as_root = os.getuid() == 0
        if self.as_root:
            import pwd
            pw = pwd.getpwnam("postgres")
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
            os.chown(self.dir, self.uid, self.gid)
        if init:
            self._run([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres", "-A", "trust",
                       "-E", "UTF8", "--locale=C", "--no-sync"])

    @property
    def data(self):
        return os.path.join(self.dir, "data")

    def _user_kwargs(self):
        return {"user": self.uid, "group": self.gid, "extra_groups": []} if self.as_root else {}

    def _run(self, argv):
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                           **self._user_kwargs())
        if r.returncode != 0:
            raise RuntimeError("%s failed (%d):\n%s" % (" ".join(argv), r.returncode, r.stdout))

    def start(self, timeout=30, settings=()):
        """`settings`: extra `name=value` server settings (each passed as `-c`)."""
        log = open(os.path.join(self.dir, "server.log"), "a")
        extra = [a for kv in settings for a in ("-c", kv)]
        self.proc = subprocess.Popen(
            [os.path.join(self.bin, "postgres"), "-D", self.data, "-p", str(self.port), "-k", self.dir,
             "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300"] + extra,
            stdout=log, stderr=subprocess.STDOUT, **self._user_kwargs())
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            r = subprocess.run([os.path.join(self.bin, "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-t", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("postgres did not start on port %d:\n%s" % (self.port, self.log()))
            time.sleep(0.1)

    def stop(self, mode=signal.SIGINT, timeout=30):
        """Fast shutdown by default (SIGINT: open transactions are rolled back)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(mode)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # A primary with a synchronous streaming standby (issue 39): started with PRIMARY_SETTINGS,
    # `standby_of` makes a copy with `pg_basebackup -R` that streams from it, and
    # `require_synchronous` then names that standby in `synchronous_standby_names`: from then
    # on a COMMIT returns only once the standby has the WAL on disk. The name is set after the
    # copy (ALTER SYSTEM), so the standby's files do not carry it: once promoted it does not
    # wait for a standby of its own that does not exist.

    PRIMARY_SETTINGS = ("wal_level=replica", "max_wal_senders=5", "synchronous_commit=on", "wal_sender_timeout=5s")

    def require_synchronous(self, name="standby1"):
        self.psql("ALTER SYSTEM SET synchronous_standby_names = '%s'" % name)
        self.psql("SELECT pg_reload_conf()")

    def standby_of(self, name="standby1"):
        """A new server, stopped, that streams from this one (which must be running) under
        `application_name` `name`; `start()` it."""
        sb = Postgres(init=False)
        self._run([os.path.join(self.bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                   "-D", sb.data, "-R", "-X", "stream", "--no-sync", "-c", "fast"])
        # -R wrote primary_conninfo without an application_name; the later line wins, and
        # the primary's synchronous_standby_names matches on that name.
        with open(os.path.join(sb.data, "postgresql.auto.conf"), "a") as f:
            f.write("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\n" % (self.port, name))
        return sb

    def kill(self):
        """SIGKILL the postmaster and then each of its processes, by PID: a machine that
        dies finishes nothing, so no backend may go on answering after its postmaster."""
        if not self.proc or self.proc.poll() is not None:
            return
        children = []
        try:
            for task in os.listdir("/proc/%d/task" % self.proc.pid):
                with open("/proc/%d/task/%s/children" % (self.proc.pid, task)) as f:
                    children += [int(p) for p in f.read().split()]
        except OSError:
            pass
        self.proc.send_signal(signal.SIGKILL)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)
        self.proc = None

    def promote(self, timeout=30):
        """`pg_ctl promote` (waits until the server accepts writes)."""
        self._run([os.path.join(self.bin, "pg_ctl"), "promote", "-D", self.data, "-w", "-t", str(timeout)])

    def sync_state(self):
        """The standbys' (application_name, state, sync_state) as the primary sees them."""
        return [tuple(r) for r in self.psql("SELECT application_name, state, sync_state FROM pg_stat_replication")]

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()
        except OSError:
            return ""

    def uri(self, db):
        return "postgresql://postgres@127.0.0.1:%d/%s" % (self.port, db)

    def psql(self, sql, db="postgres"):
        """Runs SQL as the superuser; returns the rows as lists of strings."""
        r = subprocess.run([os.path.join(self.bin, "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                            "-d", db, "-X", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("psql failed: %s" % r.stderr)
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    def create_database(self):
        name = "t_" + uuid.uuid4().hex[:12]
        self.psql("CREATE DATABASE %s" % name)
        return name

    def terminate(self, db, application_name):
        """pg_terminate_backend of every session of `db` with that application_name; returns how many."""
        rows = self.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE datname = '%s' AND application_name = '%s'" % (db, application_name))
        return int(rows[0][0])


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server shared by the session's tests (each test takes its own database)."""
    if not bin_dir():
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql, or `make test`)")
    pg = Postgres().start()
    yield pg
    pg.close()


@pytest.fixture
def pg_db(postgres):
    """(server, a fresh database name)."""
    return postgres, postgres.create_database()
