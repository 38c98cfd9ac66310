"""The identity provider's tokens against the real server (issue 27, item 3): RS256, ES256 and
EdDSA tokens made with Python's `cryptography` (test_jwks.py's Key) are accepted by kid over the
WebSocket `auth` message, `?token=` and HTTP Bearer; refused (4401 / 401) for a foreign key, an
unknown kid and the HS256-with-the-public-key confusion, and for another issuer or audience
(issue 36, finding 3: a shared key set signs for other projects too); the server refuses to start
with keys but without --jwt-issuer and --jwt-audience unless --jwt-any-issuer says so; and SIGHUP
rotates the keys while an open connection keeps its ticks. Every wait is bounded."""
import json
import os
import time
import urllib.error
import urllib.request

import pytest
from websockets.exceptions import ConnectionClosed

from rp import Client, Server
from test_jwks import KIDS, KINDS, SECRET, Key, claims, hs256

ENV = {"RIDEPUSH_JWT_SECRET": SECRET}
# The issuer and audience test_jwks.claims() carries, pinned as a deployment pins them.
PINNED = ("--jwt-issuer", "https://idp.example/", "--jwt-audience", "ridepush")


def rid(tag):
    return "r-%s-%d" % (tag, time.monotonic_ns() % 10**9)


def write_jwks(path, named_keys):
    """Replaces the file whole (write beside, rename), as a deploy tool would."""
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps({"keys": [key.jwk(kid) for kid, key in named_keys.items()]}))
    os.replace(tmp, path)


def bearer(server, path, token):
    return server.get(path, headers={"Authorization": "Bearer " + token})


def expect_unauthorized(cl, timeout=3):
    err = cl.wait_for(lambda m: m.get("type") == "error", timeout)
    assert err["code"] == "unauthorized", err
    with pytest.raises(ConnectionClosed) as info:
        for _ in range(20):
            cl.ws.recv(timeout=timeout)
    assert info.value.rcvd is not None and info.value.rcvd.code == 4401, info.value
    return err


def refused_at_auth(server, token):
    cl = Client(server.ws)
    cl.send({"type": "auth", "id": "a1", "token": token})
    return expect_unauthorized(cl)


def authenticated(server, token, sub="rider-7"):
    cl = Client(server.ws)
    reply = cl.request({"type": "auth", "token": token})
    assert reply["type"] == "authenticated" and reply["sub"] == sub and reply["scope"] == "control", reply
    return cl


def ticks_of(cl, n, ride, timeout=3):
    return [cl.wait_for(lambda m: m["type"] == "tick" and m["ride"] == ride, timeout) for _ in range(n)]


def wait_for_line(server, text, after, timeout=5):
    """The index of the first server output line from `after` on that contains `text`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i in range(after, len(server.lines)):
            if text in server.lines[i]:
                return i
        time.sleep(0.05)
    raise AssertionError("no %r in the server's output:\n%s" % (text, "\n".join(server.lines[after:])))


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    keys = {kind: Key(kind) for kind in KINDS}
    foreign = {kind: Key(kind) for kind in KINDS}
    path = tmp_path_factory.mktemp("jwks-serve") / "jwks.json"
    write_jwks(path, {KIDS[k]: keys[k] for k in KINDS})
    return {"keys": keys, "foreign": foreign, "jwks": str(path)}


@pytest.fixture(scope="module")
def srv(provider):
    """Tokens required: the JWKS and, beside it, the HS256 secret."""
    with Server("--jwks-file", provider["jwks"], *PINNED, auth="jwt", env=ENV) as s:
        yield s


@pytest.mark.parametrize("kind", KINDS)
def test_accepted_by_kid_over_auth_url_token_and_bearer(srv, provider, kind):
    token = provider["keys"][kind].token(claims(), KIDS[kind])
    ride = rid("idp-" + kind)
    with authenticated(srv, token) as cl:
        assert cl.request({"type": "start", "ride": ride})["type"] == "state"
    with Client(srv.ws + "?token=" + token) as cl:
        assert cl.request({"type": "subscribe", "ride": ride})["type"] == "state"
    status, body, _ = bearer(srv, "/rides/" + ride, token)
    assert status == 200 and body["ride"] == ride and body["owner"] == "rider-7", body


def test_the_shared_secret_still_works_beside_the_keys(srv):
    c = claims()
    del c["iss"]
    with authenticated(srv, hs256(c, SECRET.encode())) as cl:
        assert cl.request({"type": "start", "ride": rid("hs")})["type"] == "state"


@pytest.mark.parametrize("kind", KINDS)
def test_refused_for_a_foreign_key_an_unknown_kid_and_hs256_with_the_public_key(srv, provider, kind):
    key = provider["keys"][kind]
    ride = rid("refused-" + kind)
    with authenticated(srv, key.token(claims(), KIDS[kind])) as owner:
        owner.request({"type": "start", "ride": ride})
    confusion = hs256(claims(), key.pem(), header={"alg": "HS256", "typ": "JWT", "kid": KIDS[kind]})
    cases = {
        "token signature does not match": provider["foreign"][kind].token(claims(), KIDS[kind]),
        'token kid "retired-2019" is not a known key': key.token(claims(), "retired-2019"),
        'token alg HS256 does not match key "%s"' % KIDS[kind]: confusion,
    }
    for why, token in cases.items():
        err = refused_at_auth(srv, token)
        assert why in err["message"], err
        status, body, _ = bearer(srv, "/rides/" + ride, token)
        assert status == 401 and body["error"]["code"] == "unauthorized" and why in body["error"]["message"], body


def test_an_asymmetric_token_without_the_keys_configured_is_refused(provider):
    """The same server with only the secret: the provider's token has nothing to be checked by."""
    with Server(auth="jwt", env=ENV) as plain:
        err = refused_at_auth(plain, provider["keys"]["ES256"].token(claims(), KIDS["ES256"]))
        assert "token alg \"ES256\" refused (accepted: HS256)" in err["message"], err


def test_keys_with_auth_off_or_a_bad_key_file_are_refused_at_start(provider, tmp_path):
    off = Server("--jwks-file", provider["jwks"], auth="none")
    with pytest.raises(RuntimeError, match="--jwks-file, --jwks-url and --jwt-public-key need --auth jwt"):
        off.start()
    broken = tmp_path / "broken.json"
    broken.write_text('{"keys": []}')
    bad = Server("--jwks-file", str(broken), *PINNED, auth="jwt", env=ENV)
    with pytest.raises(RuntimeError, match='the "keys" list is empty'):
        bad.start()


def test_sighup_rotates_the_keys_and_keeps_open_connections(tmp_path):
    old, new = Key("RS256"), Key("EdDSA")
    path = tmp_path / "jwks.json"
    write_jwks(path, {"rsa-old": old})
    # No secret: only the provider's keys (no generated secret, no links printed).
    env = {"RIDEPUSH_JWT_SECRET": ""}
    with Server("--jwks-file", str(path), *PINNED, auth="jwt", env=env) as s:
        assert any("identity provider keys: rsa-old RS256" in line for line in s.lines), s.lines
        assert not any("/?token=" in line for line in s.lines), s.lines
        ride = rid("rotate")
        live = authenticated(s, old.token(claims(), "rsa-old"))
        assert live.request({"type": "start", "ride": ride})["type"] == "state"
        assert live.request({"type": "subscribe", "ride": ride})["type"] == "state"
        ticks_of(live, 1, ride)
        # Without a secret there is nothing to sign a share link with: refused, connection kept.
        shared = live.request({"type": "share", "ride": ride})
        assert shared["type"] == "error" and shared["code"] == "forbidden" and "HS256 secret" in shared["message"], shared

        write_jwks(path, {"ed-new": new})
        mark = len(s.lines)
        s.proc.send_signal(1)  # SIGHUP
        wait_for_line(s, "keys reloaded: ed-new", mark)

        # The open connection stays open and keeps its ticks.
        ticks_of(live, 2, ride)
        # New tokens by the new kid are accepted, over auth and HTTP Bearer.
        fresh = new.token(claims(), "ed-new")
        with authenticated(s, fresh) as cl:
            assert cl.request({"type": "subscribe", "ride": ride})["type"] == "state"
        assert bearer(s, "/rides/" + ride, fresh)[0] == 200
        # Tokens by the removed kid: refused at their next auth, on the open connection too.
        removed = old.token(claims(), "rsa-old")
        assert bearer(s, "/rides/" + ride, removed)[0] == 401
        live.send({"type": "auth", "id": "again", "token": removed})
        err = expect_unauthorized(live)
        assert 'token kid "rsa-old" is not a known key' in err["message"], err

        # A broken file on SIGHUP: logged, and the keys in force stay.
        watcher = authenticated(s, new.token(claims(), "ed-new"))
        assert watcher.request({"type": "subscribe", "ride": ride})["type"] == "state"
        path.write_text('{"keys": [')
        mark = len(s.lines)
        s.proc.send_signal(1)
        line = wait_for_line(s, "keys not reloaded", mark)
        assert str(path) in s.lines[line], s.lines[line]
        ticks_of(watcher, 2, ride)
        assert bearer(s, "/rides/" + ride, new.token(claims(), "ed-new"))[0] == 200
        with authenticated(s, new.token(claims(), "ed-new")) as cl:
            assert cl.request({"type": "subscribe", "ride": ride})["type"] == "state"
        assert s.proc.poll() is None
        watcher.close()


def test_another_issuers_token_is_refused(srv, provider):
    """The same keys, another project's token (a shared key set signs for every project that
    uses it): its ops claim would read every ride and end the victim's. Refused for its iss,
    and for its aud where only the audience differs; the victim's ride is untouched."""
    key = provider["keys"]["RS256"]
    victim = rid("victim")
    with authenticated(srv, key.token(claims(sub="victim-1"), KIDS["RS256"]), sub="victim-1") as owner:
        assert owner.request({"type": "start", "ride": victim})["type"] == "state"
    cases = {
        "token iss is not the configured issuer": claims(sub="mallory", ops=True, iss="https://other-project.example/", aud="other-app"),
        "token aud does not name the configured audience": claims(sub="mallory", ops=True, aud="other-app"),
    }
    for why, c in cases.items():
        token = key.token(c, KIDS["RS256"])
        err = refused_at_auth(srv, token)
        assert why in err["message"], err
        status, body, _ = bearer(srv, "/rides", token)
        assert status == 401 and why in body["error"]["message"], body
        ended = urllib.request.Request(srv.http + "/v1/rides/%s/end" % victim, data=b"{}", method="POST",
                                       headers={"Authorization": "Bearer " + token, "Content-Type": "application/json",
                                                "Idempotency-Key": "k-" + why[:10].replace(" ", "-")})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(ended, timeout=5)
        assert refused.value.code == 401
    status, body, _ = bearer(srv, "/rides/" + victim, key.token(claims(sub="victim-1"), KIDS["RS256"]))
    assert status == 200 and body["state"] == "riding", body


@pytest.mark.parametrize("flag", ["--jwks-file", "--jwt-public-key"])
def test_keys_without_issuer_and_audience_are_refused_at_start(provider, tmp_path, flag):
    """Without both pins the server does not start, and says how to start it; --jwt-any-issuer
    starts it on purpose, with a warning, and then another project's token is accepted."""
    pem = tmp_path / "idp.pem"
    pem.write_bytes(provider["keys"]["ES256"].pem())
    keys = provider["jwks"] if flag == "--jwks-file" else str(pem)
    for pins in ((), ("--jwt-issuer", "https://idp.example/"), ("--jwt-audience", "ridepush")):
        with pytest.raises(RuntimeError, match="need --jwt-issuer and --jwt-audience .*add --jwt-any-issuer"):
            Server(flag, keys, *pins, auth="jwt", env=ENV).start()
    with Server(flag, keys, "--jwt-any-issuer", auth="jwt", env=ENV) as s:
        assert any("--jwt-any-issuer: the identity provider's tokens are accepted whatever their iss and aud" in line
                   for line in s.lines), s.lines
        other = claims(iss="https://other-project.example/", aud="other-app")
        with authenticated(s, provider["keys"]["ES256"].token(other, KIDS["ES256"] if flag == "--jwks-file" else None), sub="rider-7") as cl:
            assert cl.request({"type": "start", "ride": rid("any")})["type"] == "state"
