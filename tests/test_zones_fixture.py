"""MobilityData's GBFS 3.0 geofencing_zones.json fixture against the official JSON Schema.

Both files are copied unchanged from MobilityData/gbfs-json-schema (tests/fixtures/gbfs/README.md).
The Swift side (Tests/RideCoreTests/ZoneFixtureTests.swift) loads the same fixture and checks
the rules at points in it; here the file itself is held to the schema, so a test that passes on
it is a test on a valid GBFS 3.0 feed. No server is started.
"""
import copy
import json
import os

import jsonschema

from rp import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "gbfs")


def load(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


SCHEMA = load("geofencing_zones.v3.0.schema.json")
FIXTURE = load("geofencing_zones.v3.0.json")


def validator():
    cls = jsonschema.validators.validator_for(SCHEMA)
    cls.check_schema(SCHEMA)
    return cls(SCHEMA, format_checker=cls.FORMAT_CHECKER)


def test_the_fixture_validates_against_the_official_schema():
    errors = sorted(validator().iter_errors(FIXTURE), key=lambda e: list(e.path))
    assert errors == [], "\n".join("%s: %s" % ("/".join(map(str, e.path)), e.message) for e in errors[:5])


def test_the_fixture_is_the_one_the_swift_tests_describe():
    zones = FIXTURE["data"]["geofencing_zones"]["features"]
    assert FIXTURE["version"] == "3.0"
    assert len(zones) == 272
    names = [z["properties"]["name"][0]["text"] for z in zones]
    assert names.count("Trocadéro + Jardins") == 1
    assert sum(len(p) > 1 for z in zones for p in z["geometry"]["coordinates"]) == 1


def test_the_schema_refuses_what_the_loader_refuses():
    # The schema is not a formality: a rule with a string for a boolean fails it, as it fails
    # GBFSZones.parse (GBFSZonesTests.refusalsNameTheLineColumnAndField).
    bad = copy.deepcopy(FIXTURE)
    bad["data"]["geofencing_zones"]["features"][3]["properties"]["rules"][0]["ride_end_allowed"] = "no"
    errors = list(validator().iter_errors(bad))
    assert len(errors) == 1
    assert list(errors[0].path)[-1] == "ride_end_allowed"
    missing = copy.deepcopy(FIXTURE)
    del missing["data"]["global_rules"]
    assert any("global_rules" in e.message for e in validator().iter_errors(missing))
