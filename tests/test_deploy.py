"""deploy/: the systemd unit, install.sh, the container build stage and nginx in front of
a real RidePush. Everything runs for real on this machine except the container image
itself (no Docker engine here): its build stage runs as deploy/docker-build-stage.sh and
its runtime package list is checked against Debian's archive. Every wait is bounded."""
import hashlib
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import warnings

import pytest
from websockets.exceptions import ConnectionClosed

import rp

ROOT = rp.ROOT
DEPLOY = os.path.join(ROOT, "deploy")
UNIT = os.path.join(DEPLOY, "ridepush.service")
INSTALL = os.path.join(DEPLOY, "install.sh")
BUILD_STAGE = os.path.join(DEPLOY, "docker-build-stage.sh")
HEALTHCHECK = os.path.join(DEPLOY, "healthcheck.sh")
DOCKERFILE = os.path.join(DEPLOY, "Dockerfile")
SITE = os.path.join(DEPLOY, "nginx", "ridepush.conf")


def tool(name, *fallbacks):
    """Path of a required tool; a clear failure (not a skip) when it is missing, since
    `make deps-test` installs all of them."""
    for cand in (shutil.which(name),) + fallbacks:
        if cand and os.access(cand, os.X_OK):
            return cand
    pytest.fail("%s is missing: apt-get install it (make deps-test)" % name)


def run(cmd, timeout=60, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def have_binary():
    return os.path.isfile(rp.BIN) and os.access(rp.BIN, os.X_OK)


def binary_or_stub(tmp_path):
    """A private copy of the real binary when built (so a rebuild during the test cannot
    change it under us), else a stub: install/unit checks only need an executable file."""
    if have_binary():
        copy = tmp_path / "ridepush-under-test"
        shutil.copy2(rp.BIN, copy)
        return str(copy)
    stub = tmp_path / "ridepush-stub"
    stub.write_text("#!/bin/sh\necho stub\n")
    stub.chmod(0o755)
    return str(stub)


def tree(root):
    """{relative path: (mode, sha256, mtime_ns)} of every file under root."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            st = os.stat(p)
            with open(p, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            out[os.path.relpath(p, root)] = (st.st_mode & 0o7777, digest, st.st_mtime_ns)
    return out


def public_files():
    src = os.path.join(ROOT, "public")
    return sorted(os.path.relpath(os.path.join(d, f), src)
                  for d, _, fs in os.walk(src) for f in fs)


def install(prefix, binary, check=True):
    r = run(["bash", INSTALL, "--prefix", str(prefix), "--binary", binary])
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


# ---------------------------------------------------------------------------------------
# install.sh
# ---------------------------------------------------------------------------------------

def test_install_dry_run_exact_files_and_idempotent(tmp_path):
    root = tmp_path / "root"
    binary = binary_or_stub(tmp_path)
    install(root, binary)
    files = tree(root)
    expected = {
        "usr/local/bin/ridepush": 0o755,
        "etc/ridepush/ridepush.env": 0o644,
        "etc/ridepush/jwt-secret": 0o600,
        "etc/systemd/system/ridepush.service": 0o644,
    }
    for rel in public_files():
        expected["usr/local/share/ridepush/public/" + rel] = 0o644
    assert sorted(files) == sorted(expected), "installed files differ from the expected set"
    for rel, mode in expected.items():
        assert files[rel][0] == mode, "%s has mode %o, want %o" % (rel, files[rel][0], mode)

    # What was installed is what ships in the repository, byte for byte.
    def same(rel, src):
        with open(src, "rb") as fh:
            return files[rel][1] == hashlib.sha256(fh.read()).hexdigest()
    assert same("usr/local/bin/ridepush", binary)
    assert same("etc/systemd/system/ridepush.service", UNIT)
    assert same("etc/ridepush/ridepush.env", os.path.join(DEPLOY, "ridepush.env"))
    for rel in public_files():
        assert same("usr/local/share/ridepush/public/" + rel, os.path.join(ROOT, "public", rel))
    secret = (root / "etc/ridepush/jwt-secret").read_text()
    assert len(secret) >= 40 and "\n" not in secret

    # A second run changes nothing at all: same files, bytes, modes and mtimes.
    r = install(root, binary)
    assert "already up to date" in r.stdout, r.stdout
    assert tree(root) == files


def test_install_upgrade_keeps_config_backs_up_store_and_prunes(tmp_path):
    root = tmp_path / "root"
    old = tmp_path / "old"
    old.write_text("#!/bin/sh\necho old\n")
    old.chmod(0o755)
    new = tmp_path / "new"
    new.write_text("#!/bin/sh\necho new\n")
    new.chmod(0o755)
    install(root, str(old))
    secret = (root / "etc/ridepush/jwt-secret").read_text()

    # The operator edits the settings; the store holds data; an old asset lingers.
    env = root / "etc/ridepush/ridepush.env"
    env.write_text(env.read_text() + "RIDEPUSH_THREADS=4\n")
    state = root / "var/lib/ridepush"
    state.mkdir(parents=True)
    sqlite3 = tool("sqlite3")
    r = run([sqlite3, str(state / "ridepush.db"),
             "PRAGMA journal_mode=WAL; CREATE TABLE rides(id TEXT); INSERT INTO rides VALUES('r-42');"])
    assert r.returncode == 0, r.stderr
    stale = root / "usr/local/share/ridepush/public/old-asset.js"
    stale.write_text("stale")

    r = install(root, str(new))
    bindir = root / "usr/local/bin"
    assert (bindir / "ridepush").read_text() == new.read_text()
    assert (bindir / "ridepush.previous").read_text() == old.read_text(), "no rollback binary"
    assert "RIDEPUSH_THREADS=4" in env.read_text(), "operator settings overwritten"
    assert "kept your /etc/ridepush/ridepush.env" in r.stdout
    assert (root / "etc/ridepush/jwt-secret").read_text() == secret, "secret regenerated"
    assert not stale.exists(), "a file no longer in public/ was left installed"
    backups = list((state / "backups").glob("ridepush-*-before-upgrade.db"))
    assert len(backups) == 1, list(state.rglob("*"))
    r = run([sqlite3, str(backups[0]), "SELECT id FROM rides"])
    assert r.stdout.strip() == "r-42", r.stdout + r.stderr

    # Same binary again: nothing to back up, nothing changes.
    before = tree(root)
    r = install(root, str(new))
    assert "already up to date" in r.stdout
    assert tree(root) == before


def test_install_refuses_unknown_arguments(tmp_path):
    r = run(["bash", INSTALL, "--prefix", str(tmp_path), "--frobnicate"])
    assert r.returncode == 2 and "unknown argument" in r.stderr


# ---------------------------------------------------------------------------------------
# systemd
# ---------------------------------------------------------------------------------------

@pytest.fixture
def unit_root(tmp_path):
    """A root with the unit installed by install.sh, plus this machine's own systemd units
    (sysinit.target, network-online.target, …) so `--root` verification can resolve them."""
    root = tmp_path / "root"
    install(root, binary_or_stub(tmp_path))
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    return root


def test_unit_verifies_clean(unit_root):
    sa = tool("systemd-analyze")
    unit = unit_root / "etc/systemd/system/ridepush.service"
    r = run([sa, "verify", "--root=%s" % unit_root, str(unit)])
    # Unknown keys and bad values are only warnings (exit 0), so the output must be empty.
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr

    # The check is real: ExecStart is resolved inside the root, so without the installed
    # binary verification fails.
    os.unlink(unit_root / "usr/local/bin/ridepush")
    r = run([sa, "verify", "--root=%s" % unit_root, str(unit)])
    assert r.returncode != 0 and "/usr/local/bin/ridepush" in r.stdout + r.stderr


def test_unit_security_exposure_is_low(unit_root):
    sa = tool("systemd-analyze")
    unit = unit_root / "etc/systemd/system/ridepush.service"
    # --threshold is in tenths: fail above 2.0 (systemd rates ≤ 2.0 "OK").
    r = run([sa, "security", "--offline=yes", "--root=%s" % unit_root, "--threshold=20", str(unit)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr


def unit_settings(path):
    settings = {}
    section = None
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        settings.setdefault((section, key), []).append(value)
    return settings


def test_unit_has_what_the_issue_asks():
    s = unit_settings(UNIT)

    def one(key, section="Service"):
        values = s.get((section, key))
        assert values, "%s= missing" % key
        return values[-1]
    assert one("User") == "ridepush" and one("StateDirectory") == "ridepush"
    assert one("LimitNOFILE") == "1048576"
    assert one("Restart") == "on-failure"
    assert one("KillSignal") == "SIGTERM"
    # The drain (RIDEPUSH_DRAIN_SECONDS, default 10) closes within drain + 5 s: 10 s to spare.
    assert int(one("TimeoutStopSec").rstrip("s")) == 10 + 10
    assert one("EnvironmentFile") == "/etc/ridepush/ridepush.env"
    for key in ("NoNewPrivileges", "PrivateTmp"):
        assert one(key) == "yes"
    assert one("ProtectSystem") == "strict" and one("ProtectHome") == "yes"
    assert one("CapabilityBoundingSet") == "", "capabilities must be dropped"
    assert ("Service", "AmbientCapabilities") not in s, "no capabilities for a high port"
    assert one("ExecStart").startswith("/usr/local/bin/ridepush serve")
    assert one("WantedBy", "Install") == "multi-user.target"
    assert one("ExecStart").endswith(" $RIDEPUSH_SERVE_ARGS")
    # Everything else comes from the env file, which is written for this unit's paths.
    env = env_file()
    assert env["RIDEPUSH_STORE"].startswith("/var/lib/ridepush/")
    assert env["RIDEPUSH_PUBLIC"] == "/usr/local/share/ridepush/public"
    assert env["RIDEPUSH_HOST"] == "127.0.0.1"
    assert "RIDEPUSH_JWT_SECRET" not in env


def env_file():
    return {k: v.strip() for k, v in (line.split("=", 1) for line in open(os.path.join(DEPLOY, "ridepush.env"))
                                        if re.match(r"^[A-Z_]+=", line))}


def test_env_file_is_accepted_by_the_server(tmp_path):
    """The shipped settings start the real server: RIDEPUSH_SERVE_ARGS (spliced into
    ExecStart) and every RIDEPUSH_* value except the machine paths, which point into tmp."""
    env = env_file()
    env.update(RIDEPUSH_STORE=str(tmp_path / "ridepush.db"), RIDEPUSH_PUBLIC=os.path.join(ROOT, "public"),
               RIDEPUSH_JWT_SECRET="x" * 32)
    args = env.pop("RIDEPUSH_SERVE_ARGS").split()
    srv = rp.Server(*args, store=str(tmp_path / "ridepush.db"), auth=None, env=env)
    with srv:
        status, health, _ = srv.get("/healthz")
        assert status == 200 and isinstance(health, dict)
    assert srv.proc.returncode == 0, "\n".join(srv.lines[-20:])


def test_server_runs_without_writable_executable_memory(tmp_path, monkeypatch):
    """MemoryDenyWriteExecute=yes kills a process that maps W+X pages; run the real server
    under the kernel's equivalent (prctl PR_SET_MDWE, Linux 6.3+) to prove it needs none."""
    probe = run([sys.executable, "-c",
                 "import ctypes,sys; sys.exit(ctypes.CDLL(None).prctl(65, 1, 0, 0, 0) != 0)"])
    if probe.returncode != 0:
        pytest.skip("kernel without PR_SET_MDWE")
    wrapper = tmp_path / "ridepush-mdwe"
    wrapper.write_text(
        "#!%s\nimport ctypes, os, sys\n"
        "assert ctypes.CDLL(None).prctl(65, 1, 0, 0, 0) == 0  # PR_SET_MDWE, REFUSE_EXEC_GAIN\n"
        "os.execv(%r, [%r] + sys.argv[1:])\n" % (sys.executable, os.path.abspath(rp.BIN), rp.BIN))
    wrapper.chmod(0o755)
    monkeypatch.setattr(rp, "BIN", str(wrapper))
    with rp.Server(auth="none") as srv:
        with rp.Client(srv.ws) as c:
            assert c.request({"type": "start", "ride": "r-mdwe"})["type"] == "state"
            assert c.request({"type": "subscribe", "ride": "r-mdwe"})["type"] == "state"
            c.wait_for(lambda m: m.get("type") == "tick", timeout=3)
        status, _, _ = srv.get("/healthz")
        assert status == 200
    assert srv.proc.returncode == 0, "\n".join(srv.lines[-20:])


# ---------------------------------------------------------------------------------------
# container image: what can be checked without a Docker engine
# ---------------------------------------------------------------------------------------

def dockerfile():
    text = open(DOCKERFILE).read()
    # Join continuation lines, drop comments: one instruction per entry.
    text = re.sub(r"\\\n", " ", text)
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def docker_arg(name):
    for ins in dockerfile():
        m = re.match(r'ARG %s=("?)(.*)\1$' % name, ins)
        if m:
            return m.group(2)
    raise AssertionError("ARG %s has no default in the Dockerfile" % name)


def runtime_packages():
    return docker_arg("RUNTIME_PACKAGES").split()


def test_dockerfile_shape():
    ins = dockerfile()
    froms = [i for i in ins if i.startswith("FROM ")]
    assert len(froms) == 2, froms
    assert froms[0] == "FROM ${SWIFT_IMAGE} AS build"
    assert re.match(r"swift:6\.\d+(\.\d+)?-bookworm$", docker_arg("SWIFT_IMAGE"))
    assert froms[1] == "FROM debian:bookworm-slim"
    runtime = ins[ins.index(froms[1]):]
    build = ins[ins.index(froms[0]):ins.index(froms[1])]
    assert any("docker-build-stage.sh" in i and i.startswith("RUN ") for i in build)
    assert any("apt-get install" in i and "${RUNTIME_PACKAGES}" in i and "--no-install-recommends" in i
               for i in runtime)
    user = [i for i in runtime if i.startswith("USER ")]
    assert user and user[-1].split()[1].split(":")[0] not in ("0", "root")
    assert "STOPSIGNAL SIGTERM" in runtime
    health = [i for i in runtime if i.startswith("HEALTHCHECK ")]
    assert health and '"/usr/local/lib/ridepush/healthcheck"' in health[0]
    volume = [i for i in runtime if i.startswith("VOLUME ")]
    assert volume and "/var/lib/ridepush" in volume[0]
    assert any("RIDEPUSH_STORE=/var/lib/ridepush/" in i for i in runtime if i.startswith("ENV "))
    # Every COPY source from the build context exists in the repository.
    for i in build:
        if i.startswith("COPY ") and "--from" not in i:
            for src in i.split()[1:-1]:
                assert os.path.exists(os.path.join(ROOT, src)), src
    # The build-stage script's own default list is the Dockerfile's (used outside Docker).
    m = re.search(r'^RUNTIME_PACKAGES="([^"]*)"', open(BUILD_STAGE).read(), re.M)
    assert m and m.group(1).split() == runtime_packages()


def test_docker_build_context_is_a_complete_package(tmp_path):
    """Copy exactly what the build stage COPYs into a fresh directory and let SwiftPM load
    it: a missing directory (a new target, Tests/) would otherwise only show up in a real
    `docker build`."""
    swift = tool("swift", "/opt/swift/usr/bin/swift")
    ins = dockerfile()
    build = ins[:[i for i, x in enumerate(ins) if x.startswith("FROM debian")][0]]
    ctx = tmp_path / "src"
    ctx.mkdir()
    copies = 0
    for i in build:
        if not i.startswith("COPY ") or "--from" in i:
            continue
        *srcs, dest = i.split()[1:]
        for src in srcs:
            path = os.path.join(ROOT, src)
            if os.path.isdir(path):   # COPY dir dest: the directory's contents into dest
                shutil.copytree(path, ctx / dest, dirs_exist_ok=True)
            else:
                target = ctx / dest / os.path.basename(src) if dest.endswith("/") else ctx / dest
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
            copies += 1
    assert copies >= 4
    r = run([swift, "package", "describe", "--scratch-path", str(tmp_path / "scratch")], cwd=ctx)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert os.access(ctx / "deploy/docker-build-stage.sh", os.X_OK)
    assert (ctx / "public/index.html").exists()


def test_runtime_packages_exist_in_debian():
    apt_cache = tool("apt-cache")
    assert open("/etc/os-release").read().count('VERSION_CODENAME=bookworm') == 1, \
        "this check reads the local apt lists, which must be Debian 12 like the image"
    pkgs = runtime_packages()
    assert {"libwebsockets17", "libssl3", "libsqlite3-0", "libcap2"} <= set(pkgs)
    for pkg in pkgs:
        r = run([apt_cache, "show", "--no-all-versions", pkg])
        assert r.returncode == 0 and ("Package: %s" % pkg) in r.stdout, "%s: %s" % (pkg, r.stderr)
        r = run([apt_cache, "policy", pkg])
        m = re.search(r"Candidate: (\S+)", r.stdout)
        assert m and m.group(1) != "(none)", "%s has no installable version: %s" % (pkg, r.stdout)


def test_build_stage_script_stages_and_checks_libraries(tmp_path):
    """The Dockerfile's build stage minus the release build (minutes of CPU): stage the
    debug binary and check its shared libraries against the runtime package list."""
    out = tmp_path / "staging"
    pkgs = " ".join(runtime_packages())
    binary = tmp_path / "ridepush-under-test"
    shutil.copy2(rp.BIN, binary)
    r = run(["bash", BUILD_STAGE, "--binary", str(binary), "--out", str(out),
             "--allow-swift-runtime", "--runtime-packages", pkgs])
    assert r.returncode == 0, r.stdout + r.stderr
    staged = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs)
    assert staged == sorted(["usr/local/bin/ridepush", "usr/local/lib/ridepush/healthcheck"] +
                            ["usr/local/share/ridepush/public/" + p for p in public_files()])
    assert os.access(out / "usr/local/lib/ridepush/healthcheck", os.X_OK)
    assert "libwebsockets.so.17: libwebsockets17" in r.stdout
    assert "libsqlite3.so.0: libsqlite3-0" in r.stdout
    assert re.search(r"lib(crypto|ssl)\.so\.3: libssl3", r.stdout)
    assert "ld-linux-x86-64.so.2: libc6" in r.stdout or "x86_64" not in os.uname().machine

    # Without libwebsockets17 in the list, the build stage must fail.
    r = run(["bash", BUILD_STAGE, "--binary", str(binary), "--out", str(tmp_path / "s2"),
             "--allow-swift-runtime", "--runtime-packages", "libssl3 libsqlite3-0"])
    assert r.returncode == 1 and "NOT in the runtime package list" in r.stdout


@pytest.mark.skipif(os.environ.get("RIDEPUSH_DEPLOY_RELEASE") != "1",
                    reason="full release build of the image's build stage: set RIDEPUSH_DEPLOY_RELEASE=1")
def test_build_stage_full_release_build(tmp_path):
    """The build stage exactly as `docker build` runs it: a release build with the Swift
    runtime linked statically, then the library check with no exemption for the toolchain.
    Opt-in: it is a second, release, build of the whole package (about 30 s of compiling
    on 2 idle cores, several minutes on a busy machine)."""
    out = tmp_path / "staging"
    r = run(["bash", BUILD_STAGE, "--out", str(out), "--scratch-path", str(tmp_path / "build")], timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "runtime dependency check passed" in r.stdout and "Swift toolchain" not in r.stdout
    binary = out / "usr/local/bin/ridepush"
    r = run([str(binary), "serve", "--help"])
    assert r.returncode == 0 and "--jwt-secret-file" in r.stdout + r.stderr


def test_healthcheck_script_against_real_server():
    with rp.Server(auth="none") as srv:
        r = run(["bash", HEALTHCHECK], timeout=10,
                 env=dict(os.environ, RIDEPUSH_HOST="0.0.0.0", RIDEPUSH_PORT=str(srv.port)))
        assert r.returncode == 0 and r.stdout.startswith("healthy: HTTP/1."), r.stdout + r.stderr
        port = srv.port
    r = run(["bash", HEALTHCHECK], timeout=10, env=dict(os.environ, RIDEPUSH_PORT=str(port)))
    assert r.returncode == 1 and "unhealthy" in r.stdout


# ---------------------------------------------------------------------------------------
# nginx in front
# ---------------------------------------------------------------------------------------

def render_site(upstream_port, https_port, http_port, tls_dir, log_dir):
    """deploy/nginx/ridepush.conf with only its machine-specific values swapped. Each value
    must occur exactly as often as expected, so an edit to the file cannot silently make
    this test run something else."""
    text = open(SITE).read()
    swaps = [
        ("server 127.0.0.1:8080;", "server 127.0.0.1:%d;" % upstream_port, 1),
        ("listen 443 ssl;", "listen 127.0.0.1:%d ssl;" % https_port, 1),
        ("    listen [::]:443 ssl;\n", "", 1),   # loopback IPv4 only in tests
        ("listen 80;", "listen 127.0.0.1:%d;" % http_port, 1),
        ("    listen [::]:80;\n", "", 1),
        ("/etc/ssl/ridepush/", str(tls_dir) + "/", 2),
        ("/var/log/nginx/", str(log_dir) + "/", 3),
    ]
    for old, new, count in swaps:
        assert text.count(old) == count, "%r occurs %d times in %s" % (old, text.count(old), SITE)
        text = text.replace(old, new)
    return text


class Nginx:
    def __init__(self, tmp, upstream_port):
        self.tmp = tmp
        self.https = free_port()
        self.http = free_port()
        tls, self.logs = tmp / "tls", tmp / "logs"
        for d in (tls, self.logs, tmp / "temp"):
            d.mkdir(parents=True, exist_ok=True)
        openssl = tool("openssl")
        r = run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                 "-addext", "subjectAltName=IP:127.0.0.1",
                 "-keyout", str(tls / "privkey.pem"), "-out", str(tls / "fullchain.pem")])
        assert r.returncode == 0, r.stderr
        self.cert = str(tls / "fullchain.pem")
        (tmp / "ridepush.conf").write_text(render_site(upstream_port, self.https, self.http, tls, self.logs))
        temp = tmp / "temp"
        # The main config stands in for Debian's /etc/nginx/nginx.conf: everything under tmp.
        # As root, workers would drop to `nobody`, who cannot enter pytest's 0700 tmp dir.
        (tmp / "nginx.conf").write_text("""
%(user)s
worker_processes 1;
pid %(tmp)s/nginx.pid;
error_log %(logs)s/error.log info;
events { worker_connections 256; }
http {
    client_body_temp_path %(temp)s/body;
    proxy_temp_path %(temp)s/proxy;
    fastcgi_temp_path %(temp)s/fastcgi;
    uwsgi_temp_path %(temp)s/uwsgi;
    scgi_temp_path %(temp)s/scgi;
    access_log %(logs)s/access.log;
    include %(tmp)s/ridepush.conf;
}
""" % {"user": "user root;" if os.geteuid() == 0 else "", "tmp": tmp, "logs": self.logs, "temp": temp})
        self.nginx = tool("nginx", "/usr/sbin/nginx")
        self.base = [self.nginx, "-p", str(tmp), "-c", str(tmp / "nginx.conf"),
                     "-e", str(self.logs / "error.log")]
        self.proc = None
        self.ctx = ssl.create_default_context(cafile=self.cert)

    def check(self):
        return run(self.base + ["-t"], timeout=20)

    def start(self):
        self.proc = subprocess.Popen(self.base + ["-g", "daemon off;"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not (wait_port(self.https, self.proc) and wait_port(self.http, self.proc)):
            self.stop()
            raise RuntimeError("nginx did not start:\n%s\n%s" % (
                self.proc.stdout.read() if self.proc.stdout else "", self.error_log()))
        return self

    def error_log(self):
        p = self.logs / "error.log"
        return p.read_text()[-4000:] if p.exists() else ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)   # fast shutdown: workers exit too
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def get(self, path, port=None, headers=None, tls=True, source=None):
        src = (source, 0) if source else None
        conn = (http.client.HTTPSConnection("127.0.0.1", port or self.https, context=self.ctx,
                                            timeout=5, source_address=src)
                if tls else http.client.HTTPConnection("127.0.0.1", port or self.http, timeout=5,
                                                       source_address=src))
        try:
            conn.request("GET", path, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read(), r.headers
        finally:
            conn.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def test_nginx_config_is_valid(tmp_path):
    r = Nginx(tmp_path, free_port()).check()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[warn]" not in r.stderr and "[emerg]" not in r.stderr, r.stderr


class EchoUpstream(http.server.BaseHTTPRequestHandler):
    """Answers every request with the headers it received, as JSON."""
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = json.dumps({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_nginx_forwards_upgrade_and_client_headers(tmp_path):
    """Both locations must send Host/X-Forwarded-*/X-Real-IP (a location with its own
    proxy_set_header inherits none), and /ws must ask for the upgrade."""
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoUpstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        with Nginx(tmp_path, upstream.server_address[1]) as ng:
            host = "127.0.0.1:%d" % ng.https
            status, body, _ = ng.get("/ws?token=t", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
            assert status == 200
            seen = json.loads(body)
            assert seen["path"] == "/ws?token=t"
            h = seen["headers"]
            assert h["upgrade"] == "websocket" and h["connection"] == "upgrade"
            assert h["host"] == host and h["x-forwarded-proto"] == "https"
            assert h["x-real-ip"] == "127.0.0.1" and h["x-forwarded-for"] == "127.0.0.1"

            status, body, _ = ng.get("/healthz")
            h = json.loads(body)["headers"]
            assert h["host"] == host and h["x-forwarded-proto"] == "https"
            assert h["x-real-ip"] == "127.0.0.1"
            assert "upgrade" not in h and h.get("connection", "") == "", "page requests must not upgrade"

            # /metrics only for allowed addresses: 127.0.0.2 is loopback too, but not allowed.
            status, body, _ = ng.get("/metrics")
            h = json.loads(body)["headers"]
            assert status == 200 and h["x-forwarded-proto"] == "https" and h["host"] == host
            status, _, _ = ng.get("/metrics", source="127.0.0.2")
            assert status == 403
            status, _, _ = ng.get("/healthz", source="127.0.0.2")
            assert status == 200
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_wss_through_nginx_to_real_ridepush(tmp_path):
    with rp.Server(auth="none") as srv, Nginx(tmp_path, srv.port) as ng:
        try:
            wss_through_nginx(srv, ng)
        except Exception as e:
            # Both sides' logs, so a failure in CI says which hop broke. A /ws line with
            # status 499 in the access log means nginx got the upgrade and was still waiting
            # for RidePush's answer when the client gave up.
            time.sleep(0.5)
            access = ng.logs / "ridepush.access.log"
            raise AssertionError("%r\n--- nginx ridepush.access.log:\n%s--- nginx error.log:\n%s\n--- ridepush:\n%s" % (
                e, access.read_text() if access.exists() else "", ng.error_log(),
                "\n".join(srv.lines[-30:]))) from e


def connect_wss(url, ng):
    """rp.Client through nginx, with one retry of a handshake that timed out. Under heavy
    CPU load (two busy loops on this 2-core machine) about 1 run in 10 saw a TLS handshake
    complete in nginx's debug log and then no HTTP request on that connection for 5 s:
    RidePush never saw the request. A second timeout still fails the test."""
    try:
        return rp.Client(url, ssl=ng.ctx)
    except TimeoutError as e:
        warnings.warn("wss handshake through nginx timed out once (%r); retrying" % e)
        return rp.Client(url, ssl=ng.ctx)


def wss_through_nginx(srv, ng):
    url = "wss://127.0.0.1:%d/ws" % ng.https
    c = connect_wss(url, ng)
    with c:
        assert c.ws.subprotocol == "ride.v1"
        st = c.request({"type": "start", "id": "a", "ride": "r-1"})
        assert st["type"] == "state" and st["ride"] == "r-1", st
        st = c.request({"type": "subscribe", "id": "b", "ride": "r-1"})
        assert st["type"] == "state" and st["ride"] == "r-1", st

        def tick():
            return c.wait_for(lambda m: m.get("type") == "tick" and m.get("ride") == "r-1", timeout=3)
        t1, t2, t3 = tick(), tick(), tick()
        assert t2["seq"] == t1["seq"] + 1 and t3["seq"] == t2["seq"] + 1, (t1, t2, t3)
        assert t1["at"] < t2["at"] < t3["at"]
        assert t3["state"] == "riding" and t3["fare"] == 500 and t3["currency"] == "KRW"

    # The page and /healthz through the same TLS front.
    status, body, headers = ng.get("/")
    assert status == 200 and headers["Content-Type"].startswith("text/html"), (status, headers)
    assert b"<html" in body.lower()
    assert "max-age" in headers.get("Strict-Transport-Security", "")
    status, body, headers = ng.get("/healthz")
    assert status == 200 and "json" in headers["Content-Type"], (status, headers)
    assert isinstance(json.loads(body), dict)

    # Plain HTTP only redirects to https.
    status, _, headers = ng.get("/", tls=False)
    assert status == 301 and headers["Location"] == "https://127.0.0.1/"

    # A token in the query string never reaches the access log.
    with connect_wss(url + "?token=SECRET-IN-QUERY", ng) as c2:
        c2.request({"type": "subscribe", "ride": "r-1"})
    log = ng.logs / "ridepush.access.log"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and log.read_text().count("/ws") < 2:
        time.sleep(0.05)
    text = log.read_text()
    assert text.count("GET /ws HTTP/1.1\" 101") == 2, text
    assert "SECRET-IN-QUERY" not in text

    # Stopping RidePush (systemd's SIGTERM) reaches the rider through nginx as 1012 (a drain).
    c3 = connect_wss(url, ng)
    c3.request({"type": "subscribe", "ride": "r-1"})
    assert srv.stop() == 0, "\n".join(srv.lines[-20:])
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(20):   # drain ticks already in flight; each wait is bounded
            c3.recv(timeout=3)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012, closed.value
