"""Schemathesis hooks for tests/test_schemathesis.py (loaded through SCHEMATHESIS_HOOKS).

Each filter below keeps out exactly the requests of one server finding that the spec should
not describe (issue 40; listed for the lead, who fixes the server). Remove a filter once its
finding is fixed, and the run checks those requests too."""
import unicodedata
from urllib.parse import unquote_plus

import schemathesis

# Finding A: "." and ".." are valid ride ids (ClientCodec.isValidRideID: A-Z a-z 0-9 - _ . :),
# but the server resolves dot segments before it routes, even percent-encoded ones (Schemathesis
# sends "." as %2E): POST /v1/rides/%2E/end reaches /v1/rides/end (404 not_found), /v1/rides/%2E%2E/end
# is /v1/end (405) and GET /rides/%2E%2E serves index.html (200 text/html). Such a ride can be
# made (POST /v1/rides {"ride": "."}) and never addressed. Kept out of path parameters, and
# out of create bodies so that a link cannot carry one.
DOT_SEGMENTS = (".", "..")

# Finding B: routing compares Swift Strings (hasPrefix, split on "/") by grapheme cluster: an id
# whose first scalar extends the "/" before it (a combining mark, an emoji skin-tone modifier,
# ZWJ), or whose last scalar is a prepended one that takes the "/" after it, glues onto that "/"
# and the route is missed: POST /v1/rides/%F0%9F%8F%BB/pause is answered 405 "only GET and HEAD
# are served", GET /rides/%CC%81 404 "no such file", instead of 400 bad_request.
EMOJI_MODIFIERS = range(0x1F3FB, 0x1F400)
PREPEND = {0x0600, 0x0601, 0x0602, 0x0603, 0x0604, 0x0605, 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2,
           0x0D4E, 0x110BD, 0x110CD, 0x111C2, 0x111C3, 0x1193F, 0x11941, 0x11A3A, 0x11A84, 0x11A85,
           0x11A86, 0x11A87, 0x11A88, 0x11A89, 0x11D46}


def glues_to_a_slash(value):
    if not value:
        return False
    first, last = ord(value[0]), ord(value[-1])
    extends = unicodedata.category(value[0]) in ("Mn", "Mc", "Me") or first in EMOJI_MODIFIERS \
        or first in (0x200C, 0x200D) or 0xE0020 <= first <= 0xE007F
    return extends or last in PREPEND


def strings(value):
    """Every string in a (negative-mode, possibly nested) parameter value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def has_nul(value):
    # Finding C (issue 40, item 4, known): a NUL anywhere in the path or query gets no HTTP
    # answer, the connection is closed. --generation-allow-x00 false keeps NUL out of positive
    # data, but negative data (e.g. journal=%00 against `const: '1'`) still has them.
    return any("\x00" in s or "%00" in s for s in strings(value))


@schemathesis.hook
def filter_case(context, case):
    # Path parameters arrive here already quoted.
    path = {k: unquote_plus(v) if isinstance(v, str) else v for k, v in (case.path_parameters or {}).items()}
    ride_id = path.get("id")
    if ride_id in DOT_SEGMENTS:
        return False
    if isinstance(case.body, dict) and case.body.get("ride") in DOT_SEGMENTS:
        return False
    if isinstance(ride_id, str) and glues_to_a_slash(ride_id):
        return False
    if has_nul(path) or has_nul(case.query or {}):
        return False
    # Finding C too: another control byte in the path cuts it there (lws): POST
    # /v1/rides/S%C3%91%0Ac%3B/pause is answered 404 not_found "no such route: /v1/rides/SÑ"
    # instead of 400 bad_request (issue 40 item 4 asks for 400 for any control byte).
    if any(ord(c) < 0x20 or ord(c) == 0x7F for v in strings(path) for c in v):
        return False
    return True
