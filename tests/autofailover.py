"""A pg_auto_failover formation for the integration tests (issue 39): a monitor and two data
nodes made with `pg_autoctl create`, each then run by `pg_autoctl run` as a background process
tracked by PID, all in one temp directory, on free ports of 127.0.0.1. It runs the recipe of
docs/failover.md ("The pg_auto_failover recipe, as the test runs it") with the test's choices:
no TLS and `trust` authentication (loopback only), and health-check timeouts short enough that
a dead primary is replaced in seconds, not the half minute of the defaults.

pg_autoctl refuses to run as root, so as root every command runs as Debian's `postgres` user
(as tests/pg.py does); its configuration and state files go under the temp directory (XDG
variables), never into that user's home. Needs Debian's `pg-auto-failover-cli` and
`postgresql-15-auto-failover` (`make test` installs them)."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from pg import bin_dir, free_port

PG_AUTOCTL = "/usr/bin/pg_autoctl"
SOCKET_DIR = "/run/postgresql"

# The monitor's health checks, tuned for a test on loopback (defaults in brackets): a check
# every second [5 s] that gives up after one retry 0.5 s later [2 retries, 2 s apart], a node
# whose keeper has not reported for 3 s [20 s] counted unhealthy, and a dead primary's
# demotion waited for 2 s [30 s] before the standby is promoted. Safe here because the
# primary is dead (killed); in production the defaults keep a slow network from failing over.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "2000",
    # pg_autoctl sizes shared_buffers from the machine's memory (GBs); three servers of a
    # test need far less.
    "shared_buffers": "'128MB'",
}
NODE_SETTINGS = {"shared_buffers": "'128MB'", "max_connections": "300"}


def installed():
    """Why pg_auto_failover cannot run here, or None when it can."""
    if not bin_dir():
        return "PostgreSQL is not installed"
    if not os.path.exists(PG_AUTOCTL):
        return "pg_autoctl is not installed (Debian: pg-auto-failover-cli)"
    lib = subprocess.run([os.path.join(bin_dir(), "pg_config"), "--pkglibdir"], stdout=subprocess.PIPE, text=True).stdout.strip()
    if not os.path.exists(os.path.join(lib, "pgautofailover.so")):
        return "the pgautofailover extension is not installed (Debian: postgresql-15-auto-failover)"
    return None


def started(pid):
    """A process's start time (clock ticks since boot), or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid):
    """`pid` and every process below it, parents before children (read from /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        try:
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


class Formation:
    """The monitor and the data nodes `node1`, `node2` (created in that order, so node1 is the
    first primary). `close()` stops every `pg_autoctl run` by PID and removes the directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ridepush-pgaf-")
        self.bin = bin_dir()
        self.as_root = os.getuid() == 0
        if self.as_root:
            import pwd
            pw = pwd.getpwnam("postgres")
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
            os.chown(self.dir, self.uid, self.gid)
            # The servers pg_autoctl starts put their sockets in Debian's default directory,
            # which systemd-tmpfiles makes at boot (postgresql-common); a container that did
            # not boot may lack it. Made as that rule says.
            if not os.path.isdir(SOCKET_DIR):
                os.makedirs(SOCKET_DIR, exist_ok=True)
                os.chown(SOCKET_DIR, self.uid, self.gid)
                os.chmod(SOCKET_DIR, 0o2775)
        self.env = dict(os.environ, HOME=self.dir, XDG_CONFIG_HOME=os.path.join(self.dir, "config"),
                        XDG_DATA_HOME=os.path.join(self.dir, "share"), XDG_RUNTIME_DIR=os.path.join(self.dir, "run"),
                        PG_CONFIG=os.path.join(self.bin, "pg_config"))
        self.ports = {}
        self.runs = {}       # name -> Popen of `pg_autoctl run`
        self.monitor_uri = None
        self.killed = set()  # names whose `pg_autoctl run` this test killed on purpose

    def pgdata(self, name):
        return os.path.join(self.dir, name)

    def _kwargs(self):
        kw = {"env": self.env, "cwd": self.dir}
        if self.as_root:
            kw.update(user=self.uid, group=self.gid, extra_groups=[])
        return kw

    def autoctl(self, *args, timeout=120):
        """One `pg_autoctl` command; its output, or RuntimeError with it."""
        r = subprocess.run([PG_AUTOCTL, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout, **self._kwargs())
        if r.returncode != 0:
            raise RuntimeError("pg_autoctl %s failed (%d):\n%s" % (" ".join(args), r.returncode, r.stdout[-4000:]))
        return r.stdout

    def set(self, *args, timeout=30):
        """`pg_autoctl set ...`, again while the monitor refuses it because the primary is
        still applying the previous change (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.autoctl("set", *args)
            except RuntimeError as e:
                if "current goal state" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _append_settings(self, name, settings):
        # postgresql.conf includes pg_autoctl's own file on its first line: what follows wins.
        with open(os.path.join(self.pgdata(name), "postgresql.conf"), "a") as f:
            f.write("\n# the test's settings (tests/autofailover.py)\n")
            for k, v in settings.items():
                f.write("%s = %s\n" % (k, v))

    def run(self, name):
        """`pg_autoctl run` of `name` in the background (its log in the temp directory)."""
        log = open(os.path.join(self.dir, name + ".log"), "a")
        self.runs[name] = subprocess.Popen([PG_AUTOCTL, "run", "--pgdata", self.pgdata(name)],
                                           stdout=log, stderr=subprocess.STDOUT, **self._kwargs())
        log.close()

    def create_monitor(self):
        port = self.ports["monitor"] = free_port()
        # --auth trust and --no-ssl: a test on loopback only (listen_addresses is 127.0.0.1);
        # docs/failover.md says what production uses instead.
        self.autoctl("create", "monitor", "--pgdata", self.pgdata("monitor"), "--pgport", str(port),
                     "--pgctl", os.path.join(self.bin, "pg_ctl"), "--hostname", "127.0.0.1",
                     "--auth", "trust", "--no-ssl")
        self.autoctl("config", "set", "--pgdata", self.pgdata("monitor"), "postgresql.listen_addresses", "127.0.0.1")
        self._append_settings("monitor", MONITOR_SETTINGS)
        self.run("monitor")
        self.monitor_uri = self.wait(lambda: self._monitor_uri(), 30, "the monitor's URI")

    def _monitor_uri(self):
        try:
            for row in json.loads(self.autoctl("show", "uri", "--pgdata", self.pgdata("monitor"), "--json", timeout=10)):
                if row["type"] == "monitor":
                    return row["uri"]
        except (RuntimeError, ValueError):
            return None

    def create_node(self, name):
        port = self.ports[name] = free_port()
        self.autoctl("create", "postgres", "--pgdata", self.pgdata(name), "--pgport", str(port),
                     "--pgctl", os.path.join(self.bin, "pg_ctl"), "--listen", "127.0.0.1", "--hostname", "127.0.0.1",
                     "--name", name, "--dbname", "ridepush", "--auth", "trust", "--no-ssl",
                     "--monitor", self.monitor_uri, timeout=180)
        if name == "node1":  # node2 is a copy of node1 (pg_basebackup): it has them already
            self._append_settings(name, NODE_SETTINGS)
        self.run(name)

    def monitor_sql(self, sql):
        return self.psql(self.ports["monitor"], "pg_auto_failover", sql)

    def psql(self, port, db, sql, timeout=10):
        r = subprocess.run([os.path.join(self.bin, "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                            "-d", db, "-X", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("psql failed: %s" % r.stderr)
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    def states(self):
        """{node name: (reported state, goal state)} as the monitor has them."""
        try:
            return {n: (r, g) for n, r, g in self.monitor_sql(
                "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node")}
        except (RuntimeError, subprocess.TimeoutExpired):
            return {}

    def in_recovery(self, name):
        """True/False, or None when the node does not answer."""
        try:
            return self.psql(self.ports[name], "postgres", "SELECT pg_is_in_recovery()", timeout=3)[0][0] == "t"
        except (RuntimeError, subprocess.TimeoutExpired, IndexError):
            return None

    def formation_uri(self):
        out = self.autoctl("show", "uri", "--pgdata", self.pgdata("monitor"), "--formation", "default", timeout=10)
        return out.strip()

    def wait(self, probe, timeout, what, every=0.2):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.runs.items():
                if p.poll() is not None and name not in self.killed:
                    raise RuntimeError("pg_autoctl run %s exited (%s) while waiting for %s:\n%s"
                                       % (name, p.returncode, what, self.log(name)))
            v = probe()
            if v:
                return v
            time.sleep(every)
        raise TimeoutError("waited %d s for %s; states %s\n%s" % (timeout, what, self.states(),
                                                                 "\n".join(self.log(n)[-3000:] for n in self.runs)))

    def kill(self, name):
        """A machine that dies: SIGKILL `pg_autoctl run` of `name` and every process below it
        (its supervisor, its keeper, the postmaster and its backends), by PID, parents first,
        so nothing is restarted and no backend goes on answering."""
        p = self.runs[name]
        pids = descendants(p.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait(10)
        self.killed.add(name)

    def log(self, name):
        try:
            with open(os.path.join(self.dir, name + ".log")) as f:
                return "== %s ==\n%s" % (name, f.read())
        except OSError:
            return ""

    def close(self):
        """SIGTERM each `pg_autoctl run` (data nodes first; it stops its postgres, fast mode),
        bounded; whatever of it is still there after 30 s is SIGKILLed by PID."""
        for name in sorted(self.runs, key=lambda n: n == "monitor"):
            p = self.runs[name]
            if p.poll() is not None:
                continue
            tree = [(pid, started(pid)) for pid in descendants(p.pid)]
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                pass
            for pid, start in tree:
                if start is not None and started(pid) == start:  # the same process, not a reused PID
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
