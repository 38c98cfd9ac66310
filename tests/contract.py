"""docs/asyncapi.yaml as a validator: every server → client message is checked against the
payload schema of the message whose `type` const it names. Used by rp.Client when
RIDEPUSH_CHECK_SCHEMA=1 (make integration sets it) and by tests/test_contract.py."""
import os
import threading

import jsonschema
import referencing
import referencing.jsonschema
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DOC_PATH = os.path.join(ROOT, "docs", "asyncapi.yaml")
URI = "urn:ridepush:asyncapi"

with open(DOC_PATH, encoding="utf-8") as f:
    DOC = yaml.safe_load(f)

_REGISTRY = referencing.Registry().with_resource(
    URI, referencing.Resource(DOC, specification=referencing.jsonschema.DRAFT7))


def _resolve(ref):
    node = DOC
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


def _by_type(action):
    """{type const: (message name, payload $ref)} for one operation's messages."""
    out = {}
    for op in DOC["operations"].values():
        if op["action"] != action:
            continue
        for m in op["messages"]:
            name = m["$ref"].rsplit("/", 1)[1]
            ref = _resolve(_resolve(m["$ref"])["$ref"])["payload"]["$ref"]
            const = _resolve(ref)["properties"]["type"]["const"]
            assert const not in out, "two %s messages with type %r" % (action, const)
            out[const] = (name, ref)
    return out


SERVER = _by_type("send")    # what the server sends
CLIENT = _by_type("receive")  # what the server receives


def _validator(ref):
    return jsonschema.Draft7Validator({"$ref": URI + ref}, registry=_REGISTRY,
                                      format_checker=jsonschema.FormatChecker())


_VALIDATORS = {t: _validator(ref) for t, (_, ref) in list(SERVER.items())}
_CLIENT_VALIDATORS = {t: _validator(ref) for t, (_, ref) in list(CLIENT.items())}

# Message types seen by check_server in this process (the suite-wide coverage figure).
seen = {}
_lock = threading.Lock()


def errors(msg, direction="server"):
    """The schema violations of one message, as strings (empty when it conforms)."""
    table = _VALIDATORS if direction == "server" else _CLIENT_VALIDATORS
    if not isinstance(msg, dict) or msg.get("type") not in table:
        return ["no %s message with type %r in docs/asyncapi.yaml" % (direction, msg.get("type") if isinstance(msg, dict) else msg)]
    return ["%s at %s" % (e.message, "/".join(map(str, e.absolute_path)) or "(top)")
            for e in table[msg["type"]].iter_errors(msg)]


def check_server(msg):
    errs = errors(msg, "server")
    if errs:
        raise AssertionError("server message does not match docs/asyncapi.yaml: %s\n%r" % ("; ".join(errs), msg))
    with _lock:
        seen[msg["type"]] = seen.get(msg["type"], 0) + 1
