"""The two API documents checked by their own validators (issue 40, item 1), not only by this
repository's tests: docs/openapi.yaml by openapi-spec-validator (what generated clients and
Schemathesis rely on), docs/asyncapi.yaml by asyncapi3, an AsyncAPI 3.0 object model (pydantic)
that refuses unknown fields, wrong enums and missing required ones. There is no maintained
AsyncAPI validator on PyPI built on the official JSON Schema (asyncapi-python-parser-jonaslagoni
looks for its schemas in a folder its wheel does not ship); asyncapi3 leaves $refs alone, so they
are resolved here."""
import os

import pytest
import yaml
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

from rp import ROOT

OPENAPI = os.path.join(ROOT, "docs", "openapi.yaml")
ASYNCAPI = os.path.join(ROOT, "docs", "asyncapi.yaml")


def test_openapi_yaml_passes_openapi_spec_validator():
    spec, _ = read_from_filename(OPENAPI)
    validate(spec)  # raises OpenAPIValidationError with the path of the first problem
    assert spec["openapi"].startswith("3.1.")
    print("\nopenapi-spec-validator: docs/openapi.yaml OK")


def test_asyncapi_yaml_passes_the_asyncapi3_model():
    import warnings
    with warnings.catch_warnings():
        # asyncapi3 0.0.2's own models name a field "schema" (pydantic warns at import): not ours.
        warnings.simplefilter("ignore", UserWarning)
        from asyncapi3 import AsyncAPI3
    with open(ASYNCAPI, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    model = AsyncAPI3.model_validate(doc)  # raises pydantic's ValidationError, every problem listed
    assert doc["asyncapi"] == "3.0.0" and model.channels and model.operations
    # A broken document is refused: the validator is not a no-op.
    broken = dict(doc, info=dict(doc["info"], titel="x"))
    with pytest.raises(Exception):
        AsyncAPI3.model_validate(broken)
    # Every local $ref resolves (the model does not follow them).
    refs = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
    assert len(refs) > 20
    for ref in refs:
        assert ref.startswith("#/"), ref
        node = doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    print("\nasyncapi3: docs/asyncapi.yaml OK (%d channels, %d operations, %d $refs resolved)"
          % (len(model.channels), len(model.operations), len(refs)))


@pytest.mark.parametrize("path", [OPENAPI, ASYNCAPI])
def test_no_flow_map_comma_made_a_key(path):
    """`{description: A, B}` in a YAML flow map is two keys, the second with no value: the
    mistake that made docs/openapi.yaml invalid, and that inside a schema passes every
    validator as an unknown keyword. Only examples may hold null values."""
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            for k, v in node.items():
                if v is None and "/examples/" not in where + "/":
                    found.append(where + "/" + str(k))
                walk(v, where + "/" + str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, "%s/%d" % (where, i))
    walk(doc, "")
    assert not found, "keys with no value (an unquoted comma?): %r" % found
