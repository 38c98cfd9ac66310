"""The example app in Examples/ (issue 26): an app that imports only RidePushClient compiles
against the documented API, and runs. The package is built here (offline: its one dependency is
this repository, by path) and its ride-demo is run against a real server with tokens on. The
Swift shown in the docs is that package's code to the byte: README's feed example is
Follow.swift, docs/sdk.md's view model is RentalModel.swift. And the SDK evolves without
breaking apps (issue 37, item 6): an app written against an earlier RideEvent case list still
compiles against today's SDK. The Live Activity's shared types (RideLiveActivity) are built and
run here; its ActivityKit and WidgetKit code, under `#if canImport`, only where those exist."""
import os
import re
import shutil
import subprocess

import pytest

from rp import ROOT, Server
from test_security import ENV, control

EXAMPLES = os.path.join(ROOT, "Examples")
DEMO_SOURCES = os.path.join(EXAMPLES, "Sources", "ride-demo")
MODEL = os.path.join(DEMO_SOURCES, "RentalModel.swift")
FOLLOW = os.path.join(DEMO_SOURCES, "Follow.swift")
README = os.path.join(ROOT, "README.md")
SDK_GUIDE = os.path.join(ROOT, "docs", "sdk.md")
PREVIOUS_CASES = os.path.join(ROOT, "tests", "fixtures", "sdk-apps", "PreviousCases.swift")
SWIFT = os.environ.get("SWIFT") or shutil.which("swift") or "/opt/swift/usr/bin/swift"


def swift_blocks(text):
    return re.findall(r"^```swift\n(.*?)^```$", text, flags=re.S | re.M)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def demo():
    assert os.path.exists(SWIFT) or shutil.which(SWIFT), "no swift toolchain to build Examples/ with"
    # Offline: the one dependency is this repository by path (checked below), nothing to fetch.
    r = subprocess.run([SWIFT, "build", "--package-path", EXAMPLES], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    warnings = [l for l in (r.stdout + r.stderr).splitlines() if "warning:" in l and "/Examples/" in l]
    assert warnings == [], warnings
    return os.path.join(EXAMPLES, ".build", "debug", "ride-demo")


def test_the_swift_in_the_docs_is_the_compiled_code_verbatim():
    readme, guide = read(README), read(SDK_GUIDE)
    model, follow = read(MODEL), read(FOLLOW)
    assert [b for b in swift_blocks(guide) if "final class RentalModel" in b] == [model], \
        "docs/sdk.md's RentalModel block differs from %s" % MODEL
    for name, text in (("README.md", readme), ("docs/sdk.md", guide)):
        assert [b for b in swift_blocks(text) if "func follow(" in b] == [follow], \
            "%s's feed example differs from %s" % (name, FOLLOW)
    # The README shows no other Swift: whatever it shows is compiled and run here.
    assert swift_blocks(readme) == [follow]
    # The package lines the docs tell an app to write are the ones Examples/ builds with.
    package = read(os.path.join(EXAMPLES, "Package.swift"))
    for needed in ('.package(name: "RidePush", path:', '.product(name: "RidePushClient", package: "RidePush")'):
        assert needed in readme and needed in guide and needed in package, needed


def test_every_switch_over_ride_events_in_the_docs_and_examples_ends_in_unknown_default():
    """A later minor version may add a RideEvent case (docs/sdk.md): what apps copy handles it."""
    code = swift_blocks(read(README)) + swift_blocks(read(SDK_GUIDE))
    code += [read(os.path.join(DEMO_SOURCES, f)) for f in sorted(os.listdir(DEMO_SOURCES)) if f.endswith(".swift")]
    switches = [m.group(0) for c in code for m in re.finditer(r"switch event \{.*?\n\s*\}\n", c, flags=re.S)]
    assert len(switches) >= 3, switches  # README's, docs/sdk.md's (the same code) and Follow.swift
    for s in switches:
        assert re.search(r"\n\s*@unknown default:[^\n]*\n\s*\}\n$", s), s


def typecheck(demo, source, tmp_path, name):
    """Compiles `source` as an app's file against the SDK Examples/ was built with (another
    package, as an app is); returns the exit status and the diagnostics."""
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    modules = os.path.join(os.path.dirname(demo), "Modules")
    modulemap = os.path.join(ROOT, "Sources", "CLibWebSockets", "module.modulemap")
    r = subprocess.run([SWIFT + "c", "-swift-version", "6", "-typecheck", "-I", modules,
                        "-Xcc", "-fmodule-map-file=" + modulemap, str(path)],
                       capture_output=True, text=True, timeout=600)
    return r.returncode, [l for l in (r.stdout + r.stderr).splitlines() if "warning:" in l or "error:" in l]


def test_an_app_written_against_the_previous_event_list_compiles_against_todays_sdk(demo, tmp_path):
    app = read(PREVIOUS_CASES)
    assert "case .zone" not in app and "@unknown default" in app
    status, diagnostics = typecheck(demo, app, tmp_path, "PreviousCases.swift")
    assert status == 0, diagnostics
    # It did meet today's list: the compiler names the case it does not handle, as a warning.
    assert diagnostics and all("warning: switch must be exhaustive" in d for d in diagnostics), diagnostics
    # Without @unknown default the new case breaks the same app: the line is what keeps it building.
    status, diagnostics = typecheck(demo, app.replace("    @unknown default:", "    // "), tmp_path, "NoUnknownDefault.swift")
    assert status != 0 and any("error: switch must be exhaustive" in d for d in diagnostics), diagnostics


def test_an_app_switching_over_todays_events_without_unknown_default_still_builds(demo, tmp_path):
    """RideEvent is @nonexhaustive(warn): such an app is told to add @unknown default, not broken."""
    follow = read(FOLLOW)
    app = re.sub(r"\n\s*//[^\n]*\n\s*@unknown default:[^\n]*", "", follow)
    assert "@unknown default" not in app and app != follow
    status, diagnostics = typecheck(demo, app, tmp_path, "Exhaustive.swift")
    assert status == 0, diagnostics
    assert [d for d in diagnostics if "may have additional unknown values" in d], diagnostics


def test_the_example_imports_only_the_sdk_and_depends_only_on_this_repository():
    """Besides the SDK and the package's own modules, only Apple's frameworks, and those only
    inside `#if canImport(…)`: what is built here builds on Linux."""
    src = os.path.join(EXAMPLES, "Sources")
    own = set(os.listdir(src))
    imports, guarded = set(), set()
    for d, _, files in os.walk(src):
        for f in files:
            if f.endswith(".swift"):
                text = open(os.path.join(d, f)).read()
                # Drop every `#if canImport(…) … #endif` block (none nests another here) first.
                blocks = re.findall(r"^#if canImport\(.*?^#endif$", text, flags=re.S | re.M)
                for b in blocks:
                    guarded |= set(re.findall(r"^import (\w+)", b, flags=re.M))
                    text = text.replace(b, "")
                imports |= set(re.findall(r"^import (\w+)", text, flags=re.M))
    assert imports - own == {"Foundation", "Observation", "RidePushClient"}, imports
    assert "RideLiveActivity" in imports and "RideLiveActivity" in own
    assert guarded == {"ActivityKit", "Foundation", "RidePushClient", "SwiftUI", "WidgetKit"}, guarded
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
        # The activity the app would start, and its push token registered through the SDK.
        assert "activity-start %s Riding timer_start=" % ride in r.stdout and " limit=" in r.stdout, out
        assert "push push_registered apns liveactivity %s" % ride in out, out
        assert re.search(r"^pause %s paused elapsed=[1-3] " % ride, "\n".join(out), re.M), out
        assert re.search(r"^resume %s riding elapsed=[1-3] paused=[1-2] " % ride, "\n".join(out), re.M), out
        assert re.search(r"^end %s ended elapsed=[1-3] paused=[1-2] fare=500 KRW$" % ride, "\n".join(out), re.M), out
        assert [l for l in out if l.startswith("receipt ")][:2] == ["receipt unlock 500", "receipt riding 0"], out
        assert any(l.startswith("event state %s riding elapsed=0" % ride) for l in out), "the feed's snapshot first"
        assert any(l.startswith("event ended %s ended" % ride) for l in out), out
        assert int(next(l for l in out if l.startswith("watched ")).split()[1]) >= 1
        # docs/sdk.md's model, driven like its buttons.
        rent = next(l for l in out if l.startswith("model rent "))
        assert re.fullmatch(r"model rent r-\w+ 0분 [1-3]초 500원 live=true", rent), rent
        assert "model pause paused" in out and "model resume riding" in out, out
        assert re.search(r"^model giveBack ended 500원 lines=unlock,riding", "\n".join(out), re.M), out
        model_ride = rent.split()[2]
        # Both rides are on the server, ended, and owned by the token's rider.
        for rid in (ride, model_ride):
            status, doc, _ = srv.get("/rides/%s?token=%s" % (rid, control("demo-rider")))
            assert status == 200 and doc["state"] == "ended" and doc["owner"] == "demo-rider", doc


def test_the_lock_screen_of_each_content_state_golden(demo):
    """The Live Activity's shared part, run here: each golden decoded with the SDK's
    RideActivityContent and shown as RideActivityWidget draws it (LockScreenRide)."""
    folder = os.path.join(ROOT, "protocol", "examples", "push", "content-state")
    files = [os.path.join(folder, f) for f in sorted(os.listdir(folder))]
    assert [os.path.basename(f) for f in files] == ["ended.json", "paused.zone.json", "riding.json"]
    r = subprocess.run([demo, "activity", *files], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and r.stderr == "", r
    assert r.stdout.splitlines() == [
        # Ended: the receipt's total, the time standing, nothing ahead.
        "activity r-43 Ended timer_start=- time=3:12 fare=1040 KRW next=- limit=- zone=-",
        # Paused: no running timer, no fare step; the limit, and a zone where the ride may not end.
        "activity r-42 Paused timer_start=- time=3:12 fare=1040 KRW next=- limit=1764431907250 "
        "zone=Trocadéro + Jardins · no parking here",
        # Riding: the timer runs from at - elapsed (…192.750 - 192 s), the next step at 4:00.
        "activity r-42 Riding timer_start=1764430000750 time=3:12 fare=1040 KRW next=1220@1764430240000 "
        "limit=1764431800000 zone=-",
    ]


def test_ride_demo_without_a_server_url_says_how_to_run_it(demo):
    r = subprocess.run([demo], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and r.stderr.startswith("usage: ride-demo ws://HOST:PORT/ws"), r
