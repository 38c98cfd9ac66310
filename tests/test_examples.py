"""The example app in Examples/ (issue 26): an app that imports only RidePushClient compiles
against the README's API, and runs. The package is built here (offline: its one dependency is
this repository, by path), its ride-demo is run against a real server with tokens on, and the
README's view model must be Examples/Sources/ride-demo/RentalModel.swift to the byte."""
import os
import re
import shutil
import subprocess

import pytest

from rp import ROOT, Server
from test_security import ENV, control

EXAMPLES = os.path.join(ROOT, "Examples")
MODEL = os.path.join(EXAMPLES, "Sources", "ride-demo", "RentalModel.swift")
README = os.path.join(ROOT, "README.md")


def swift_blocks(text):
    return re.findall(r"^```swift\n(.*?)^```$", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def demo():
    swift = os.environ.get("SWIFT") or shutil.which("swift") or "/opt/swift/usr/bin/swift"
    assert os.path.exists(swift) or shutil.which(swift), "no swift toolchain to build Examples/ with"
    # Offline: the one dependency is this repository by path (checked below), nothing to fetch.
    r = subprocess.run([swift, "build", "--package-path", EXAMPLES], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    warnings = [l for l in (r.stdout + r.stderr).splitlines() if "warning:" in l and "/Examples/" in l]
    assert warnings == [], warnings
    return os.path.join(EXAMPLES, ".build", "debug", "ride-demo")


def test_the_readme_view_model_is_the_compiled_one_verbatim():
    blocks = swift_blocks(open(README, encoding="utf-8").read())
    model = open(MODEL, encoding="utf-8").read()
    models = [b for b in blocks if "final class RentalModel" in b]
    assert models == [model], "README's RentalModel block differs from %s" % MODEL
    # The package lines the README tells an app to write are the ones Examples/ builds with.
    readme = open(README, encoding="utf-8").read()
    package = open(os.path.join(EXAMPLES, "Package.swift"), encoding="utf-8").read()
    for needed in ('.package(name: "RidePush", path:', '.product(name: "RidePushClient", package: "RidePush")'):
        assert needed in readme and needed in package, needed


def test_the_example_imports_only_the_sdk_and_depends_only_on_this_repository():
    src = os.path.join(EXAMPLES, "Sources")
    imports = set()
    for d, _, files in os.walk(src):
        for f in files:
            if f.endswith(".swift"):
                imports |= set(re.findall(r"^import (\w+)", open(os.path.join(d, f)).read(), flags=re.M))
    assert imports == {"Foundation", "Observation", "RidePushClient"}, imports
    package = open(os.path.join(EXAMPLES, "Package.swift")).read()
    assert re.findall(r"\.package\((.*?)\)", package) == ['name: "RidePush", path: ".."'], package
    assert not os.path.exists(os.path.join(EXAMPLES, "Package.resolved"))


def test_ride_demo_starts_watches_pauses_resumes_and_ends_a_ride_then_does_it_through_the_model(demo):
    with Server(auth="jwt", env=ENV) as srv:
        env = dict(os.environ, RIDEPUSH_TOKEN=control("demo-rider"))
        r = subprocess.run([demo, srv.ws], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert r.stderr == "", "the SDK prints nothing of its own (no libwebsockets lines): %r" % r.stderr
        out = r.stdout.splitlines()
        kinds = [l.split(" ")[0] for l in out]
        # Every step, in order (feed events interleave with the replies).
        steps = [k for k in kinds if k in ("start", "pause", "resume", "end", "watched", "done")]
        assert steps == ["start", "pause", "resume", "end", "watched", "done"], out
        start = next(l for l in out if l.startswith("start "))
        m = re.fullmatch(r"start (r-\w+) riding elapsed=0 paused=0 fare=500 KRW", start)
        assert m, start
        ride = m.group(1)
        assert re.search(r"^pause %s paused elapsed=[1-3] " % ride, "\n".join(out), re.M), out
        assert re.search(r"^resume %s riding elapsed=[1-3] paused=[1-2] " % ride, "\n".join(out), re.M), out
        assert re.search(r"^end %s ended elapsed=[1-3] paused=[1-2] fare=500 KRW$" % ride, "\n".join(out), re.M), out
        assert [l for l in out if l.startswith("receipt ")][:2] == ["receipt unlock 500", "receipt riding 0"], out
        assert any(l.startswith("event state %s riding elapsed=0" % ride) for l in out), "the feed's snapshot first"
        assert any(l.startswith("event ended %s ended" % ride) for l in out), out
        assert int(next(l for l in out if l.startswith("watched ")).split()[1]) >= 1
        # README's model, driven like its buttons.
        rent = next(l for l in out if l.startswith("model rent "))
        assert re.fullmatch(r"model rent r-\w+ 0분 [1-3]초 500원 live=true", rent), rent
        assert "model pause paused" in out and "model resume riding" in out, out
        assert re.search(r"^model giveBack ended 500원 lines=unlock,riding", "\n".join(out), re.M), out
        model_ride = rent.split()[2]
        # Both rides are on the server, ended, and owned by the token's rider.
        for rid in (ride, model_ride):
            status, doc, _ = srv.get("/rides/%s?token=%s" % (rid, control("demo-rider")))
            assert status == 200 and doc["state"] == "ended" and doc["owner"] == "demo-rider", doc


def test_ride_demo_without_a_server_url_says_how_to_run_it(demo):
    r = subprocess.run([demo], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and r.stderr.startswith("usage: ride-demo ws://HOST:PORT/ws"), r
