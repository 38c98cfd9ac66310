"""docs/openapi.yaml against the code and the real binary (issue 27): every route in
Sources/RidePushServer/HTTP.swift (and the server API's under /v1/rides) is declared, every
$ref resolves, and real responses for many method/path/status combinations have a declared
status and a body valid against the declared schema (jsonschema, draft 2020-12 as OpenAPI 3.1
uses). A method a path does not declare must be the documented 405 with the error shape."""
import http.client
import json
import os
import re
import uuid

import jsonschema
import pytest
import referencing
import referencing.jsonschema
import yaml

from rp import ROOT, Server
from test_security import ENV, control, watch

DOC_PATH = os.path.join(ROOT, "docs", "openapi.yaml")
URI = "urn:ridepush:openapi"
with open(DOC_PATH, encoding="utf-8") as f:
    DOC = yaml.safe_load(f)
REGISTRY = referencing.Registry().with_resource(URI, referencing.Resource(DOC, specification=referencing.jsonschema.DRAFT202012))
METHODS = ("get", "head", "post", "put", "patch", "delete", "options")


def source(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def routes_in_source():
    """(method, path template) of every route the HTTP side serves, read from the route table."""
    router = source("Sources", "RideService", "HTTP", "HTTPRouter.swift")
    table = router[router.index("static let reads"):]
    table = table[table.index("= ["):table.index("\n    ]")]
    routes = [("get", p) for p in re.findall(r'"(/[^"]*)": \(\.', table)]
    routes += [("get", p + "{id}") for p in re.findall(r'utf8\.starts\(with: "(/[^"]*/)"\.utf8\)', router)]
    if ".file(path: path)" in router:
        routes += [("get", "/"), ("get", "/{file}")]
    if ".serverAPI(api)" in router:
        api = source("Sources", "RideService", "HTTP", "ServerAPIRequest.swift")
        base = re.search(r'base = Array\("(/v1/rides)"\.utf8\)', api).group(1)
        commands = re.search(r"enum RideCommand: String[^{]*\{\s*case ([a-z, ]+)", source("Sources", "RideCore", "Ride.swift"))
        routes += [("post", base)] + [("post", "%s/{id}/%s" % (base, c.strip())) for c in commands.group(1).split(",")]
        if "case .read(let id) = api" in router:
            routes += [("get", base + "/{id}")]
    return routes


def test_every_route_in_the_code_is_declared():
    routes = routes_in_source()
    # What the reader of HTTPRouter.swift finds today; a parser that found nothing must fail here.
    assert len(routes) >= 13 and ("get", "/healthz") in routes and ("post", "/v1/rides/{id}/end") in routes, routes
    missing = [(m, p) for m, p in routes if m not in DOC["paths"].get(p, {})]
    assert not missing, "routes in the code but not in docs/openapi.yaml: %r" % missing
    # And HEAD is declared wherever GET is (the server serves it there).
    assert not [p for p, ops in DOC["paths"].items() if "get" in ops and "head" not in ops and p != "/ws"]


def walk(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, path + "/" + str(k))
        yield path, node
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, "%s/%d" % (path, i))


def resolve(ref):
    node = DOC
    for part in ref.lstrip("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_the_document_is_openapi_3_1_and_every_reference_resolves():
    assert DOC["openapi"].startswith("3.1.")
    refs = [n["$ref"] for _, n in walk(DOC) if "$ref" in n]
    assert len(refs) > 40
    for ref in refs:
        assert ref.startswith("#/") and resolve(ref) is not None, ref
    for path, ops in DOC["paths"].items():
        assert path.startswith("/")
        for method, op in ops.items():
            assert method in METHODS, (path, method)
            assert op["responses"], (path, method)
            for status, response in op["responses"].items():
                assert re.fullmatch(r"[1-5]\d\d", status), (path, method, status)
                assert "description" in (resolve(response["$ref"]) if "$ref" in response else response), (path, method, status)
            for name in re.findall(r"\{(\w+)\}", path):
                params = [resolve(p["$ref"]) if "$ref" in p else p for p in op.get("parameters", [])]
                assert any(p["in"] == "path" and p["name"] == name for p in params), (path, method, name)
    for name in DOC["components"]["schemas"]:
        jsonschema.Draft202012Validator.check_schema(DOC["components"]["schemas"][name])


def operation(method, path):
    """The declared operation for a request path: an exact path first, then templates
    (`{file}` matches any rest of the path); None if the path declares no such method."""
    path = path.split("?")[0]
    templates = sorted(DOC["paths"], key=lambda t: (t.count("{"), t == "/{file}"))
    for t in templates:
        pattern = "^" + re.sub(r"\\\{file\\\}", ".+", re.sub(r"\\\{(?!file)\w+\\\}", "[^/]+", re.escape(t))) + "$"
        if re.match(pattern, path):
            return t, DOC["paths"][t].get(method.lower())
    return None, None


def response_schema(template, method, status):
    responses = DOC["paths"][template][method.lower()]["responses"]
    assert str(status) in responses, "%s %s answered %d, which is not declared (%s)" % (method, template, status, sorted(responses))
    response = responses[str(status)]
    if "$ref" in response:
        response = resolve(response["$ref"])
    return response.get("content", {})


def check(method, path, status, ctype, body):
    template, op = operation(method, path)
    if op is None:
        # The documented rule for a method a path does not declare.
        assert status == 405, "%s %s: %d, not the documented 405" % (method, path, status)
        jsonschema.validate(json.loads(body), DOC["components"]["schemas"]["Error"])
        return "405 (undeclared method)"
    content = response_schema(template, method, status)
    if method == "HEAD":
        assert body == b""
        return template
    if not content:
        return template
    media = ctype.split(";")[0].strip()
    assert media in content, "%s %s %d: %s, declared %s" % (method, path, status, media, sorted(content))
    schema = content[media].get("schema")
    if media == "application/json":
        pointer = "/paths/%s/%s/responses/%d" % (template.replace("~", "~0").replace("/", "~1"), method.lower(), status)
        ref = DOC["paths"][template][method.lower()]["responses"][str(status)].get("$ref")
        target = ref if ref else "#" + pointer
        validator = jsonschema.Draft202012Validator({"$ref": URI + target + "/content/application~1json/schema"}, registry=REGISTRY)
        errors = sorted(validator.iter_errors(json.loads(body)), key=str)
        assert not errors, "%s %s %d: %s\n%s" % (method, path, status, errors[0].message, body[:500])
    else:
        assert schema is not None
    return template


def send(srv, method, path, token=None, key=None, body=None, raw=None):
    headers = {}
    if token:
        headers["Authorization"] = "Bearer " + token
    if key:
        headers["Idempotency-Key"] = key
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if data is not None:
        headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        return r.status, r.headers.get("Content-Type", ""), r.read()
    finally:
        conn.close()


def test_real_responses_match_the_document(tmp_path):
    secret = tmp_path / "webhook.secret"
    secret.write_text("whsec_" + "0" * 40 + "\n")
    alice, bob, ops = control("alice"), control("bob"), control("backend", ops=True)
    key = lambda: str(uuid.uuid4())  # noqa: E731
    create_key = key()
    combos = [
        ("GET", "/healthz", {}, 200), ("HEAD", "/healthz", {}, 200), ("GET", "/metrics", {}, 200),
        ("GET", "/plans", {}, 200), ("HEAD", "/plans", {}, 200), ("GET", "/zones", {}, 404), ("HEAD", "/zones", {}, 404),
        ("GET", "/quote?seconds=600", {}, 200), ("GET", "/quote", {}, 400), ("GET", "/quote?seconds=60&plan=nope", {}, 404),
        ("POST", "/v1/rides", dict(token=alice, key=create_key, body={"rider": "alice", "ride": "oa-1", "limit": 900}), 201),
        ("POST", "/v1/rides", dict(token=alice, key=create_key, body={"rider": "alice", "ride": "oa-1", "limit": 900}), 201),
        ("POST", "/v1/rides", dict(token=alice, key=create_key, body={"rider": "alice", "ride": "oa-2"}), 422),
        ("POST", "/v1/rides", dict(token=alice, body={"rider": "alice"}), 400),
        ("POST", "/v1/rides", dict(token=alice, key=key(), raw=b"[1,"), 400),
        ("POST", "/v1/rides", dict(key=key(), body={"rider": "alice"}), 401),
        ("POST", "/v1/rides", dict(token=alice, key=key(), body={"rider": "bob"}), 403),
        ("POST", "/v1/rides", dict(token=alice, key=key(), body={"rider": "alice", "ride": "oa-1"}), 409),
        ("POST", "/v1/rides", dict(token=alice, key=key(), raw=b" " * 5000), 413),
        ("POST", "/v1/rides", dict(token=ops, key=key(), body={"rider": "carol", "ride": "oa-c"}), 201),
        ("POST", "/v1/rides/oa-1/pause", dict(token=alice, key=key()), 200),
        ("POST", "/v1/rides/oa-1/pause", dict(token=alice, key=key()), 409),
        ("POST", "/v1/rides/oa-1/resume", dict(token=alice, key=key(), body={}), 200),
        ("POST", "/v1/rides/oa-1/resume", dict(token=alice, key=key(), body={"distance": 3}), 400),
        ("POST", "/v1/rides/oa-1/end", dict(token=bob, key=key()), 403),
        ("POST", "/v1/rides/oa-nope/end", dict(token=alice, key=key()), 404),
        ("POST", "/v1/rides/oa-1/end", dict(token=alice, key="end-oa-1", body={"distance": 1500}), 200),
        ("POST", "/v1/rides/oa-1/end", dict(token=alice, key="end-oa-1", body={"distance": 1500}), 200),
        ("POST", "/v1/rides/oa-1/end", dict(token=alice, key="end-oa-1", body={"distance": 1}), 422),
        ("POST", "/v1/rides/oa-c/end", dict(token=ops, key=key()), 200),
        ("GET", "/rides/oa-1", dict(token=alice), 200), ("GET", "/rides/oa-1", dict(token=ops), 200),
        ("GET", "/rides/oa-1?journal=1", dict(token=alice), 200), ("HEAD", "/rides/oa-1", dict(token=alice), 200),
        ("GET", "/rides/oa-1", dict(token=bob), 403), ("GET", "/rides/oa-1", {}, 401),
        ("GET", "/rides/oa-zz", dict(token=ops), 404), ("GET", "/rides/a%3Cb", dict(token=ops), 400),
        ("GET", "/v1/rides/oa-1", dict(token=alice), 200), ("HEAD", "/v1/rides/oa-1", dict(token=ops), 200),
        ("GET", "/v1/rides/oa-1?journal=1", dict(token=ops), 200), ("GET", "/v1/rides/oa-1?bogus=1", dict(token=ops), 400),
        ("GET", "/v1/rides/oa-1", dict(token=bob), 403), ("GET", "/v1/rides/oa-zz", dict(token=ops), 404),
        ("GET", "/v1/rides/oa-1", {}, 401), ("POST", "/v1/rides/oa-1", dict(token=ops, key=key()), 405),
        ("POST", "/v1/rides/oa-c/end", dict(token=bob, key=key(), body={"force": True}), 403),
        ("POST", "/v1/rides", dict(token=alice, key=key(), body={"rider": "alice", "lat": 1}), 400),
        ("GET", "/rides", dict(token=ops), 200), ("GET", "/rides?state=ended&limit=1", dict(token=ops), 200),
        ("GET", "/rides?rider=alice&state=ended", dict(token=ops), 200), ("GET", "/rides?rider=alice", dict(token=ops), 200),
        ("GET", "/rides?bogus=1", dict(token=ops), 400),
        ("GET", "/rides?state=gone", dict(token=ops), 400), ("GET", "/rides", dict(token=alice), 403), ("GET", "/rides", {}, 401),
        ("GET", "/v1/webhooks/dead", dict(token=ops), 200), ("GET", "/v1/webhooks/dead", dict(token=watch("alice")), 403),
        ("GET", "/v1/webhooks/dead", {}, 401),
        ("GET", "/", {}, 200), ("HEAD", "/", {}, 200), ("GET", "/app.js", {}, 200), ("GET", "/no-such-file.txt", {}, 404),
        ("GET", "/ws", {}, 404),
        ("GET", "/v1/rides", {}, 405), ("GET", "/v1/rides/oa-1/end", {}, 405), ("DELETE", "/healthz", {}, 405),
        ("POST", "/healthz", {}, 405), ("PUT", "/v1/rides", {}, 405),
    ]
    seen = []
    with Server("--webhook", "http://127.0.0.1:9/hooks", "--webhook-secret-file", str(secret), auth="jwt", env=ENV,
                store=str(tmp_path / "s.db")) as srv:
        replays = {}
        for method, path, kw, expected in combos:
            status, ctype, body = send(srv, method, path, **kw)
            assert status == expected, "%s %s %r: %d %s" % (method, path, kw.get("body"), status, body[:300])
            seen.append((method, path, status, check(method, path, status, ctype, body)))
            if kw.get("key") in (create_key, "end-oa-1") and status < 300:
                replays.setdefault(kw["key"], set()).add(body)
    assert all(len(bodies) == 1 for bodies in replays.values()) and len(replays) == 2, "replays are byte-identical"
    print("\nopenapi check: %d responses validated, %d distinct method/path/status:" % (len(seen), len({s[:3] for s in seen})))
    for method, path, status, template in seen:
        print("  %-6s %-40s %d  %s" % (method, path, status, template))
