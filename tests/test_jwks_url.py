"""The identity provider's keys fetched from the provider (issue 40, item 2): `serve --jwks-url`
against a local HTTPS server (Python ssl + http.server on a thread, a private CA made with the
openssl CLI by pushstandins.make_pki, trusted with --outbound-ca-file) that serves a Keycloak-
shaped JWKS: an RS256 and an ES256 signing key beside an RSA-OAEP encryption key.

Checked: tokens by each signing key accepted, the encryption key skipped (logged once); a
rotated key (new kid) picked up at the first token naming it, without SIGHUP, and a second
unknown kid within the minute fetching nothing; the server up with the last keys while the
endpoint serves garbage, errors or is down (`/healthz` says `stale`, stays 200); started with the
endpoint down: provider tokens refused and `/healthz` degraded until the first set arrives; the
private CA not trusted without --outbound-ca-file; the set's age and the fetches on /metrics;
http:// and a missing issuer/audience pin refused at start. Every wait is bounded."""
import json
import re
import signal
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pushstandins import make_pki
from rp import Server
from test_jwks import Key, b64, claims, uint

PINNED = ("--jwt-issuer", "https://idp.example/", "--jwt-audience", "ridepush")
PATH = "/realms/rides/protocol/openid-connect/certs"


def keycloak_jwk(key, kid):
    """A signing key as Keycloak publishes it: use sig, alg, and the x5t it adds."""
    jwk = key.jwk(kid)
    jwk.update({"use": "sig", "alg": key.kind})
    jwk.setdefault("x5t", b64(b"not-checked-by-ridepush"))
    return jwk


def encryption_jwk(kid):
    """Keycloak's RSA-OAEP key for encrypted tokens: not a signing key."""
    n = Key("RS256").public.public_numbers()
    return {"kid": kid, "kty": "RSA", "alg": "RSA-OAEP", "use": "enc", "n": b64(uint(n.n, 256)), "e": b64(uint(n.e, 3))}


class Provider:
    """The identity provider's JWKS endpoint over TLS. `mode`: "ok" serves `keys` with
    `cache_control`, "garbage" a 200 that is not JSON, "error" a 503, "hang" the keys only once
    `release` is set. `down()` closes the port
    (connections refused), `up()` listens on the same port again."""

    def __init__(self, pki, port=0):
        self.pki = pki
        self.keys = []
        self.mode = "ok"
        self.cache_control = "max-age=60, must-revalidate, no-transform"
        self.requests = 0
        self.release = threading.Event()  # "hang" mode: answered once this is set
        self.lock = threading.Lock()
        self.port = port
        self.httpd = None

    @property
    def url(self):
        return "https://127.0.0.1:%d%s" % (self.port, PATH)

    def fetches(self):
        with self.lock:
            return self.requests

    def up(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                with provider.lock:
                    provider.requests += 1
                    mode, keys, cc = provider.mode, list(provider.keys), provider.cache_control
                if self.path != PATH:
                    self.send_error(404)
                    return
                if mode == "hang":
                    provider.release.wait(20)
                    with provider.lock:
                        keys = list(provider.keys)
                if mode == "error":
                    self.send_error(503)
                    return
                body = b"<html>gateway says hello</html>" if mode == "garbage" else json.dumps({"keys": keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", cc)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.pki.cert, self.pki.key)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        self.port = httpd.server_address[1]
        self.httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def down(self):
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("jwks-url"))


@pytest.fixture
def provider(pki):
    p = Provider(pki)
    p.signing = {"RS256": Key("RS256"), "ES256": Key("ES256")}
    p.kids = {"RS256": "kc-rsa-1", "ES256": "kc-ec-1"}
    p.keys = [keycloak_jwk(p.signing[k], p.kids[k]) for k in ("RS256", "ES256")] + [encryption_jwk("kc-enc-1")]
    p.up()
    yield p
    p.down()


def serve(provider, *extra, ca=True):
    args = ["--jwks-url", provider.url, *PINNED]
    if ca:
        args += ["--outbound-ca-file", provider.pki.ca]
    return Server(*args, *extra, auth="jwt")


def verdict(srv, token):
    """(status, error message) of an authenticated GET: 404 (no such ride) means accepted."""
    status, body, _ = srv.get("/rides/r-none", headers={"Authorization": "Bearer " + token})
    return status, (body.get("error", {}).get("message", "") if isinstance(body, dict) else body)


def accepted(srv, token):
    status, why = verdict(srv, token)
    return status == 404


def wait_until(pred, timeout=10, what="condition"):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("not within %ss: %s" % (timeout, what))
        time.sleep(0.1)


def metrics(srv):
    status, text, _ = srv.get("/metrics")
    assert status == 200
    return text


def metric(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def fetched(srv, result):
    return metric(metrics(srv), 'ridepush_jwks_fetch_total{result="%s"}' % result)


def health(srv):
    status, body, _ = srv.get("/healthz")
    return status, body


def test_each_signing_key_accepted_the_encryption_key_skipped_and_the_age_on_metrics(provider):
    with serve(provider) as srv:
        for kind, key in provider.signing.items():
            token = key.token(claims(), provider.kids[kind])
            assert verdict(srv, token)[0] == 404, (kind, verdict(srv, token))
        status, body = health(srv)
        assert status == 200 and body["identity_keys"] == "ok", body
        text = metrics(srv)
        assert metric(text, 'ridepush_jwks_fetch_total{result="ok"}') == 1, text
        assert metric(text, "ridepush_jwks_keys") == 2, text
        first = metric(text, "ridepush_jwks_age_seconds")
        assert first is not None and 0 <= first < 10, text
        time.sleep(1.2)
        later = metric(metrics(srv), "ridepush_jwks_age_seconds")
        assert later >= first + 1, (first, later)
        assert provider.fetches() == 1
        # The encryption key is not a signing key: a token naming it has no key to be checked
        # by (and, its kid unknown, makes the set be fetched once more: the same set).
        status, why = verdict(srv, provider.signing["RS256"].token(claims(), "kc-enc-1"))
        assert status == 401 and 'kid "kc-enc-1" is not a known key' in why, (status, why)
        wait_until(lambda: fetched(srv, "ok") == 2, timeout=10, what="the unknown kid's fetch")
        assert metric(metrics(srv), "ridepush_jwks_age_seconds") < later
        log = "\n".join(srv.lines)
        # Skipped and listed once: a refresh that brings the same set says nothing.
        assert log.count('(kid "kc-enc-1"): skipped, ') == 1, log
        assert log.count("identity provider keys kc-rsa-1 RS256, kc-ec-1 ES256; refreshed every 300 s") == 1, log  # max-age=60: the 5 min floor
        assert provider.fetches() == 2
        assert "ridepush: identity provider keys from %s: kc-rsa-1 RS256, kc-ec-1 ES256" % provider.url in log, log


def test_a_rotated_key_is_picked_up_at_the_first_token_naming_it_without_sighup(provider):
    with serve(provider) as srv:
        old = provider.signing["ES256"].token(claims(), provider.kids["ES256"])
        assert accepted(srv, old)
        rotated = Key("ES256")
        with provider.lock:  # the provider rotates: the new key published, the old one kept a while
            provider.keys = [keycloak_jwk(rotated, "kc-ec-2")] + provider.keys
        token = rotated.token(claims(), "kc-ec-2")
        # The token that names the new kid is refused now (its check never waits on the provider);
        # the fetch it caused runs on the fetch thread and a later token passes.
        status, why = verdict(srv, token)
        assert status == 401 and 'kid "kc-ec-2" is not a known key' in why, (status, why)
        wait_until(lambda: accepted(srv, token), timeout=10, what="the rotated key accepted")
        assert provider.fetches() == 2
        assert accepted(srv, old)
        assert metric(metrics(srv), "ridepush_jwks_keys") == 3
        # Made-up kids cannot make the server hammer the provider: within the minute, no fetch.
        for i in range(5):
            status, _ = verdict(srv, rotated.token(claims(), "made-up-%d" % i))
            assert status == 401
        time.sleep(1.5)
        assert provider.fetches() == 2
        assert fetched(srv, "ok") == 2


def test_a_provider_that_hangs_holds_no_request_of_the_server(provider):
    """The fetch waits on its own thread: while the provider sits on the request, tokens, the
    unknown kid that caused it and /healthz are answered at once."""
    with serve(provider) as srv:
        token = provider.signing["ES256"].token(claims(), provider.kids["ES256"])
        rotated = Key("RS256")
        provider.mode = "hang"
        with provider.lock:
            provider.keys = provider.keys + [keycloak_jwk(rotated, "kc-rsa-2")]
        new = rotated.token(claims(), "kc-rsa-2")
        started = time.monotonic()
        assert verdict(srv, new)[0] == 401
        wait_until(lambda: provider.fetches() == 2, timeout=5, what="the fetch under way")
        for _ in range(5):
            assert accepted(srv, token)
            assert health(srv)[0] == 200
        assert verdict(srv, new)[0] == 401  # still the old set, and no second fetch (rate)
        assert time.monotonic() - started < 5, "requests waited on the provider"
        provider.release.set()
        wait_until(lambda: accepted(srv, new), timeout=10, what="the key from the answer that hung")
        assert provider.fetches() == 2


def test_the_last_keys_stay_while_the_endpoint_serves_garbage_errors_or_is_down(provider):
    with serve(provider) as srv:
        token = provider.signing["RS256"].token(claims(), provider.kids["RS256"])
        assert accepted(srv, token)
        for mode, result in (("garbage", "invalid"), ("error", "status"), ("down", "unreachable")):
            before = fetched(srv, result)
            if mode == "down":
                provider.down()
            else:
                provider.mode = mode
            srv.proc.send_signal(signal.SIGHUP)  # the operator's "fetch now"
            wait_until(lambda: fetched(srv, result) > before, timeout=10, what="a %s fetch counted" % result)
            assert accepted(srv, token), mode
            status, body = health(srv)
            assert status == 200 and body["status"] == "ok" and body["identity_keys"] == "stale", body
            assert body["identity_keys_age_s"] >= 0
        text = metrics(srv)
        assert metric(text, 'ridepush_jwks_fetch_total{result="ok"}') == 1, text
        assert metric(text, "ridepush_jwks_keys") == 2, text
        assert metric(text, "ridepush_jwks_age_seconds") > 0, text
        log = "\n".join(srv.lines)
        assert "the last good key set stays in force" in log and "HTTP 503" in log, log
        assert log.count("SIGHUP: fetching --jwks-url %s now" % provider.url) == 3, log
        # Back up: the next fetch (an unknown kid here) takes the set again, and healthz says ok.
        provider.mode = "ok"
        provider.up()
        status, _ = verdict(srv, provider.signing["RS256"].token(claims(), "kc-unknown"))
        assert status == 401
        wait_until(lambda: fetched(srv, "ok") >= 2, timeout=10, what="the set fetched again")
        wait_until(lambda: health(srv)[1]["identity_keys"] == "ok", timeout=5, what="identity_keys ok")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_started_with_the_endpoint_down_refuses_provider_tokens_until_a_first_set(pki):
    provider = Provider(pki, port=free_port())
    key = Key("RS256")
    provider.keys = [keycloak_jwk(key, "kc-rsa-1"), encryption_jwk("kc-enc-1")]
    token = key.token(claims(), "kc-rsa-1")
    try:
        with serve(provider) as srv:
            status, body = health(srv)
            assert status == 503 and body["status"] == "degraded" and body["identity_keys"] == "failing", body
            assert body["identity_keys_age_s"] is None
            status, why = verdict(srv, token)
            assert status == 401 and "have not been fetched yet" in why, (status, why)
            text = metrics(srv)
            assert metric(text, "ridepush_jwks_age_seconds") is None, text
            assert metric(text, 'ridepush_jwks_fetch_total{result="unreachable"}') >= 1, text
            log = "\n".join(srv.lines)
            assert "no key set yet, so the identity provider's tokens are refused" in log, log
            assert "identity provider keys from %s: none yet" % provider.url in log, log
            provider.up()
            wait_until(lambda: accepted(srv, token), timeout=15, what="the first set fetched")
            status, body = health(srv)
            assert status == 200 and body["identity_keys"] == "ok", body
    finally:
        provider.down()


def test_the_private_ca_is_not_trusted_without_outbound_ca_file(provider):
    with serve(provider, ca=False) as srv:
        status, body = health(srv)
        assert status == 503 and body["identity_keys"] == "failing", body
        assert fetched(srv, "unreachable") >= 1
        assert provider.fetches() == 0  # the TLS handshake failed before any request
        token = provider.signing["RS256"].token(claims(), provider.kids["RS256"])
        assert verdict(srv, token)[0] == 401


@pytest.mark.parametrize("args, why", [
    (("--jwks-url", "http://127.0.0.1:9/certs", *PINNED), "--jwks-url must be an https:// URL"),
    (("--jwks-url", "ftp://idp.example/certs", *PINNED), "--jwks-url must be an https:// URL"),
    (("--jwks-url", "https://127.0.0.1:9/certs"), "need --jwt-issuer and --jwt-audience"),
    (("--jwks-url", "https://127.0.0.1:9/certs", "--jwt-issuer", "https://idp.example/"), "no audience given"),
    (("--jwks-url", "https://127.0.0.1:9/certs", "--jwks-file", "/dev/null", *PINNED), "--jwks-url goes without --jwks-file"),
])
def test_refused_at_start(args, why):
    with pytest.raises(RuntimeError, match=re.escape(why)):
        Server(*args, auth="jwt").start()


def test_refused_with_auth_off():
    with pytest.raises(RuntimeError, match="need --auth jwt"):
        Server("--jwks-url", "https://127.0.0.1:9/certs", auth="none").start()
