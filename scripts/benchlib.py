"""What the bench scripts share: a process's CPU and memory from /proc, the load average, a
`ridepush serve` started on a free port and read back from its 'serving' line, and /metrics'
counters and histograms."""
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request

SERVING = re.compile(r"serving (https?)://127.0.0.1:(\d+)/")


def cpu_seconds(pid):
    """utime + stime of every thread of `pid` (0 once it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def start_serve(args, timeout=120):
    """Starts `args` (a `ridepush serve … --port 0` command line); returns (process, port). Its
    output is drained in the background so it never blocks on a full pipe."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("ridepush exited: rc %s" % proc.poll())
        m = SERVING.search(line)
        if m:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("no serving line in %d s" % timeout)
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    return proc, int(m.group(2))


def stop(proc, timeout=30):
    """SIGTERM, then SIGKILL after `timeout` seconds; only the process this script started."""
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def metrics(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        return r.read().decode()


def counter(text, name):
    m = re.search(r"^%s (\d+(?:\.\d+)?)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else 0.0


def buckets(text, name):
    return [(float("inf") if le == "+Inf" else float(le), float(n))
            for le, n in re.findall(r'^%s_bucket\{le="([^"]+)"\} (\d+)$' % re.escape(name), text, re.M)]


def quantile(before, after, q):
    """The q-quantile (upper bucket bound, ms) of the observations between two scrapes."""
    delta = [(le, a - b) for (le, a), (_, b) in zip(after, before)]
    total = delta[-1][1] if delta else 0
    if total <= 0:
        return None
    for le, n in delta:
        if n >= q * total:
            return le * 1000
    return None


def jwt_secret(folder):
    """A fresh HS256 secret in `folder` (mode 600), as `make run` keeps one: its path."""
    path = os.path.join(folder, "secret")
    with open(path, "w") as f:
        f.write(os.urandom(32).hex())
    os.chmod(path, 0o600)
    return path


def ops_token(binary, secret, ttl="2h"):
    """An operator control token from `ridepush token`, signed with `secret`."""
    return subprocess.run([binary, "token", "--control", "--ops", "--ttl", ttl, "--jwt-secret-file", secret],
                          stdout=subprocess.PIPE, text=True, check=True, timeout=30).stdout.strip()
