#!/usr/bin/env python3
"""wss fan-out (issue 29): what TLS costs, three ways, beside plain ws. Not a test: prints figures.

    .venv/bin/python scripts/bench-tls.py [-n 10000] [--window 15] [--repeats 1] [--bin .build/release/ridepush]

Every way runs RidePush as `make run` does (SQLite file, JWT, the token in a first `auth`
frame) and `ridepush bench` with N subscribers (N/2 rides). CPU is counted for every server-side
process (RidePush, and nginx's master and workers where nginx is in front) over the same
window, read from /proc while the bench is measuring; CPU per delivered tick = that CPU over
the ticks delivered (every subscriber gets one tick a second). The bench's own CPU (the
clients' TLS) is printed apart: it is the load, not the server.
1. ws: plain RidePush;
2. wss, RidePush's own TLS (`--tls-cert/--tls-key`, libwebsockets on OpenSSL);
3. wss, nginx terminating TLS (deploy/nginx/ridepush.conf, two workers) in front of plain RidePush;
4. wss, nginx with kernel TLS (`ssl_conf_command Options KTLS`), only if this kernel offers the
   `tls` ULP (/proc/sys/net/ipv4/tcp_available_ulp) — else says so.
Every process started here is ended here, by PID; every wait is bounded."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
from test_deploy import render_site  # noqa: E402  (the same rendering of the shipped site file as the tests)
sys.path.insert(0, HERE)
from benchlib import cpu_seconds, jwt_secret, start_serve, stop  # noqa: E402

def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_of(pids):
    return sum(cpu_seconds(pid) for pid in pids)


def system_busy_seconds():
    """Every core's non-idle time since boot (/proc/stat): the whole machine, load generator included."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except OSError:
                pass
    return out


def ktls_offered():
    try:
        with open("/proc/sys/net/ipv4/tcp_available_ulp") as f:
            ulps = f.read().split()
    except OSError:
        ulps = []
    return "tls" in ulps, " ".join(ulps) or "(none)"


class RidePush:
    def __init__(self, bin_, tmp, secret, tls=None):
        store = os.path.join(tmp, "tls-bench-%d.db" % time.monotonic_ns())
        args = [bin_, "serve", "--port", "0", "--store", store, "--create-store", "--auth", "jwt", "--jwt-secret-file", secret,
                "--max-connections-per-ip", "1000000"]
        if tls:
            args += ["--tls-cert", tls[0], "--tls-key", tls[1]]
        self.proc, self.port = start_serve(args, timeout=60)

    def stop(self):
        stop(self.proc)


class Nginx:
    def __init__(self, tmp, upstream, tls_dir, ktls):
        self.dir = tempfile.mkdtemp(prefix="nginx-", dir=tmp)
        logs, temp = os.path.join(self.dir, "logs"), os.path.join(self.dir, "temp")
        os.makedirs(logs)
        os.makedirs(temp)
        self.https = free_port()
        site = render_site(upstream, self.https, free_port(), tls_dir, logs)
        if ktls:
            site = site.replace("ssl_protocols TLSv1.2 TLSv1.3;", "ssl_protocols TLSv1.2 TLSv1.3;\n    ssl_conf_command Options KTLS;", 1)
        with open(os.path.join(self.dir, "ridepush.conf"), "w") as f:
            f.write(site)
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write("""%(user)s
worker_processes 2;
worker_rlimit_nofile 19000;
pid %(d)s/nginx.pid;
error_log %(logs)s/error.log warn;
events { worker_connections 18000; }
http {
    client_body_temp_path %(temp)s/body; proxy_temp_path %(temp)s/proxy; fastcgi_temp_path %(temp)s/fastcgi;
    uwsgi_temp_path %(temp)s/uwsgi; scgi_temp_path %(temp)s/scgi;
    access_log off;
    include %(d)s/ridepush.conf;
}
""" % {"user": "user root;" if os.geteuid() == 0 else "", "d": self.dir, "logs": logs, "temp": temp})
        self.proc = subprocess.Popen(["nginx", "-p", self.dir, "-c", os.path.join(self.dir, "nginx.conf"), "-e",
                                      os.path.join(logs, "error.log"), "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        time.sleep(1)
        if self.proc.poll() is not None:
            raise RuntimeError("nginx did not start: %s" % open(os.path.join(logs, "error.log")).read()[-2000:])

    def pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def measure(args, url, pids_fn, token, ca=None):
    """Runs the bench; returns (CPU µs per delivered tick over every server-side pid, % of a core,
    the whole machine's CPU µs per delivered tick (the load generator's TLS included), the bench's JSON). The pids' CPU is sampled every 100 ms with the wall clock beside it, and
    read off at the bench's own window (window_start_ms, window_end_ms in its JSON)."""
    cmd = [args.bin, "bench", "--url", url, "-n", str(args.n), "--duration", str(args.window), "--ramp", "2000",
           "--connect-timeout", "120", "--sources", "64", "--token", token, "--auth-frame", "--json"]
    if ca:
        cmd += ["--ca", ca]
    samples, done = [], threading.Event()

    def sample():
        while not done.is_set():
            samples.append((time.time() * 1000, cpu_of(pids_fn()), system_busy_seconds()))
            done.wait(0.1)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=args.window + 400)
    finally:
        done.set()
        sampler.join(5)
    if not r.stdout.strip():
        raise RuntimeError("bench printed nothing (rc %s): %s" % (r.returncode, r.stderr[-2000:]))
    result = json.loads(r.stdout.strip().splitlines()[-1])
    t0, t1 = result["window_start_ms"], result["window_end_ms"]
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if len(inside) < 2:
        raise RuntimeError("no CPU samples inside the window")
    (a_t, a_cpu, a_sys), (b_t, b_cpu, b_sys) = inside[0], inside[-1]
    secs = (b_t - a_t) / 1000
    # Every open subscriber gets one tick a second (missed ticks are printed beside it).
    delivered = result["open_at_end"] * secs
    cpu, whole = b_cpu - a_cpu, b_sys - a_sys
    per = (lambda c: c / delivered * 1e6 if delivered else None)
    return per(cpu), cpu / secs * 100, per(whole), result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--window", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--bin", default=os.environ.get("RIDEPUSH_BIN", os.path.join(ROOT, ".build", "release", "ridepush")))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ridepush-tls-")
    secret = jwt_secret(tmp)
    tls_dir = os.path.join(tmp, "tls")
    os.makedirs(tls_dir)
    cert, key = os.path.join(tls_dir, "fullchain.pem"), os.path.join(tls_dir, "privkey.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
    token = subprocess.run([args.bin, "token", "--control", "--ops", "--ttl", "6h", "--jwt-secret-file", secret],
                           stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    offered, ulps = ktls_offered()
    ways = ["ws", "wss-ridepush", "wss-nginx"] + (["wss-nginx-ktls"] if offered else [])
    print("# %s UTC, %s, %d cores, %s; N=%d window=%ds; OpenSSL %s" % (
        time.strftime("%Y-%m-%d %H:%M"), " ".join(os.uname()[0:3:2]), os.cpu_count(),
        subprocess.run([args.bin, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip(), args.n, args.window,
        subprocess.run(["openssl", "version"], stdout=subprocess.PIPE, text=True).stdout.split()[1]), flush=True)
    if not offered:
        print("# kTLS: not offered by this kernel (tcp_available_ulp: %s), so the kTLS row is not measured" % ulps)
    rows, wholes = {}, {}
    for k in range(args.repeats):
        for way in ways:
            rp = RidePush(args.bin, tmp, secret, (cert, key) if way == "wss-ridepush" else None)
            ng = None
            try:
                if way.startswith("wss-nginx"):
                    ng = Nginx(tmp, rp.port, tls_dir, way.endswith("ktls"))
                    url, pids = "wss://127.0.0.1:%d/ws" % ng.https, lambda: [rp.proc.pid] + ng.pids()
                elif way == "wss-ridepush":
                    url, pids = "wss://127.0.0.1:%d/ws" % rp.port, lambda: [rp.proc.pid]
                else:
                    url, pids = "ws://127.0.0.1:%d/ws" % rp.port, lambda: [rp.proc.pid]
                us, pct, whole, r = measure(args, url, pids, token, None if way == "ws" else cert)
                rows.setdefault(way, []).append(us)
                wholes.setdefault(way, []).append(whole)
                print("%-15s connected %5d failed %4d missed %d  p50/p99 %6.1f / %6.1f ms  server-side CPU/tick %.2f µs (%.0f %% of a core)  whole machine %.2f µs/tick  bench CPU %.0f %%"
                      % (way, r["connected"], r["failed"], r["missed_in_window"], r["latency_ms"]["p50"] or 0,
                         r["latency_ms"]["p99"] or 0, us or 0, pct, whole or 0, r["bench_cpu_percent"]), flush=True)
            finally:
                if ng:
                    ng.stop()
                rp.stop()
    for title, table in (("server-side CPU (RidePush + nginx)", rows), ("whole-machine CPU (load generator included)", wholes)):
        base = table.get("ws")
        print("## %s per delivered tick, as a ratio to plain ws (mean over %d repeat(s))" % (title, args.repeats))
        for way, v in table.items():
            if base and all(base) and all(v):
                ratios = [a / b for a, b in zip(v, base)]
                print("%-15s %.2f µs  %.2f× ws (%.2f–%.2f)" % (way, sum(v) / len(v), sum(ratios) / len(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
