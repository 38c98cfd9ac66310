"""Schemathesis hooks for tests/test_schemathesis.py (loaded through SCHEMATHESIS_HOOKS).

Each filter below keeps out exactly the requests of one server finding that the spec should
not describe (issue 40; listed for the lead, who fixes the server). Remove a filter once its
finding is fixed, and the run checks those requests too."""
from urllib.parse import unquote_plus

import schemathesis

# Finding A: "." and ".." as path segments are dot segments that libwebsockets resolves before
# any route sees the path (Schemathesis sends "." as %2E): POST /v1/rides/%2E/end reaches
# /v1/rides/end and GET /rides/%2E%2E serves index.html. The server now refuses them as ride
# ids (ClientCodec.isValidRideID), so no such ride can exist; requests addressing one are
# still resolved by lws, outside what the spec can describe, and kept out of path parameters.
DOT_SEGMENTS = (".", "..")


@schemathesis.hook
def filter_case(context, case):
    # Path parameters arrive here already quoted.
    path = {k: unquote_plus(v) if isinstance(v, str) else v for k, v in (case.path_parameters or {}).items()}
    ride_id = path.get("id")
    if ride_id in DOT_SEGMENTS:
        return False
    # Control bytes are checked like any other request: a NUL is answered 400 before lws reads
    # it (RequestLineNUL.swift; it was finding C, no HTTP answer), the rest by the router (a
    # %0D or %0A, which lws takes for the request line's end, included: HTTPRouter's lineCut).
    return True
