"""The APNs, Google OAuth and FCM stand-ins themselves (tests/pushstandins.py): what they accept,
what each check refuses, the scripted answers, TLS against the private CA, HTTP/2 multiplexing.

The clients here mint real ES256/RS256 tokens with PyJWT (and by hand with cryptography, so the
stand-in's verifier is not only ever checked against the library it uses itself), speak HTTP/2
with h2 and HTTP/1.1 with urllib, and, as a second opinion, run the curl CLI: Debian's libcurl
with OpenSSL and nghttp2, the stack issue 38 puts under the server's outbound calls."""

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

sys.path.insert(0, os.path.dirname(__file__))
import pushstandins as P  # noqa: E402

TOKEN = "a1" * 32                       # a device token as APNs gives them: hex, here 32 bytes
OTHER = "b2" * 80                       # Live Activity push tokens are longer


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return P.make_pki(tmp_path_factory.mktemp("push"))


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    return P.ApnsKey.create(tmp_path_factory.mktemp("apnskey"))


@pytest.fixture
def apns(pki, key):
    with P.ApnsStandIn(pki, key) as s:
        yield s


@pytest.fixture
def google(pki, tmp_path):
    with P.GoogleStandIns(pki, tmp_path) as g:
        yield g


@pytest.fixture
def h2c(pki):
    """make(url) -> an HTTP/2 client verified against the private CA; all closed at the end."""
    made = []

    def make(url):
        c = P.H2Client(url, pki.client_context())
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def push_headers(key, token=None, **over):
    """The headers issue 38 has the server send for a Live Activity update; over: name=value
    replaces one (underscores for dashes), name=None leaves it out."""
    h = {"authorization": "bearer " + (token or key.provider_token()), "apns-push-type": "liveactivity",
         "apns-topic": key.topic, "apns-priority": "10", "apns-expiration": str(int(time.time()) + 3600)}
    for k, v in over.items():
        k = k.replace("_", "-")
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return list(h.items())


def live_body(event="update", state=None, **aps):
    doc = {"aps": {"timestamp": int(time.time()), "event": event,
                   "content-state": state if state is not None else
                   {"ride": "r-1", "state": "riding", "elapsed": 192, "at": int(time.time() * 1000),
                    "fare": 1040, "currency": "KRW"}}}
    for k, v in aps.items():
        k = k.replace("_", "-")
        if v is None:
            doc["aps"].pop(k, None)
        else:
            doc["aps"][k] = v
    return json.dumps(doc).encode()


def push(client, key, token=TOKEN, headers=None, body=None):
    status, hdrs, out = client.request("POST", "/3/device/" + token,
                                       push_headers(key) if headers is None else headers,
                                       live_body() if body is None else body)
    return status, hdrs, json.loads(out) if out else None


def open_text(path):
    return Path(path).read_text()


def b64(data):
    return P.b64url(data)


def es256_by_hand(private_key, header, claims, der=False):
    """An ES256 JWT made without PyJWT: JOSE wants the raw 64-byte r||s, libcrypto's ECDSA_sign
    gives DER (the usual bug in a hand-written signer, so the stand-in must refuse it)."""
    signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    sig = private_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
    if not der:
        r, s = decode_dss_signature(sig)
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return signing_input + "." + b64(sig)


def opener(ctx):
    # no proxy from the environment: the stand-ins are on 127.0.0.1
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))


def https_post(pki, url, body, headers, alpn=None):
    req = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    try:
        with opener(pki.client_context(alpn=alpn)).open(req, timeout=10) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def get_token(pki, g, assertion=None, grant=P.JWT_BEARER):
    form = {"grant_type": grant}
    if assertion is not False:
        form["assertion"] = assertion or g.account.assertion()
    return https_post(pki, g.oauth.token_uri, urllib.parse.urlencode(form).encode(),
                      {"Content-Type": "application/x-www-form-urlencoded"})


def fcm_message(token="fcm-token-1", data=None, **android):
    msg = {"token": token, "android": {"priority": "high", "ttl": "900s", "collapse_key": "r-1", **android},
           "data": data if data is not None else {"ride": "r-1", "state": "riding", "elapsed": "192", "fare": "1040"}}
    return {"message": msg}


def fcm_send(client, g, doc, bearer=None, project=None):
    headers = [("content-type", "application/json")]
    if bearer is not False:
        headers.append(("authorization", "Bearer " + (bearer or get_token_value(g))))
    status, hdrs, out = client.request("POST", "/v1/projects/%s/messages:send" % (project or g.account.project_id),
                                       headers, json.dumps(doc).encode())
    return status, hdrs, json.loads(out)


def get_token_value(g):
    # a token issued by the stand-in, as the server would get it (the HTTP round trip is tested below)
    status, _, doc = get_token(g.pki, g)
    assert status == 200, doc
    return doc["access_token"]


# ---- APNs: what it accepts --------------------------------------------------------------------------

def test_apns_accepts_a_live_activity_update_and_records_it(apns, key, h2c):
    c = h2c(apns.url)
    headers = push_headers(key, apns_id="8D2C3A1E-5B6F-4C7D-8E9F-0A1B2C3D4E5F")
    status, hdrs, out = push(c, key, headers=headers)
    assert (status, out) == (200, None)
    assert hdrs["apns-id"] == "8D2C3A1E-5B6F-4C7D-8E9F-0A1B2C3D4E5F"   # Apple echoes the request's id
    [rec] = apns.requests
    assert (rec.http, rec.method, rec.token, rec.status, rec.reason) == ("2", "POST", TOKEN, 200, "")
    assert (rec.event, rec.priority, rec.content_state["fare"]) == ("update", 10, 1040)
    assert rec.headers["apns-topic"] == "com.example.ridepush.push-type.liveactivity"


def test_apns_accepts_end_with_dismissal_date_and_push_to_start(apns, key, h2c):
    c = h2c(apns.url)
    end = live_body("end", dismissal_date=int(time.time()) + 900)
    start = live_body("start", attributes_type="RideAttributes", attributes={"ride": "r-2", "plan": "Standard"},
                      alert={"title": "Ride started", "body": "r-2"})
    assert push(c, key, body=end)[0] == 200
    assert push(c, key, token=OTHER, headers=push_headers(key, apns_priority="5"), body=start)[0] == 200
    recs = apns.wait_accepted(2, timeout=5)
    assert [(r.event, r.priority, r.token) for r in recs] == [("end", 10, TOKEN), ("start", 5, OTHER)]
    assert recs[0].aps["dismissal-date"] > time.time() and recs[1].aps["attributes-type"] == "RideAttributes"


def test_apns_token_made_by_hand_is_accepted_and_a_der_signature_is_refused(apns, key, h2c):
    c = h2c(apns.url)
    header, claims = {"alg": "ES256", "kid": key.key_id}, {"iss": key.team_id, "iat": int(time.time())}
    raw = es256_by_hand(key.private_key, header, claims)
    assert push(c, key, headers=push_headers(key, token=raw))[0] == 200
    der = es256_by_hand(key.private_key, header, claims, der=True)
    assert push(c, key, headers=push_headers(key, token=der))[::2] == (403, {"reason": "InvalidProviderToken"})


def test_apns_two_requests_in_flight_on_one_connection_share_its_id(apns, key, h2c):
    c = h2c(apns.url)
    # both streams are sent before either answer is read: multiplexed, not one after the other
    a = c.send("POST", "/3/device/" + TOKEN, push_headers(key), live_body())
    b = c.send("POST", "/3/device/" + OTHER, push_headers(key), live_body())
    assert c.response(b)[0] == 200 and c.response(a)[0] == 200
    push(h2c(apns.url), key)                            # another connection gets another id
    recs = apns.wait_accepted(3, timeout=5)
    assert recs[0].conn == recs[1].conn != recs[2].conn
    assert {recs[0].stream, recs[1].stream} == {a, b} and apns.connection_ids() == sorted({recs[0].conn, recs[2].conn})


def test_apns_a_delayed_answer_does_not_hold_the_connections_other_streams(apns, key, h2c):
    apns.answer_next(503, "ServiceUnavailable", token=TOKEN, delay=1.5)
    c = h2c(apns.url)
    slow = c.send("POST", "/3/device/" + TOKEN, push_headers(key), live_body())
    t0 = time.monotonic()
    fast = c.send("POST", "/3/device/" + OTHER, push_headers(key), live_body())
    assert c.response(fast)[0] == 200
    assert time.monotonic() - t0 < 1.0                  # answered while the first stream still waits
    status, _, out = c.response(slow)
    assert (status, json.loads(out)) == (503, {"reason": "ServiceUnavailable"})


# ---- APNs: what each check refuses -------------------------------------------------------------------

def _other_p256():
    return ec.generate_private_key(ec.SECP256R1())


@pytest.mark.parametrize("why, make, reason", [
    ("signed by another key", lambda k: k.provider_token(key=_other_p256()), "InvalidProviderToken"),
    ("iat over an hour old", lambda k: k.provider_token(iat=int(time.time()) - 3601), "ExpiredProviderToken"),
    ("iat in the future", lambda k: k.provider_token(iat=int(time.time()) + 600), "InvalidProviderToken"),
    ("another key id", lambda k: k.provider_token(kid="ABCDEFGHIJ"), "InvalidProviderToken"),
    ("another team", lambda k: k.provider_token(iss="ZZZZZZZZZZ"), "InvalidProviderToken"),
    ("iat as a string", lambda k: k.provider_token(iat=str(int(time.time()))), "InvalidProviderToken"),
    ("HS256, not ES256", lambda k: jwt.encode({"iss": k.team_id, "iat": int(time.time())}, "x" * 32,
                                              algorithm="HS256", headers={"kid": k.key_id}), "InvalidProviderToken"),
    ("not a JWT", lambda k: "not-a-jwt", "InvalidProviderToken"),
])
def test_apns_refuses_a_bad_provider_token(apns, key, h2c, why, make, reason):
    status, _, out = push(h2c(apns.url), key, headers=push_headers(key, token=make(key)))
    assert (status, out) == (403, {"reason": reason}), why
    [rec] = apns.requests
    assert rec.reason == reason and rec.detail      # the record says why, for a failing test's message


def test_apns_refuses_a_push_without_authorization(apns, key, h2c):
    status, _, out = push(h2c(apns.url), key, headers=push_headers(key, authorization=None))
    assert (status, out) == (403, {"reason": "MissingProviderToken"})


@pytest.mark.parametrize("over, status, reason", [
    ({"apns_push_type": "alert"}, 400, "InvalidPushType"),
    ({"apns_push_type": None}, 400, "InvalidPushType"),
    ({"apns_topic": None}, 400, "MissingTopic"),
    ({"apns_topic": "com.example.ridepush"}, 400, "TopicDisallowed"),
    ({"apns_topic": "com.example.other.push-type.liveactivity"}, 400, "DeviceTokenNotForTopic"),
    ({"apns_priority": "1"}, 400, "BadPriority"),
    ({"apns_expiration": "soon"}, 400, "BadExpirationDate"),
    ({"apns_id": "not-a-uuid"}, 400, "BadMessageId"),
    ({"apns_collapse_id": "c" * 65}, 400, "BadCollapseId"),
])
def test_apns_refuses_wrong_headers(apns, key, h2c, over, status, reason):
    assert push(h2c(apns.url), key, headers=push_headers(key, **over))[::2] == (status, {"reason": reason})


@pytest.mark.parametrize("path, status, reason", [
    ("/3/device/" + "zz" * 32, 400, "BadDeviceToken"),
    ("/3/device/" + "ab" * 8 + "a", 400, "BadDeviceToken"),
    ("/3/device/", 400, "MissingDeviceToken"),
    ("/2/device/" + TOKEN, 404, "BadPath"),
])
def test_apns_refuses_a_bad_path_or_device_token(apns, key, h2c, path, status, reason):
    got, _, out = h2c(apns.url).request("POST", path, push_headers(key), live_body())
    assert (got, json.loads(out)) == (status, {"reason": reason})


def test_apns_payload_of_4096_bytes_passes_and_4097_is_too_large(apns, key, h2c):
    c = h2c(apns.url)

    def sized(n):
        body = live_body(state={"ride": "r-1", "pad": ""})
        body = live_body(state={"ride": "r-1", "pad": "x" * (n - len(body))})
        assert len(body) == n
        return body
    assert push(c, key, body=sized(4096))[0] == 200
    assert push(c, key, body=sized(4097))[::2] == (413, {"reason": "PayloadTooLarge"})
    assert push(c, key, body=b"")[::2] == (400, {"reason": "PayloadEmpty"})


@pytest.mark.parametrize("why, body", [
    ("timestamp in milliseconds", live_body(timestamp=int(time.time() * 1000))),
    ("timestamp as a string", live_body(timestamp=str(int(time.time())))),
    ("no timestamp", live_body(timestamp=None)),
    ("an unknown event", live_body("refresh")),
    ("no content-state", live_body(content_state=None)),
    ("dismissal-date on an update", live_body(dismissal_date=int(time.time()) + 900)),
    ("dismissal-date in milliseconds as a float", live_body("end", dismissal_date=time.time() * 1000)),
    ("start without attributes-type", live_body("start", attributes={"ride": "r-1"})),
    ("start without attributes", live_body("start", attributes_type="RideAttributes")),
    ("not an aps object", json.dumps({"event": "update"}).encode()),
    ("not JSON", b"{aps:"),
])
def test_apns_refuses_a_live_activity_payload_the_device_would_drop(apns, key, h2c, why, body):
    status, _, out = push(h2c(apns.url), key, body=body)
    assert (status, out["reason"]) == (400, "StandInInvalidPayload"), why
    assert out["detail"]                                 # says which field, for the failing test


def test_apns_speaks_http2_only(apns, key, pki):
    # An HTTP/1.1 client (ALPN http/1.1 only) completes TLS but gets no HTTP from APNs.
    req = urllib.request.Request(apns.url + "/3/device/" + TOKEN, data=live_body(), method="POST",
                                 headers=dict(push_headers(key)))
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        opener(pki.client_context(alpn=("http/1.1",))).open(req, timeout=10)
    assert apns.requests == []
    deadline = time.monotonic() + 5
    while not apns.refused_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "no ALPN h2" in apns.refused_connections[0][1]


# ---- APNs: scripted answers ------------------------------------------------------------------------------

def test_apns_scripted_answers_per_token_and_per_count(apns, key, h2c):
    c = h2c(apns.url)
    apns.answer_next(410, "Unregistered", token=OTHER)
    apns.answer_next(429, "TooManyRequests")
    apns.answer_next(503, "ServiceUnavailable")
    status, _, out = push(c, key, token=OTHER)
    assert (status, out["reason"]) == (410, "Unregistered")
    assert abs(out["timestamp"] - time.time() * 1000) < 60_000      # Apple's 410 timestamp is in ms
    assert push(c, key)[::2] == (429, {"reason": "TooManyRequests"})
    assert push(c, key)[::2] == (503, {"reason": "ServiceUnavailable"})
    assert push(c, key)[0] == 200 and push(c, key, token=OTHER)[0] == 200    # the script is used up
    apns.answer_next(400, "BadDeviceToken", token=TOKEN)
    assert push(c, key)[::2] == (400, {"reason": "BadDeviceToken"})
    assert [r.scripted for r in apns.requests] == [True, True, True, False, False, True]
    lines = apns.transcript().splitlines()
    assert len(lines) == 6 and "update p10" in lines[0] and lines[0].endswith("-> 410 Unregistered")


def test_apns_a_scripted_answer_is_given_only_to_a_valid_push(apns, key, h2c):
    c = h2c(apns.url)
    apns.answer_next(410, "Unregistered")
    assert push(c, key, headers=push_headers(key, apns_topic="x.push-type.liveactivity"))[0] == 400
    assert push(c, key)[0] == 410


def test_apns_unregister_answers_410_to_every_later_push(apns, key, h2c):
    c = h2c(apns.url)
    apns.unregister(TOKEN)
    assert [push(c, key)[0] for _ in range(3)] == [410, 410, 410]
    assert push(c, key, token=OTHER)[0] == 200


def test_apns_expired_provider_tokens_pass_again_only_when_signed_anew(apns, key, h2c):
    c = h2c(apns.url)
    old = key.provider_token(iat=int(time.time()) - 60)
    assert push(c, key, headers=push_headers(key, token=old))[0] == 200
    apns.expire_provider_tokens()
    assert push(c, key, headers=push_headers(key, token=old))[::2] == (403, {"reason": "ExpiredProviderToken"})
    assert push(c, key, headers=push_headers(key, token=key.provider_token()))[0] == 200
    assert len(apns.provider_tokens) == 2
    apns.answer_next(403, "ExpiredProviderToken")         # or scripted, whatever the token
    assert push(c, key)[::2] == (403, {"reason": "ExpiredProviderToken"})


# ---- TLS: the private CA -----------------------------------------------------------------------------

def test_tls_is_verified_against_the_private_ca_and_refused_without_it(apns, key, pki):
    # the system's CAs do not know the private CA: the client refuses the stand-in
    ctx = ssl.create_default_context()
    ctx.set_alpn_protocols(["h2"])
    with pytest.raises(ssl.SSLCertVerificationError):
        P.H2Client(apns.url, ctx)
    # a certificate made for 127.0.0.1 and localhost, not for another name
    wrong_name = pki.client_context()
    with socket.create_connection(("127.0.0.1", apns.port), timeout=5) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            wrong_name.wrap_socket(raw, server_hostname="api.push.apple.com")
    with P.H2Client("https://localhost:%d" % apns.port, pki.client_context()) as c:
        assert push(c, key)[0] == 200
    deadline = time.monotonic() + 5
    while len(apns.refused_connections) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all("handshake failed" in why for _, why in apns.refused_connections)
    assert len(apns.refused_connections) == 2 and len(apns.requests) == 1


def test_curl_with_the_private_ca_multiplexes_two_pushes_on_one_connection(apns, key, pki, tmp_path):
    """Debian's curl (libcurl, OpenSSL, nghttp2: what the server's outbound calls are built on)
    verifies the stand-in with --cacert, refuses it without, and sends two parallel pushes as two
    streams of one connection."""
    curl = shutil.which("curl")
    assert curl, "curl is needed (make deps-test installs it)"
    body = tmp_path / "push.json"
    body.write_bytes(live_body())
    hdr = sum((["-H", "%s: %s" % kv] for kv in push_headers(key)), [])
    # options before the URLs apply to both (one body, one -o each); --parallel waits for the
    # first connection to say it multiplexes rather than opening a second one
    common = [curl, "--noproxy", "*", "-sS", "--http2", "--max-time", "10", "-w", "%{http_code} %{http_version}\\n",
              "--data-binary", "@%s" % body] + hdr
    r = subprocess.run(common + ["--cacert", pki.ca, "--parallel", "-o", "/dev/null", "-o", "/dev/null",
                                 apns.url + "/3/device/" + TOKEN, apns.url + "/3/device/" + OTHER],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["200 2", "200 2"]
    recs = apns.wait_accepted(2, timeout=5)
    assert recs[0].conn == recs[1].conn and recs[0].stream != recs[1].stream
    env = {k: v for k, v in os.environ.items() if k not in ("CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")}
    r = subprocess.run(common + ["-o", "/dev/null", apns.url + "/3/device/" + TOKEN],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 60, (r.returncode, r.stderr)      # 60: peer certificate cannot be authenticated
    assert len(apns.requests) == 2


def test_curl_gets_an_access_token_and_sends_an_fcm_message(pki, google, tmp_path):
    """The Google side through curl: the form-encoded JWT-bearer grant over HTTP/1.1, then
    messages:send over h2 with the token, refused with a number among the data values and
    accepted with strings only."""
    curl = shutil.which("curl")
    assert curl, "curl is needed (make deps-test installs it)"
    common = [curl, "--noproxy", "*", "-sS", "--max-time", "10", "--cacert", pki.ca, "-w", "\\n%{http_code} %{http_version}"]
    r = subprocess.run(common + ["--data-urlencode", "grant_type=" + P.JWT_BEARER,
                                 "--data-urlencode", "assertion=" + google.account.assertion(), google.oauth.token_uri],
                       capture_output=True, text=True, timeout=30)
    body, _, status = r.stdout.rpartition("\n")
    assert (r.returncode, status) == (0, "200 1.1"), (r.stderr, r.stdout)
    token = json.loads(body)["access_token"]
    url = google.fcm.url + "/v1/projects/%s/messages:send" % google.account.project_id
    results = []
    for data in ({"ride": "r-1", "fare": 1040}, {"ride": "r-1", "fare": "1040"}):
        msg = tmp_path / "msg.json"
        msg.write_text(json.dumps(fcm_message(data=data)))
        r = subprocess.run(common + ["--http2", "-H", "Authorization: Bearer " + token, "-H",
                                     "Content-Type: application/json", "--data-binary", "@%s" % msg, url],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        results.append(r.stdout.rpartition("\n")[2])
    assert results == ["400 2", "200 2"]
    assert [(r.http, r.status) for r in google.fcm.requests] == [("2", 400), ("2", 200)]


# ---- Google's OAuth token endpoint ---------------------------------------------------------------------

def test_oauth_issues_an_access_token_for_the_service_accounts_assertion(pki, google):
    status, hdrs, doc = get_token(pki, google)
    assert status == 200 and set(doc) == {"access_token", "expires_in", "token_type"}
    assert (doc["expires_in"], doc["token_type"]) == (3599, "Bearer") and google.oauth.token_ok(doc["access_token"])
    [rec] = google.oauth.requests
    assert (rec.http, rec.status, rec.payload["grant_type"]) == ("1.1", 200, P.JWT_BEARER)


def _other_rsa():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.mark.parametrize("why, make, error", [
    ("signed by another key", lambda a: a.assertion(key=_other_rsa()), "invalid_grant"),
    ("another issuer", lambda a: a.assertion(iss="someone@else.iam.gserviceaccount.com"), "invalid_grant"),
    ("another audience", lambda a: a.assertion(aud="https://oauth2.example/token"), "invalid_grant"),
    ("a lifetime over an hour", lambda a: a.assertion(lifetime=3601), "invalid_grant"),
    ("issued two hours ago", lambda a: a.assertion(iat=int(time.time()) - 7200), "invalid_grant"),
    ("no exp", lambda a: a.assertion(exp=None), "invalid_grant"),
    ("another kid", lambda a: a.assertion(kid="0" * 40), "invalid_grant"),
    ("a scope without firebase.messaging", lambda a: a.assertion(scope="https://www.googleapis.com/auth/cloud-platform"),
     "invalid_scope"),
    ("no scope", lambda a: a.assertion(scope=None), "invalid_scope"),
])
def test_oauth_refuses_a_bad_assertion(pki, google, why, make, error):
    status, _, doc = get_token(pki, google, make(google.account))
    assert (status, doc["error"]) == (400, error), why
    assert doc["error_description"] and google.oauth.issued == {}


def test_oauth_refuses_another_grant_or_no_assertion(pki, google):
    assert get_token(pki, google, grant="client_credentials")[::2] == (
        400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type: client_credentials"})
    assert get_token(pki, google, assertion=False)[2]["error"] == "invalid_request"


def test_oauth_scripted_failure_then_success(pki, google):
    google.oauth.fail_next(503, "temporarily_unavailable")
    assert get_token(pki, google)[0] == 503
    assert get_token(pki, google)[0] == 200
    assert [r.scripted for r in google.oauth.requests] == [True, False]


# ---- FCM v1 ---------------------------------------------------------------------------------------------

def test_fcm_accepts_a_message_over_http2_and_http1(pki, google, h2c):
    c = h2c(google.fcm.url)
    status, _, doc = fcm_send(c, google, fcm_message())
    assert status == 200 and doc["name"].startswith("projects/ridepush-test/messages/")
    status, _, doc = https_post(pki, google.fcm.url + "/v1/projects/ridepush-test/messages:send",
                                json.dumps(fcm_message("fcm-token-2")).encode(),
                                {"Content-Type": "application/json", "Authorization": "Bearer " + get_token_value(google)})
    assert status == 200
    recs = google.fcm.wait_accepted(2, timeout=5)
    assert [(r.http, r.token) for r in recs] == [("2", "fcm-token-1"), ("1.1", "fcm-token-2")]
    assert recs[0].message["data"]["fare"] == "1040" and recs[0].message["android"]["priority"] == "high"


@pytest.mark.parametrize("why, bearer", [("no authorization", False), ("a token it never issued", "ya29.made-up")])
def test_fcm_refuses_a_missing_or_unknown_bearer(google, h2c, why, bearer):
    status, hdrs, doc = fcm_send(h2c(google.fcm.url), google, fcm_message(), bearer=bearer)
    assert (status, doc["error"]["code"], doc["error"]["status"]) == (401, 401, "UNAUTHENTICATED"), why
    assert hdrs["www-authenticate"].startswith("Bearer")


def test_fcm_refuses_a_revoked_or_expired_token(pki, tmp_path, h2c):
    with P.GoogleStandIns(pki, tmp_path, expires_in=1) as g:
        c = h2c(g.fcm.url)
        token = get_token_value(g)
        assert fcm_send(c, g, fcm_message(), bearer=token)[0] == 200
        time.sleep(1.2)                                     # past expires_in
        assert fcm_send(c, g, fcm_message(), bearer=token)[0] == 401
        fresh = get_token_value(g)
        g.oauth.revoke_tokens()
        assert fcm_send(c, g, fcm_message(), bearer=fresh)[0] == 401


@pytest.mark.parametrize("value", [1040, 3.5, True, None, {"a": "b"}, ["x"]])
def test_fcm_refuses_a_data_value_that_is_not_a_string(google, h2c, value):
    data = {"ride": "r-1", "fare": value}
    status, _, doc = fcm_send(h2c(google.fcm.url), google, fcm_message(data=data))
    assert status == 400 and doc["error"]["code"] == 400 and doc["error"]["status"] == "INVALID_ARGUMENT"
    assert "message.data[1].value" in doc["error"]["message"]
    assert doc["error"]["details"][0]["errorCode"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("why, doc", [
    ("a misspelt message field", {"message": {**fcm_message()["message"], "andriod": {}}}),
    ("a misspelt android field", fcm_message(time_to_live="900s")),
    ("a reserved data key", fcm_message(data={"from": "x"})),
    ("a google-prefixed data key", fcm_message(data={"google.c": "x"})),
    ("ttl as a number", fcm_message(ttl=900)),
    ("an unknown priority", fcm_message(priority="urgent")),
    ("no token", {"message": {"data": {"a": "b"}}}),
    ("a topic and a token", {"message": {**fcm_message()["message"], "topic": "rides"}}),
    ("over 4096 bytes", fcm_message(data={"pad": "x" * 4096})),
])
def test_fcm_refuses_a_malformed_message(google, h2c, why, doc):
    status, _, out = fcm_send(h2c(google.fcm.url), google, doc)
    assert (status, out["error"]["status"]) == (400, "INVALID_ARGUMENT"), why


def test_fcm_refuses_another_project(google, h2c):
    status, _, doc = fcm_send(h2c(google.fcm.url), google, fcm_message(), project="someone-else")
    assert (status, doc["error"]["status"]) == (403, "PERMISSION_DENIED")


def test_fcm_scripted_unregistered_and_retry_after(google, h2c):
    c = h2c(google.fcm.url)
    bearer = get_token_value(google)
    google.fcm.answer_next(404, token="gone")
    google.fcm.answer_next(429, retry_after=7)
    google.fcm.answer_next(503, retry_after=1)
    status, _, doc = fcm_send(c, google, fcm_message("gone"), bearer=bearer)
    assert (status, doc["error"]["status"], doc["error"]["details"][0]["errorCode"]) == (404, "NOT_FOUND", "UNREGISTERED")
    status, hdrs, doc = fcm_send(c, google, fcm_message(), bearer=bearer)
    assert (status, hdrs["retry-after"], doc["error"]["status"]) == (429, "7", "RESOURCE_EXHAUSTED")
    status, hdrs, doc = fcm_send(c, google, fcm_message(), bearer=bearer)
    assert (status, hdrs["retry-after"], doc["error"]["status"]) == (503, "1", "UNAVAILABLE")
    assert fcm_send(c, google, fcm_message(), bearer=bearer)[0] == 200
    google.fcm.unregister("gone")
    assert [fcm_send(c, google, fcm_message("gone"), bearer=bearer)[0] for _ in range(2)] == [404, 404]
    assert [r.reason for r in google.fcm.requests] == ["UNREGISTERED", "QUOTA_EXCEEDED", "UNAVAILABLE", "",
                                                       "UNREGISTERED", "UNREGISTERED"]


# ---- the files the server under test is given ---------------------------------------------------------

def test_key_files_are_what_apple_and_google_hand_out(key, google, pki):
    p8 = Path(key.path).read_bytes()
    assert p8.startswith(b"-----BEGIN PRIVATE KEY-----") and os.stat(key.path).st_mode & 0o777 == 0o600
    loaded = serialization.load_pem_private_key(p8, None)
    assert isinstance(loaded.curve, ec.SECP256R1) and os.path.basename(key.path) == "AuthKey_%s.p8" % key.key_id
    assert len(key.key_id) == len(key.team_id) == 10
    subprocess.run(["openssl", "pkey", "-in", key.path, "-noout"], check=True, capture_output=True, timeout=30)
    sa = json.loads(open_text(google.account.path))
    assert sa["type"] == "service_account" and sa["token_uri"] == google.oauth.url + "/token"
    assert sa["client_email"].endswith("@ridepush-test.iam.gserviceaccount.com") and sa["project_id"] == "ridepush-test"
    assert isinstance(serialization.load_pem_private_key(sa["private_key"].encode(), None), rsa.RSAPrivateKey)


def test_push_standins_bundle_gives_the_serve_flags_and_stops_everything(tmp_path):
    with P.PushStandIns(tmp_path) as ps:
        args = ps.server_args()
        flags = dict(zip(args[::2], args[1::2]))
        assert flags["--apns-url"] == ps.apns.url and flags["--fcm-url"] == ps.fcm.url
        assert flags["--outbound-ca-file"] == ps.pki.ca and flags["--apns-key-id"] == ps.apns_key.key_id
        assert json.loads(open_text(flags["--fcm-service-account"]))["token_uri"] == ps.oauth.token_uri
        assert "127.0.0.1" in ps.env({"NO_PROXY": "example.org"})["NO_PROXY"].split(",")
        ports = [ps.apns.port, ps.oauth.port, ps.fcm.port]
    for port in ports:                       # stopped: nothing listens there any more
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
