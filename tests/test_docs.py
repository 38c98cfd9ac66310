"""The docs as a map (issue 37, item 7): README.md is a front door, every link in the docs
leads somewhere, every file docs/architecture.md and docs/testing.md name exists, and
CHANGELOG.md's newest released versions are the ones the code reports."""
import os
import re

from rp import ROOT

DOCS = os.path.join(ROOT, "docs")
PAGES = ["README.md", "CHANGELOG.md"] + ["docs/" + f for f in sorted(os.listdir(DOCS)) if f.endswith(".md")]


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def outside_code(text):
    return re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)


def test_the_readme_is_a_front_door():
    readme = read("README.md")
    assert len(readme.splitlines()) <= 250
    for page in ("docs/architecture.md", "docs/sdk.md", "docs/testing.md", "docs/operations.md", "CHANGELOG.md"):
        assert "](%s)" % page in readme, page


def test_every_relative_link_in_the_docs_resolves():
    checked = 0
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", outside_code(read(page))):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), target.split("#")[0]))
            assert os.path.exists(path), "%s links to %s, which does not exist" % (page, target)
            checked += 1
    assert checked > 50, checked


def named_files(text):
    """Repository paths (Sources/…, Tests/…, tests/…) and bare Swift file names in `text`."""
    paths = set(re.findall(r"\b((?:Sources|Tests|tests|Examples|protocol|Fuzz|scripts|deploy)/[\w./+-]*\w)", text))
    swift = set(re.findall(r"\b([A-Z][A-Za-z0-9+]*\.swift)\b", text)) - {os.path.basename(p) for p in paths}
    return paths, swift


def test_every_file_the_architecture_and_testing_docs_name_exists():
    sources = {f for d in ("Sources", "Tests", "Examples", "tests") for _, _, fs in os.walk(os.path.join(ROOT, d)) for f in fs}
    # The worked examples name the files a reader would add (`time.json`, `RideStore<Name>/`).
    architecture = read("docs/architecture.md")
    architecture = architecture[:architecture.index("## Where to add things")] + \
        re.sub(r"protocol/examples/(client|server)/time\.json|Sources/RideStore<Name>/", "",
               architecture[architecture.index("## Where to add things"):])
    for page, text in (("docs/architecture.md", architecture), ("docs/testing.md", read("docs/testing.md")),
                       ("docs/sdk.md", read("docs/sdk.md")), ("README.md", read("README.md"))):
        paths, swift = named_files(text)
        missing = sorted(p for p in paths if not os.path.exists(os.path.join(ROOT, p.replace("<target>", "json"))))
        missing += sorted(f for f in swift if f not in sources)
        assert not missing, "%s names files that do not exist: %r" % (page, missing)
        assert paths or swift, page


def test_the_walk_of_a_start_names_at_most_ten_files():
    text = read("docs/architecture.md")
    walk = text[text.index("## The path of a `start`"):text.index("## The path of a tick")]
    files = set(re.findall(r"`(Sources/[\w/]+\.swift)`", walk))
    assert 5 <= len(files) <= 10, sorted(files)
    assert "Ten files" in walk and len(files) == 10


def test_the_changelogs_newest_versions_are_the_ones_the_code_reports():
    changelog = read("CHANGELOG.md")
    server = re.search(r'static let version = "([0-9.]+)"', read("Sources/RidePushServer/BuildInfo.swift")).group(1)
    sdk = re.search(r'static let version = "([0-9.]+)"', read("Sources/RidePushClient/Version.swift")).group(1)
    assert re.findall(r"^## Server (\d+\.\d+\.\d+) — ", changelog, re.M)[0] == server
    assert re.findall(r"^## SDK (\d+\.\d+\.\d+) — ", changelog, re.M)[0] == sdk
