"""The failover scenario shared by tests/test_failover.py (the standby promoted by hand) and
tests/test_auto_failover.py (promoted by pg_auto_failover): two `ridepush` nodes on a multi-host
URI, clients walking rides through start/pause/resume/end on both nodes and retrying by id,
watchers of a riding ride's ticks on each node, both nodes' /healthz polled; the primary dies
mid-load (`fail_over`, the caller's), then the checks of issue 39: every acknowledged
transition in the new primary's journal once, a webhook delivered for each, ticks with no gap
over 2 s, /healthz ok again within 30 s of the promotion, a pause on node A pushed by node B."""
import itertools
import threading
import time

from rp import Client, Server
from test_webhooks import SECRET as WEBHOOK_SECRET, Receiver

FAST = ("--control-rate", "100000", "--max-subscriptions", "256")
STATE_AFTER = {"start": "riding", "pause": "paused", "resume": "riding", "end": "ended"}
WALK = ("start", "pause", "resume", "end")
WORKERS = 6
ASK_LIMIT = 45.0           # one request's retries, all together


class Walker(threading.Thread):
    """One client: walks rides start → pause → resume → end, alternating nodes ride by ride,
    each request retried with the same id until it is answered with a `state` (or refused,
    or ASK_LIMIT passes). Records what it was told, with when."""

    def __init__(self, n, nodes, stop, log):
        super().__init__(daemon=True)
        self.n, self.nodes, self.stop, self.log = n, nodes, stop, log
        self.acked = []      # (ride, kind, monotonic time of the reply)
        self.refused = []    # (ride, kind, reply)
        self.unanswered = []
        self.retries = 0
        self.clients = {}

    def client(self, node):
        if node not in self.clients:
            self.clients[node] = Client(node.ws)
        return self.clients[node]

    def ask(self, node, msg):
        deadline = time.monotonic() + ASK_LIMIT
        while time.monotonic() < deadline:
            try:
                reply = self.client(node).request(msg, timeout=8)
            except Exception as e:  # the socket broke or no answer: same id again, new socket
                self.log.append("walker %d %s %s: %r" % (self.n, msg["type"], msg["id"], e))
                c = self.clients.pop(node, None)
                if c:
                    try:
                        c.close()
                    except Exception:
                        pass
                self.retries += 1
                time.sleep(0.2)
                continue
            if reply.get("type") == "error" and reply.get("code") == "unavailable":
                self.retries += 1
                time.sleep(0.2)
                continue
            return reply
        return None

    def run(self):
        for k in itertools.count():
            if self.stop.is_set():
                break
            ride = "fo-%d-%d" % (self.n, k)
            node = self.nodes[(self.n + k) % 2]
            for kind in WALK:
                msg = {"type": kind, "id": "%s-%s" % (ride, kind), "ride": ride}
                if kind == "end":
                    msg["distance"] = 100
                reply = self.ask(node, msg)
                if reply is None:
                    self.unanswered.append((ride, kind))
                    break
                if reply.get("type") == "state" and reply.get("state") == STATE_AFTER[kind]:
                    self.acked.append((ride, kind, time.monotonic()))
                else:
                    self.refused.append((ride, kind, reply))
                    break
        for c in self.clients.values():
            try:
                c.close()
            except Exception:
                pass


class TickWatch(threading.Thread):
    """A watcher of one riding ride on one node: the arrival time of every tick."""

    def __init__(self, node, ride, stop):
        super().__init__(daemon=True)
        self.node, self.ride, self.stop = node, ride, stop
        self.arrivals = []
        self.drops = 0

    def run(self):
        c = None
        while not self.stop.is_set():
            try:
                if c is None:
                    c = Client(self.node.ws)
                    c.send({"type": "subscribe", "id": "w-%f" % time.monotonic(), "ride": self.ride})
                m = c.recv(timeout=1.0)
                if m.get("type") == "tick" and m.get("ride") == self.ride:
                    self.arrivals.append(time.monotonic())
            except TimeoutError:
                continue
            except Exception:
                self.drops += 1
                c = None
                time.sleep(0.1)
        if c:
            c.close()

    def max_gap(self, since, until):
        ts = [t for t in self.arrivals if since <= t <= until]
        if len(ts) < 2:
            return float("inf")
        return max(b - a for a, b in zip(ts, ts[1:]))


class HealthWatch(threading.Thread):
    """Both nodes' /healthz every 200 ms: (time, node index, HTTP status, store word)."""

    def __init__(self, nodes, stop):
        super().__init__(daemon=True)
        self.nodes, self.stop = nodes, stop
        self.samples = []

    def run(self):
        while not self.stop.is_set():
            for i, n in enumerate(self.nodes):
                try:
                    status, body, _ = n.get("/healthz")
                    self.samples.append((time.monotonic(), i, status, body.get("store") if isinstance(body, dict) else None))
                except Exception as e:
                    self.samples.append((time.monotonic(), i, None, repr(e)))
            time.sleep(0.2)

    def both_ok_after(self, t):
        """The first time after `t` from which both nodes answered 200 at their next poll."""
        ok = {}
        for when, i, status, _ in self.samples:
            if when < t:
                continue
            ok[i] = when if status == 200 else None
            if len(ok) == 2 and all(v is not None for v in ok.values()):
                return max(ok.values())
        return None


def run_failover(uri, banner, fail_over, query, tmp_path, load_before_kill=6.0, load_after_promotion=12.0, label="failover"):
    """Runs the scenario on the store `uri` and asserts what issue 39 asks. `banner`: what the
    store's start line must name (both hosts); `fail_over()`: kills the primary and returns
    (monotonic time of the kill, monotonic time the new primary accepts writes);
    `query(sql)`: rows from the new primary. Returns the figures printed."""
    rx = Receiver()
    secret = tmp_path / "webhook.secret"
    secret.write_text(WEBHOOK_SECRET + "\n")
    hooks = ("--webhook", rx.url, "--webhook-secret-file", str(secret))
    a = Server(*FAST, *hooks, store=uri).start()
    b = Server(*FAST, *hooks, store=uri).start()
    nodes = (a, b)
    stop_load, stop_watch = threading.Event(), threading.Event()
    log = []
    threads = []
    try:
        # The store's banner names both hosts (nothing of ours cut the URI at a comma).
        assert any(banner in l for l in a.lines), (banner, a.lines[:3])
        with Client(a.ws) as c:
            assert c.request({"type": "start", "id": "tick-ride", "ride": "tick-ride"})["state"] == "riding"
        watches = [TickWatch(n, "tick-ride", stop_watch) for n in nodes]
        health = HealthWatch(nodes, stop_watch)
        walkers = [Walker(i, nodes, stop_load, log) for i in range(WORKERS)]
        threads = watches + [health] + walkers
        for t in threads:
            t.start()
        began = time.monotonic()

        time.sleep(load_before_kill)
        killed, promoted = fail_over()
        time.sleep(load_after_promotion)
        stop_load.set()
        for w in walkers:
            w.join(ASK_LIMIT + 10)
            assert not w.is_alive(), "walker %d still asking" % w.n

        # A pause on node A reaches node B's watcher after the failover (B's listener is
        # subscribed on the new primary, or its catch-up read found it).
        with Client(a.ws) as ca, Client(b.ws) as wb:
            assert ca.request({"type": "start", "id": "x-start", "ride": "x-cross"}, timeout=10)["state"] == "riding"
            assert wb.request({"type": "subscribe", "id": "x-sub", "ride": "x-cross"}, timeout=10)["state"] == "riding"
            asked = time.monotonic()
            assert ca.request({"type": "pause", "id": "x-pause", "ride": "x-cross"}, timeout=10)["state"] == "paused"
            pushed = wb.wait_for(lambda m: m.get("type") == "state" and m.get("state") == "paused", 5)
            cross_node = time.monotonic() - asked
            assert pushed["ride"] == "x-cross"

        stop_watch.set()
        for t in watches + [health]:
            t.join(10)
        ended = time.monotonic()

        acked = [x for w in walkers for x in w.acked]
        refused = [x for w in walkers for x in w.refused]
        unanswered = [x for w in walkers for x in w.unanswered]
        journal = {}
        for ride, kind, n in query("SELECT ride_id, kind, count(*) FROM ridepush.journal GROUP BY 1, 2"):
            journal[(ride, kind)] = int(n)
        lost = [(r, k) for r, k, _ in acked if journal.get((r, k), 0) == 0]
        doubled = [key for key, n in journal.items() if n > 1]
        both_ok = health.both_ok_after(promoted)
        store_words = sorted({s[3] for s in health.samples if s[2] == 503 and isinstance(s[3], str)})
        gaps = [w.max_gap(began, ended) for w in watches]
        before = sum(1 for _, _, t in acked if t < killed)
        print("\n%s: %d transitions acknowledged (%d before the kill, %d after), lost %d, doubled %d, "
              "refused %d, unanswered %d, retries %d" % (label, len(acked), before, len(acked) - before, len(lost), len(doubled),
                                                         len(refused), len(unanswered), sum(w.retries for w in walkers)))
        print("%s: primary killed, promoted %.1f s later; both /healthz ok %.1f s after the promotion; "
              "store said %s meanwhile" % (label, promoted - killed, (both_ok - promoted) if both_ok else -1, store_words))
        print("%s: largest tick gap A %.2f s, B %.2f s (watcher reconnects %d, %d); cross-node pause pushed in %.2f s"
              % (label, gaps[0], gaps[1], watches[0].drops, watches[1].drops, cross_node))
        # How the groups caught by the kill between COMMIT and its answer were settled.
        for name, n in zip("AB", nodes):
            status, text, _ = n.get("/metrics")
            settled = [l for l in text.splitlines() if l.startswith("ridepush_store_lost_commits_total")]
            assert status == 200 and len(settled) == 3, settled
            print("%s: node %s %s" % (label, name, ", ".join(l.split("{")[1] for l in settled)))

        # Webhooks: an event delivered for every acknowledged transition (bounded wait; the
        # sender retries from 1 s, doubling, so a delivery cut by the kill is resent soon).
        types = {"start": "ride.started", "pause": "ride.paused", "resume": "ride.resumed", "end": "ride.ended"}
        wanted = {(r, types[k]) for r, k, _ in acked}
        def undelivered():
            got = {(e["ride"], e["type"]) for e in rx.delivered()}
            return wanted - got
        deadline = time.monotonic() + 60
        while undelivered() and time.monotonic() < deadline:
            time.sleep(0.2)
        print("%s: webhooks delivered for %d of %d acknowledged transitions, all verified: %s"
              % (label, len(wanted) - len(undelivered()), len(wanted), all(e["verified"] for e in rx.log)))
        missing = sorted(undelivered())
        if missing:
            rides = ",".join("'%s'" % r for r in sorted({r for r, _ in missing})[:5])
            print("%s: outbox rows of rides with undelivered events:" % label,
                  query("SELECT seq, ride, type, attempts, next_attempt_at - (extract(epoch from now()) * 1000)::bigint, "
                        "last_result, lease_owner, lease_until - (extract(epoch from now()) * 1000)::bigint "
                        "FROM ridepush.webhook_outbox WHERE ride IN (%s) ORDER BY seq" % rides))
        assert not missing, ("acknowledged without a delivered webhook", missing[:10])
        assert all(e["verified"] for e in rx.log)

        assert before > 0 and len(acked) - before > 0, "load on both sides of the failover"
        assert lost == [], ("acknowledged but not in the promoted database", lost[:10])
        assert doubled == [], ("applied twice", doubled[:10])
        assert refused == [], ("a valid request was refused", refused[:5])
        assert unanswered == [], ("never answered within %ds" % ASK_LIMIT, unanswered[:5], log[-5:])
        assert both_ok is not None and both_ok - promoted <= 30, ("/healthz not ok within 30 s of the promotion", health.samples[-6:])
        assert "failing over" in store_words, store_words
        assert all(g <= 2.0 for g in gaps), ("a tick gap over 2 s", gaps)
        assert cross_node <= 5
        return {"acknowledged": len(acked), "before_kill": before, "lost": len(lost), "doubled": len(doubled),
                "promoted_after": promoted - killed, "healthz_ok_after": both_ok - promoted, "max_tick_gap": max(gaps)}
    finally:
        stop_load.set()
        stop_watch.set()
        for n in nodes:
            n.stop()
        for t in threads:
            t.join(5)
        rx.close()
