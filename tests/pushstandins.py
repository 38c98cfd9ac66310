"""Local stand-ins for APNs, Google's OAuth token endpoint and FCM v1, over TLS with a private CA.

This machine cannot reach Apple or Google, so each service gets a stand-in that checks what the
real one checks and answers in its shape (issue 38). Everything is made at test time: the CA and
the server certificate (openssl CLI), the APNs .p8 key and the Google service account (Python
cryptography); nothing private is committed.

    pki = make_pki(tmp_path)                   # ca.pem (give it to --outbound-ca-file), server cert
    key = ApnsKey.create(tmp_path)             # AuthKey_<KID>.p8, key_id, team_id, bundle_id
    with ApnsStandIn(pki, key) as apns:        # https://127.0.0.1:PORT, HTTP/2 only (ALPN h2)
        apns.answer_next(410, "Unregistered", token=TOKEN)
        ...                                    # the server under test pushes
        rec = apns.wait_requests(1, timeout=10)[0]
        assert rec.status == 200 and rec.event == "update" and rec.priority == 10

    with GoogleStandIns(pki, tmp_path) as g:   # OAuth token endpoint + FCM v1, one service account
        g.account.path                         # the service-account JSON (token_uri -> g.oauth)
        g.fcm.url, g.oauth.url

`PushStandIns(tmp_path)` starts all three and gives the serve flags and the environment.

Every stand-in records each request (`Record`: connection id, HTTP version, headers, decoded body,
the answer) and can be scripted to answer otherwise (`answer_next`), per device token or for the
next N requests. A scripted answer is given only to a request that passed every check, as the
real service checks the request before it looks at the device.
"""

import base64
import itertools
import json
import os
import queue
import re
import secrets
import select
import socket
import ssl
import string
import subprocess
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

HOST = "127.0.0.1"
MAX_BODY = 1 << 20          # a stand-in reads at most this much of one request (then resets it)
POLL = 0.05                 # how often a connection thread looks at its stop flag and send queue


# ---- the private CA and the server certificate ------------------------------------------------

@dataclass
class PKI:
    ca: str          # the CA certificate: what the server under test trusts (--outbound-ca-file)
    cert: str        # the stand-ins' certificate (SAN IP:127.0.0.1, DNS:localhost), signed by the CA
    key: str
    dir: str

    def client_context(self, alpn=("h2",)):
        """A client context that verifies the stand-ins against the private CA (and nothing else)."""
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.check_hostname = True
        if alpn:
            ctx.set_alpn_protocols(list(alpn))
        return ctx


def make_pki(directory):
    """A fresh CA and a server certificate signed by it, both valid for two days, made with the
    openssl CLI as the other TLS tests make theirs. The CA's key stays in `directory`."""
    d = Path(directory) / "push-pki"
    d.mkdir(parents=True, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)

    ca_key, ca, key, csr, cert, ext = (d / n for n in ("ca.key", "ca.pem", "server.key", "server.csr",
                                                       "server.pem", "server.ext"))
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-subj", "/CN=RidePush push stand-ins test CA", "-days", "2",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", ca_key, "-out", ca)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", csr)
    # A leaf a strict verifier accepts (libcurl's OpenSSL, Python's VERIFY_X509_STRICT): not a CA,
    # for TLS servers, names in the SAN (the CN is not looked at), key identifiers present.
    ext.write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
                   "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-set_serial",
            str(secrets.randbits(63)), "-days", "2", "-extfile", ext, "-out", cert)
    return PKI(ca=str(ca), cert=str(cert), key=str(key), dir=str(d))


# ---- key material for the server under test -----------------------------------------------------

def _apple_id(n=10):
    # Apple's key ids and team ids are 10 upper-case letters and digits.
    return "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(n))


@dataclass
class ApnsKey:
    """An APNs auth key as Apple hands it out: AuthKey_<KID>.p8 (PKCS#8 PEM, P-256), its key id,
    the team id, and the app's bundle id (the topic is BUNDLE.push-type.liveactivity)."""
    path: str
    key_id: str
    team_id: str
    bundle_id: str
    private_key: object

    @classmethod
    def create(cls, directory, bundle_id="com.example.ridepush", key_id=None, team_id=None):
        key_id, team_id = key_id or _apple_id(), team_id or _apple_id()
        private_key = ec.generate_private_key(ec.SECP256R1())
        path = Path(directory) / ("AuthKey_%s.p8" % key_id)
        path.write_bytes(private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
        path.chmod(0o600)
        return cls(str(path), key_id, team_id, bundle_id, private_key)

    @property
    def topic(self):
        return self.bundle_id + ".push-type.liveactivity"

    def public_key(self):
        return self.private_key.public_key()

    def provider_token(self, iat=None, key=None, **overrides):
        """An ES256 provider token as Apple wants it ({alg, kid} and {iss, iat}), made by PyJWT;
        `key` signs with another key, `overrides` replace header (alg, kid) or claim values."""
        header = {"alg": "ES256", "kid": self.key_id}
        claims = {"iss": self.team_id, "iat": int(time.time()) if iat is None else iat}
        for k, v in overrides.items():
            (header if k in ("alg", "kid") else claims)[k] = v
        return jwt.encode(claims, key or self.private_key, algorithm="ES256", headers=header)

    def server_args(self):
        """The serve flags issue 38 names for this key (without --apns-url)."""
        return ["--apns-key-file", self.path, "--apns-key-id", self.key_id, "--apns-team-id", self.team_id,
                "--apns-topic", self.bundle_id]


FIREBASE_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


@dataclass
class ServiceAccount:
    """A Google service-account JSON as the console downloads it, whose token_uri is the OAuth
    stand-in; `private_key` is the RSA key whose public half the stand-in verifies against."""
    path: str
    project_id: str
    client_email: str
    private_key_id: str
    token_uri: str
    private_key: object

    @classmethod
    def create(cls, directory, token_uri, project_id="ridepush-test"):
        private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()).decode()
        email = "ridepush-push@%s.iam.gserviceaccount.com" % project_id
        kid = secrets.token_hex(20)
        doc = {"type": "service_account", "project_id": project_id, "private_key_id": kid, "private_key": pem,
               "client_email": email, "client_id": str(secrets.randbits(60)),
               "auth_uri": "https://127.0.0.1/o/oauth2/auth", "token_uri": token_uri,
               "auth_provider_x509_cert_url": "https://127.0.0.1/oauth2/v1/certs",
               "client_x509_cert_url": "https://127.0.0.1/robot/v1/metadata/x509/" + urllib.parse.quote(email),
               "universe_domain": "googleapis.com"}
        path = Path(directory) / "service-account.json"
        path.write_text(json.dumps(doc, indent=2) + "\n")
        path.chmod(0o600)
        return cls(str(path), project_id, email, kid, token_uri, private_key)

    def public_key(self):
        return self.private_key.public_key()

    def assertion(self, iat=None, lifetime=3600, key=None, **overrides):
        """The RS256 JWT-bearer assertion Google's client libraries send, made by PyJWT."""
        now = int(time.time()) if iat is None else iat
        claims = {"iss": self.client_email, "scope": FIREBASE_SCOPE, "aud": self.token_uri,
                  "iat": now, "exp": now + lifetime}
        header = {"kid": self.private_key_id}
        for k, v in overrides.items():
            if k == "kid":
                header[k] = v
            elif v is None:
                claims.pop(k, None)
            else:
                claims[k] = v
        return jwt.encode(claims, key or self.private_key, algorithm="RS256", headers=header)


# ---- what the stand-ins record --------------------------------------------------------------------

@dataclass
class Request:
    method: str
    path: str
    headers: dict            # lower-case names; a repeated header keeps its last value
    body: bytes
    conn: int                # the stand-in's id for the TLS connection the request came on
    stream: int              # the HTTP/2 stream id (0 on HTTP/1.1)
    http: str                # "2" or "1.1"
    header_list: list = field(default_factory=list)


@dataclass
class Record:
    """One request and the stand-in's answer to it."""
    conn: int
    stream: int
    http: str
    at: float                # time.time() when it was answered
    method: str
    path: str
    headers: dict
    body: bytes
    payload: object          # the body decoded as JSON (None when it is not JSON)
    status: int
    reason: str              # APNs: the reason; Google: the error status / error code; "" on success
    detail: str = ""         # why a check refused it, in words
    scripted: bool = False   # the answer came from answer_next / unregister, not from a check
    token: str = ""          # APNs: the device token in the path; FCM: message.token
    extra: dict = field(default_factory=dict)

    # APNs conveniences
    @property
    def aps(self):
        return (self.payload or {}).get("aps", {}) if isinstance(self.payload, dict) else {}

    @property
    def event(self):
        return self.aps.get("event")

    @property
    def content_state(self):
        return self.aps.get("content-state")

    @property
    def priority(self):
        # None when the header was left out (Apple then takes 10)
        p = self.headers.get("apns-priority")
        return int(p) if p and p.isdigit() else None

    # FCM conveniences
    @property
    def message(self):
        return (self.payload or {}).get("message", {}) if isinstance(self.payload, dict) else {}


class _Script:
    """Scripted answers: per device token first, then for the next requests of any token."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_token, self.any, self.gone = {}, [], {}

    def add(self, answer, times, token):
        with self.lock:
            (self.by_token.setdefault(token, []) if token else self.any).extend([answer] * times)

    def take(self, token):
        with self.lock:
            if token in self.gone:
                return self.gone[token]
            if self.by_token.get(token):
                return self.by_token[token].pop(0)
            if self.any:
                return self.any.pop(0)
        return None


class _Log:
    def __init__(self):
        self.lock, self.changed, self.records = threading.Lock(), threading.Condition(), []

    def add(self, rec):
        with self.changed:
            self.records.append(rec)
            self.changed.notify_all()

    def snapshot(self):
        with self.changed:
            return list(self.records)

    def wait(self, n, timeout, pred=None):
        """The first n records matching pred once there are n of them; TimeoutError after timeout s."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                got = [r for r in self.records if pred is None or pred(r)]
                if len(got) >= n:
                    return got[:n]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("%d of %d requests in %ss: %r" % (
                        len(got), n, timeout, [(r.method, r.path, r.status, r.reason) for r in self.records]))
                self.changed.wait(left)


# ---- the TLS server under each stand-in ------------------------------------------------------------

class _TLSServer:
    """Accepts TLS connections on a free port of 127.0.0.1, one thread per connection, and serves
    each with HTTP/2 (ALPN h2) or HTTP/1.1 as `alpn` allows. `handle(Request)` returns
    (status, [(name, value)], body, delay_s): answers are sent in order of arrival on HTTP/1.1
    and when ready on HTTP/2 (a delayed answer does not hold the connection's other streams)."""

    def __init__(self, name, pki, alpn, handle):
        self.name, self.handle, self.alpn = name, handle, tuple(alpn)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self.ctx.load_cert_chain(pki.cert, pki.key)
        self.ctx.set_alpn_protocols(list(alpn))
        self.listener = socket.create_server((HOST, 0))
        self.listener.settimeout(POLL * 4)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.conn_ids = itertools.count(1)
        self.sockets, self.threads = {}, []
        # connections that never got to HTTP: (conn id, why), e.g. a client that did not trust the
        # CA (the handshake failed) or one that did not offer h2 to an HTTP/2-only stand-in
        self.refused = []
        self.connections = 0
        self.acceptor = threading.Thread(target=self._accept, name=name + "-accept", daemon=True)
        self.acceptor.start()

    @property
    def url(self):
        return "https://%s:%d" % (HOST, self.port)

    def _accept(self):
        while not self.stopping.is_set():
            try:
                raw, _ = self.listener.accept()
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            cid = next(self.conn_ids)
            t = threading.Thread(target=self._serve, args=(cid, raw), name="%s-conn%d" % (self.name, cid), daemon=True)
            with self.lock:
                self.sockets[cid] = raw
                self.threads.append(t)
            t.start()

    def _serve(self, cid, raw):
        try:
            raw.settimeout(10)   # a handshake that has not finished in 10 s is not coming
            try:
                sock = self.ctx.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError) as e:
                with self.lock:
                    self.refused.append((cid, "TLS handshake failed: %s" % e))
                return
            with self.lock:
                self.connections += 1
                self.sockets[cid] = sock     # wrap_socket took over raw's descriptor
            proto = sock.selected_alpn_protocol()
            if proto == "h2":
                _H2Conn(self, cid, sock).run()
            elif "http/1.1" in self.alpn:
                sock.settimeout(5)
                _H1Handler.serve(self, cid, sock)
            else:
                # APNs speaks HTTP/2 only: a client that did not negotiate h2 gets no answer
                with self.lock:
                    self.refused.append((cid, "no ALPN h2 (client offered no h2, got %r)" % proto))
                sock.close()
        finally:
            with self.lock:
                s = self.sockets.pop(cid, None)
            for x in (s, raw):
                try:
                    x and x.close()
                except OSError:
                    pass

    def close_connections(self):
        """Drops every open connection (as a service restart would); the listener stays."""
        with self.lock:
            socks = list(self.sockets.values())
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self, timeout=5):
        self.stopping.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)    # wakes the accept() waiting in the acceptor (Linux)
        except OSError:
            pass
        self.listener.close()
        self.close_connections()
        deadline = time.monotonic() + timeout
        self.acceptor.join(max(0.1, deadline - time.monotonic()))
        with self.lock:
            threads = list(self.threads)
        for t in threads:
            t.join(max(0.1, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()]
        assert not alive, "%s: connection threads still running after stop: %s" % (self.name, alive)


class _H2Conn:
    def __init__(self, server, cid, sock):
        self.server, self.cid, self.sock = server, cid, sock
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.streams = {}
        self.ready = queue.Queue()          # (stream id, answer) from delayed answers
        self.wake_r, self.wake_w = socket.socketpair()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def run(self):
        sock = self.sock
        sock.settimeout(10)                  # for sendall to a slow reader; reads wait in select
        try:
            self.conn.initiate_connection()
            self.flush()
            while not self.server.stopping.is_set():
                if not sock.pending():
                    r, _, _ = select.select([sock, self.wake_r], [], [], POLL)
                    if self.wake_r in r:
                        self.wake_r.recv(4096)
                    self._send_ready()
                    if sock not in r:
                        continue
                data = sock.recv(65536)
                if not data:
                    return
                try:
                    events = self.conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    self.flush()             # the GOAWAY h2 queued
                    return
                for ev in events:
                    if not self._event(ev):
                        self.flush()
                        return
                self.flush()
        except (OSError, ssl.SSLError):
            return
        finally:
            self.wake_r.close()
            self.wake_w.close()

    def _event(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            self.streams[ev.stream_id] = (ev.headers, bytearray())
        elif isinstance(ev, h2.events.DataReceived):
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if ev.stream_id in self.streams:
                body = self.streams[ev.stream_id][1]
                body += ev.data
                if len(body) > MAX_BODY:
                    del self.streams[ev.stream_id]
                    self.conn.reset_stream(ev.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
        elif isinstance(ev, h2.events.StreamEnded):
            if ev.stream_id in self.streams:
                headers, body = self.streams.pop(ev.stream_id)
                self._answer(ev.stream_id, headers, bytes(body))
        elif isinstance(ev, h2.events.StreamReset):
            self.streams.pop(ev.stream_id, None)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            return False
        return True

    def _answer(self, sid, header_list, body):
        pseudo = {k: v for k, v in header_list if k.startswith(":")}
        headers = {k: v for k, v in header_list if not k.startswith(":")}
        req = Request(pseudo.get(":method", ""), pseudo.get(":path", ""), headers, body, self.cid, sid, "2",
                      [(k, v) for k, v in header_list if not k.startswith(":")])
        answer = self.server.handle(req)
        if answer[3]:
            def later():
                self.ready.put((sid, answer))
                try:
                    self.wake_w.send(b"x")
                except OSError:
                    pass
            t = threading.Timer(answer[3], later)
            t.daemon = True
            t.start()
        else:
            self._send(sid, answer)

    def _send_ready(self):
        while True:
            try:
                sid, answer = self.ready.get_nowait()
            except queue.Empty:
                break
            self._send(sid, answer)
        self.flush()

    def _send(self, sid, answer):
        status, headers, body, _ = answer
        try:
            self.conn.send_headers(sid, [(":status", str(status))] + [(k.lower(), str(v)) for k, v in headers]
                                   + [("content-length", str(len(body)))], end_stream=not body)
            # answers are a few hundred bytes: well inside the peer's window and one frame
            for i in range(0, len(body), self.conn.max_outbound_frame_size):
                chunk = body[i:i + self.conn.max_outbound_frame_size]
                self.conn.send_data(sid, chunk, end_stream=i + len(chunk) >= len(body))
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass   # the client reset the stream while the answer waited


class _H1Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pushstandin"

    @classmethod
    def serve(cls, server, cid, sock):
        handler = type("H", (cls,), {"standin": server, "cid": cid})
        try:
            handler(sock, (HOST, 0), server)
        except (OSError, ssl.SSLError):
            pass

    def log_message(self, *a):
        pass

    def _any(self):
        length = self.headers.get("Content-Length")
        if length is None and self.command == "POST":
            self.send_response(411)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        n = int(length or 0)
        if n > MAX_BODY:
            self.close_connection = True
            self.send_response(413)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.rfile.read(n)
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = Request(self.command, self.path, headers, body, self.cid, 0, "1.1",
                      [(k.lower(), v) for k, v in self.headers.items()])
        status, hdrs, out, delay = self.standin.handle(req)
        if delay:
            self.standin.stopping.wait(delay)
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_POST = do_GET = do_PUT = do_DELETE = _any


class _StandIn:
    """What the three stand-ins share: the server, the log, the script, start/stop."""
    name, alpn = "standin", ("h2", "http/1.1")

    def __init__(self, pki):
        self.pki, self.log, self.script = pki, _Log(), _Script()
        self.server = _TLSServer(self.name, pki, self.alpn, self._handle)

    @property
    def url(self):
        return self.server.url

    @property
    def port(self):
        return self.server.port

    @property
    def requests(self):
        return self.log.snapshot()

    def accepted(self):
        return [r for r in self.log.snapshot() if 200 <= r.status < 300]

    def wait_requests(self, n, timeout, pred=None):
        return self.log.wait(n, timeout, pred)

    def wait_accepted(self, n, timeout):
        return self.log.wait(n, timeout, lambda r: 200 <= r.status < 300)

    @property
    def refused_connections(self):
        with self.server.lock:
            return list(self.server.refused)

    def close_connections(self):
        self.server.close_connections()

    def stop(self):
        self.server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _handle(self, req):
        try:
            return self.handle(req)
        except Exception as e:   # a bug in a check must show, not hang the client
            body = json.dumps({"reason": "StandInBug", "detail": repr(e)}).encode()
            self.log.add(Record(req.conn, req.stream, req.http, time.time(), req.method, req.path, req.headers,
                                req.body, None, 500, "StandInBug", repr(e)))
            return 500, [("content-type", "application/json")], body, 0


def _json(body):
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# ---- APNs -----------------------------------------------------------------------------------------

@dataclass
class _Answer:
    status: int
    reason: str
    headers: list
    delay: float


class ApnsStandIn(_StandIn):
    """APNs (api.push.apple.com) for Live Activity pushes: HTTP/2 only, provider-token auth.

    Checks, in Apple's order and with Apple's reasons: POST (405 MethodNotAllowed), /3/device/<hex>
    (404 BadPath, 400 MissingDeviceToken / BadDeviceToken), `authorization: bearer <JWT>` (403
    MissingProviderToken; alg ES256 and kid = the key id, iss = the team id, signature by the
    key, iat present and not in the future: else 403 InvalidProviderToken; iat over an hour old:
    403 ExpiredProviderToken), apns-push-type liveactivity (400 InvalidPushType), apns-topic
    BUNDLE.push-type.liveactivity (400 MissingTopic / TopicDisallowed / DeviceTokenNotForTopic),
    apns-priority 5 or 10 if given (400 BadPriority), apns-expiration an integer (400
    BadExpirationDate), apns-id a UUID (400 BadMessageId), apns-collapse-id at most 64 bytes (400
    BadCollapseId), a body (400 PayloadEmpty) of at most 4096 bytes (413 PayloadTooLarge).

    Apple accepts a Live Activity payload whose fields are wrong and the device drops it without a
    word, so the stand-in refuses one loudly instead: 400 with reason "StandInInvalidPayload" (not
    an Apple reason) and `detail`. It wants a JSON object with `aps.timestamp` (integer Unix
    seconds within a day of now: milliseconds would put every update far in the future),
    `aps.event` update/end/start, `aps.content-state` an object; `dismissal-date`, `stale-date`
    integers if given; for start `attributes-type` (string) and `attributes` (object); `alert`
    an object or a string if given.

    Answers 200 with `apns-id` (the request's, else a new UUID), or what was scripted:
    `answer_next(410, "Unregistered", token=T)` (410 carries `timestamp` in ms as Apple's does),
    `unregister(T)` (every later push to T gets 410), `expire_provider_tokens()` (every provider
    token seen so far gets 403 ExpiredProviderToken from now on: only a newly signed one passes).
    """
    name, alpn = "apns", ("h2",)
    MAX_PAYLOAD = 4096

    def __init__(self, pki, key):
        self.key = key
        self.expired_tokens = set()
        self.verified = {}                   # provider token -> its claims, once its signature checked out
        self.provider_tokens = []            # distinct provider tokens in the order first seen
        super().__init__(pki)

    def answer_next(self, status, reason, times=1, token=None, headers=(), delay=0.0):
        """Answer the next `times` valid pushes (to `token`, or to any) with status and reason;
        `delay` seconds before answering (HTTP/2: the connection's other streams go on)."""
        self.script.add(_Answer(status, reason, list(headers), delay), times, token)

    def unregister(self, token):
        """From now on every push to `token` gets 410 Unregistered (the app was removed)."""
        with self.script.lock:
            self.script.gone[token] = _Answer(410, "Unregistered", [], 0.0)

    def expire_provider_tokens(self):
        with self.log.lock:
            self.expired_tokens.update(self.provider_tokens)

    def connection_ids(self):
        return sorted({r.conn for r in self.log.snapshot()})

    def transcript(self):
        """One line a push, for a note or a failing test's message: when, connection/stream,
        token, event, priority, the content-state, the answer."""
        t0 = None
        lines = []
        for r in self.log.snapshot():
            t0 = r.at if t0 is None else t0
            lines.append("+%7.3fs c%d/s%-3d %s… %-6s p%-2s %s -> %d %s" % (
                r.at - t0, r.conn, r.stream, r.token[:8], r.event or "-", r.priority or "-",
                json.dumps(r.content_state, sort_keys=True, separators=(",", ":")), r.status, r.reason))
        return "\n".join(lines)

    def _check_provider_token(self, req):
        auth = req.headers.get("authorization")
        if not auth:
            return 403, "MissingProviderToken", "no authorization header"
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return 403, "MissingProviderToken", "authorization is not 'bearer <token>': %r" % auth[:40]
        token = token.strip()
        with self.log.lock:
            if token not in self.provider_tokens:
                self.provider_tokens.append(token)
            if token in self.expired_tokens:
                return 403, "ExpiredProviderToken", "expired by the test (expire_provider_tokens)"
        with self.log.lock:
            claims = self.verified.get(token)
        if claims is None:
            claims = self._verify_provider_token(token)
            if isinstance(claims, tuple):
                return claims
            with self.log.lock:
                # a server reuses its token for 20-60 min: the signature is checked once, the age every time
                self.verified[token] = claims
        iat = claims.get("iat")
        now = time.time()
        if iat > now + 60:
            return 403, "InvalidProviderToken", "iat %d is in the future" % iat
        if now - iat > 3600:
            return 403, "ExpiredProviderToken", "iat %d is %d s old (more than an hour)" % (iat, now - iat)
        return None

    def _verify_provider_token(self, token):
        """The token's claims, or a refusal (status, reason, detail)."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            return 403, "InvalidProviderToken", "not a JWT: %s" % e
        if header.get("alg") != "ES256":
            return 403, "InvalidProviderToken", "header alg %r, not ES256" % header.get("alg")
        if header.get("kid") != self.key.key_id:
            return 403, "InvalidProviderToken", "header kid %r, not the key id %r" % (header.get("kid"), self.key.key_id)
        try:
            # PyJWT checks the raw r||s signature (a DER-encoded one is refused, as Apple refuses it);
            # the time claims are checked below, to answer with Apple's reasons
            claims = jwt.decode(token, self.key.public_key(), algorithms=["ES256"],
                                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False,
                                         "verify_aud": False, "verify_iss": False})
        except jwt.PyJWTError as e:
            return 403, "InvalidProviderToken", "signature: %s" % e
        if claims.get("iss") != self.key.team_id:
            return 403, "InvalidProviderToken", "iss %r, not the team id %r" % (claims.get("iss"), self.key.team_id)
        if not _is_int(claims.get("iat")):
            return 403, "InvalidProviderToken", "iat %r is not an integer" % (claims.get("iat"),)
        return claims

    def _check_headers(self, req):
        h = req.headers
        if h.get("apns-push-type") != "liveactivity":
            return 400, "InvalidPushType", "apns-push-type %r, not liveactivity" % h.get("apns-push-type")
        topic = h.get("apns-topic")
        if not topic:
            return 400, "MissingTopic", "no apns-topic"
        if not topic.endswith(".push-type.liveactivity"):
            return 400, "TopicDisallowed", "apns-topic %r does not end .push-type.liveactivity" % topic
        if topic != self.key.topic:
            return 400, "DeviceTokenNotForTopic", "apns-topic %r, the app's is %r" % (topic, self.key.topic)
        if "apns-priority" in h and h["apns-priority"] not in ("5", "10"):
            return 400, "BadPriority", "apns-priority %r, not 5 or 10" % h["apns-priority"]
        if "apns-expiration" in h and not re.fullmatch(r"\d+", h["apns-expiration"]):
            return 400, "BadExpirationDate", "apns-expiration %r" % h["apns-expiration"]
        if "apns-id" in h:
            try:
                uuid.UUID(h["apns-id"])
            except ValueError:
                return 400, "BadMessageId", "apns-id %r is not a UUID" % h["apns-id"]
        if len(h.get("apns-collapse-id", "").encode()) > 64:
            return 400, "BadCollapseId", "apns-collapse-id longer than 64 bytes"
        names = [k for k, _ in req.header_list]
        if len(names) != len(set(names)):
            return 400, "DuplicateHeaders", "a header is repeated: %r" % names
        return None

    def _check_payload(self, body, payload):
        if not body:
            return 400, "PayloadEmpty", "no body"
        if len(body) > self.MAX_PAYLOAD:
            return 413, "PayloadTooLarge", "%d bytes, at most %d" % (len(body), self.MAX_PAYLOAD)
        bad = lambda why: (400, "StandInInvalidPayload", why)  # noqa: E731
        if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
            return bad("the body is not a JSON object with an aps object")
        aps = payload["aps"]
        ts = aps.get("timestamp")
        if not _is_int(ts):
            return bad("aps.timestamp %r is not an integer (Unix seconds)" % (ts,))
        if abs(ts - time.time()) > 86400:
            return bad("aps.timestamp %d is not within a day of now: seconds, not milliseconds?" % ts)
        event = aps.get("event")
        if event not in ("update", "end", "start"):
            return bad("aps.event %r, not update/end/start" % (event,))
        if not isinstance(aps.get("content-state"), dict):
            return bad("aps.content-state is not an object")
        for k in ("dismissal-date", "stale-date"):
            if k in aps and not _is_int(aps[k]):
                return bad("aps.%s %r is not an integer (Unix seconds)" % (k, aps[k]))
        if "dismissal-date" in aps and event != "end":
            return bad("aps.dismissal-date on a %r (only an end has one)" % event)
        if event == "start":
            if not isinstance(aps.get("attributes-type"), str) or not aps["attributes-type"]:
                return bad("a start without attributes-type")
            if not isinstance(aps.get("attributes"), dict):
                return bad("a start without an attributes object")
        if "alert" in aps and not isinstance(aps["alert"], (dict, str)):
            return bad("aps.alert is neither an object nor a string")
        return None

    def handle(self, req):
        payload = _json(req.body)
        m = re.fullmatch(r"/3/device/([^/?]*)", req.path)
        token = m.group(1) if m else ""
        apns_id = req.headers.get("apns-id") or str(uuid.uuid4()).upper()

        def answer(status, reason="", detail="", scripted=False, headers=(), delay=0.0):
            out = b""
            if status != 200:
                doc = {"reason": reason}
                if status == 410:
                    doc["timestamp"] = int(time.time() * 1000)
                if detail and reason.startswith("StandIn"):
                    doc["detail"] = detail
                out = json.dumps(doc).encode()
            self.log.add(Record(req.conn, req.stream, req.http, time.time(), req.method, req.path, req.headers,
                                req.body, payload, status, reason, detail, scripted, token))
            hdrs = [("apns-id", apns_id)] + ([("content-type", "application/json")] if out else []) + list(headers)
            return status, hdrs, out, delay

        if req.method != "POST":
            return answer(405, "MethodNotAllowed", req.method)
        if not m:
            return answer(404, "BadPath", req.path)
        if not token:
            return answer(400, "MissingDeviceToken", "no token in the path")
        if not re.fullmatch(r"(?:[0-9a-fA-F]{2}){16,200}", token):
            return answer(400, "BadDeviceToken", "not 16-200 bytes of hex: %r" % token[:80])
        for check in (lambda: self._check_provider_token(req), lambda: self._check_headers(req),
                      lambda: self._check_payload(req.body, payload)):
            refusal = check()
            if refusal:
                return answer(*refusal)
        scripted = self.script.take(token)
        if scripted:
            return answer(scripted.status, scripted.reason, "scripted", True, scripted.headers, scripted.delay)
        return answer(200)


# ---- Google: the OAuth token endpoint and FCM v1 ---------------------------------------------------

def google_error(code, status, message, error_code=None):
    """Google's JSON error shape; FCM adds its own errorCode in details."""
    err = {"code": code, "message": message, "status": status}
    if error_code:
        err["details"] = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": error_code}]
    return {"error": err}


class OAuthStandIn(_StandIn):
    """Google's OAuth 2.0 token endpoint (oauth2.googleapis.com/token) for a service account's
    JWT-bearer grant, over HTTPS (HTTP/1.1 or h2).

    `POST /token`, form-encoded `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT`.
    Refuses (400, Google's OAuth shape {"error", "error_description"}): another grant type
    (unsupported_grant_type), no assertion (invalid_request), an assertion not RS256-signed by
    the service account's key, a kid other than private_key_id, iss not client_email, aud not the
    token_uri, exp - iat over 3600 s or iat/exp not around now (invalid_grant), a scope without
    firebase.messaging (invalid_scope). Answers {"access_token", "expires_in", "token_type":
    "Bearer"}; the token is good at the FCM stand-in until it expires or `revoke_tokens()`.
    `fail_next(status, error)` scripts failures; `expires_in` makes short-lived tokens.
    """
    name, alpn = "oauth", ("http/1.1", "h2")

    def __init__(self, pki, expires_in=3599):
        self.account = None                  # set by GoogleStandIns (the token_uri needs our port)
        self.expires_in = expires_in
        self.issued = {}                     # access token -> expiry (time.time())
        self.revoked = set()
        super().__init__(pki)

    @property
    def token_uri(self):
        return self.url + "/token"

    def fail_next(self, status=400, error="invalid_grant", description="scripted", times=1, delay=0.0):
        self.script.add(_Answer(status, error, [("x-standin-description", description)], delay), times, None)

    def revoke_tokens(self):
        """Every access token issued so far is refused by the FCM stand-in from now on (401)."""
        with self.log.lock:
            self.revoked.update(self.issued)

    def token_ok(self, token):
        with self.log.lock:
            exp = self.issued.get(token)
            return exp is not None and exp > time.time() and token not in self.revoked

    def _check_assertion(self, assertion):
        a = self.account
        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.PyJWTError as e:
            return "invalid_grant", "Invalid JWT: %s" % e
        if header.get("alg") != "RS256":
            return "invalid_grant", "Invalid JWT: alg %r, not RS256" % header.get("alg")
        if "kid" in header and header["kid"] != a.private_key_id:
            return "invalid_grant", "Invalid JWT Signature. (kid %r is not the key's)" % header["kid"]
        try:
            claims = jwt.decode(assertion, a.public_key(), algorithms=["RS256"],
                                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False,
                                         "verify_aud": False, "verify_iss": False})
        except jwt.PyJWTError:
            return "invalid_grant", "Invalid JWT Signature."
        if claims.get("iss") != a.client_email:
            return "invalid_grant", "Invalid JWT: iss %r is not the client_email" % claims.get("iss")
        if claims.get("aud") != a.token_uri:
            return "invalid_grant", "Invalid JWT: Failed audience check. (aud %r)" % (claims.get("aud"),)
        iat, exp, now = claims.get("iat"), claims.get("exp"), time.time()
        if not (_is_int(iat) and _is_int(exp)) or exp - iat > 3600 or exp <= iat or iat > now + 60 or exp < now - 60:
            return "invalid_grant", ("Invalid JWT: Token must be a short-lived token (60 minutes) and in a "
                                     "reasonable timeframe. Check your iat and exp values in the JWT claim.")
        scope = claims.get("scope")
        if not isinstance(scope, str) or FIREBASE_SCOPE not in scope.split():
            return "invalid_scope", "scope %r does not contain %s" % (scope, FIREBASE_SCOPE)
        return None

    def handle(self, req):
        form = {}
        if req.headers.get("content-type", "").split(";")[0].strip() == "application/x-www-form-urlencoded":
            form = dict(urllib.parse.parse_qsl(req.body.decode("utf-8", "replace")))

        def answer(status, doc, reason="", detail="", scripted=False, delay=0.0):
            self.log.add(Record(req.conn, req.stream, req.http, time.time(), req.method, req.path, req.headers,
                                req.body, form, status, reason, detail, scripted,
                                extra={"access_token": doc.get("access_token")}))
            return status, [("content-type", "application/json; charset=utf-8"), ("cache-control", "no-store")], \
                json.dumps(doc).encode(), delay

        def refuse(error, description, status=400):
            return answer(status, {"error": error, "error_description": description}, error, description)

        if req.method != "POST" or req.path.split("?")[0] != "/token":
            return refuse("invalid_request", "%s %s: only POST /token" % (req.method, req.path), 404)
        if not form:
            return refuse("invalid_request", "the body is not application/x-www-form-urlencoded")
        if form.get("grant_type") != JWT_BEARER:
            return refuse("unsupported_grant_type", "Invalid grant_type: %s" % form.get("grant_type", ""))
        if not form.get("assertion"):
            return refuse("invalid_request", "Missing required parameter: assertion")
        problem = self._check_assertion(form["assertion"])
        if problem:
            return refuse(*problem)
        scripted = self.script.take(None)
        if scripted:
            desc = dict(scripted.headers).get("x-standin-description", "scripted")
            return answer(scripted.status, {"error": scripted.reason, "error_description": desc},
                          scripted.reason, desc, True, scripted.delay)
        token = "ya29.standin-" + secrets.token_urlsafe(32)
        with self.log.lock:
            self.issued[token] = time.time() + self.expires_in
        return answer(200, {"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"})


_FCM_MESSAGE_FIELDS = {"name", "data", "notification", "android", "webpush", "apns", "fcm_options",
                       "token", "topic", "condition"}
_FCM_ANDROID_FIELDS = {"collapse_key", "priority", "ttl", "restricted_package_name", "data", "notification",
                       "fcm_options", "direct_boot_ok"}
_FCM_RESERVED_DATA = {"from", "notification", "message_type"}

_FCM_SCRIPTED = {
    404: ("NOT_FOUND", "Requested entity was not found.", "UNREGISTERED"),
    400: ("INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", "INVALID_ARGUMENT"),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials.", None),
    403: ("PERMISSION_DENIED", "SenderId mismatch", "SENDER_ID_MISMATCH"),
    429: ("RESOURCE_EXHAUSTED", "Quota exceeded for the device.", "QUOTA_EXCEEDED"),
    500: ("INTERNAL", "Internal error encountered.", "INTERNAL"),
    503: ("UNAVAILABLE", "The service is currently unavailable.", "UNAVAILABLE"),
}


class FcmStandIn(_StandIn):
    """FCM HTTP v1 (fcm.googleapis.com), over HTTPS (h2 or HTTP/1.1).

    `POST /v1/projects/<project>/messages:send` with `authorization: Bearer <token>` issued by
    the OAuth stand-in and neither expired nor revoked (else 401 UNAUTHENTICATED); the project
    must be the service account's (else 403 PERMISSION_DENIED). The body must be
    {"message": {...}} with one `token` and only fields FCM knows (a misspelt field is 400 as at
    Google); `data` a map of string to string (a number, boolean, null or object value is
    400 INVALID_ARGUMENT), no reserved data key (from, notification, message_type, google*, gcm*);
    `android.priority` normal/high, `android.ttl` a duration such as "3600s", the message at most
    4096 bytes. Answers 200 {"name": "projects/P/messages/ID"}, or as scripted:
    `answer_next(404, token=T)` (NOT_FOUND with errorCode UNREGISTERED), `answer_next(429,
    retry_after=5)`, `answer_next(503, retry_after=1)`, `unregister(T)` (every later message to T).
    Errors are Google's shape {"error": {"code", "status", "message", "details": [{errorCode}]}}.
    """
    name, alpn = "fcm", ("h2", "http/1.1")

    def __init__(self, pki, oauth):
        self.oauth = oauth
        super().__init__(pki)

    def answer_next(self, status, times=1, token=None, retry_after=None, delay=0.0):
        headers = [("retry-after", str(retry_after))] if retry_after is not None else []
        self.script.add(_Answer(status, "", headers, delay), times, token)

    def unregister(self, token):
        with self.script.lock:
            self.script.gone[token] = _Answer(404, "", [], 0.0)

    def _check_message(self, doc):
        def bad(msg):
            return 400, "INVALID_ARGUMENT", msg
        if not isinstance(doc, dict):
            return bad("Invalid JSON payload received.")
        unknown = set(doc) - {"message", "validate_only"}
        if unknown:
            return bad('Invalid JSON payload received. Unknown name "%s": Cannot find field.' % sorted(unknown)[0])
        msg = doc.get("message")
        if not isinstance(msg, dict):
            return bad("Request contains an invalid argument. (no message object)")
        unknown = set(msg) - _FCM_MESSAGE_FIELDS
        if unknown:
            return bad('Invalid JSON payload received. Unknown name "%s" at \'message\': Cannot find field.'
                       % sorted(unknown)[0])
        targets = [k for k in ("token", "topic", "condition") if k in msg]
        if targets != ["token"]:
            return bad("Request contains an invalid argument. (one token wanted, got %r)" % targets)
        if not isinstance(msg["token"], str) or not msg["token"]:
            return bad("The registration token is not a valid FCM registration token")
        for where, data in (("message.data", msg.get("data")), ("message.android.data",
                                                                (msg.get("android") or {}).get("data"))):
            if data is None:
                continue
            if not isinstance(data, dict):
                return bad("Invalid value at '%s' (Map), not an object" % where)
            for i, (k, v) in enumerate(data.items()):
                if not isinstance(v, str):
                    return bad("Invalid value at '%s[%d].value' (TYPE_STRING), %s" % (where, i, json.dumps(v)))
                if k in _FCM_RESERVED_DATA or k.lower().startswith(("google", "gcm")):
                    return bad("Invalid data payload key: %s" % k)
        android = msg.get("android")
        if android is not None:
            if not isinstance(android, dict):
                return bad("Invalid value at 'message.android', not an object")
            unknown = set(android) - _FCM_ANDROID_FIELDS
            if unknown:
                return bad('Invalid JSON payload received. Unknown name "%s" at \'message.android\': Cannot find field.'
                           % sorted(unknown)[0])
            if "priority" in android and str(android["priority"]).upper() not in ("NORMAL", "HIGH"):
                return bad("Invalid value at 'message.android.priority' (type.googleapis.com/"
                           "google.firebase.fcm.v1.AndroidMessagePriority), %s" % json.dumps(android["priority"]))
            if "ttl" in android and not (isinstance(android["ttl"], str)
                                         and re.fullmatch(r"\d+(\.\d{1,9})?s", android["ttl"])):
                return bad("Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), %s"
                           % json.dumps(android["ttl"]))
            if "collapse_key" in android and not isinstance(android["collapse_key"], str):
                return bad("Invalid value at 'message.android.collapse_key' (TYPE_STRING)")
        if len(json.dumps(msg).encode()) > 4096:
            return bad("Android message is too big")
        return None

    def handle(self, req):
        payload = _json(req.body)
        token = payload.get("message", {}).get("token", "") if isinstance(payload, dict) and \
            isinstance(payload.get("message"), dict) else ""
        token = token if isinstance(token, str) else ""

        def answer(status, gstatus="", message="", error_code=None, scripted=False, headers=(), delay=0.0):
            if status == 200:
                doc = {"name": "projects/%s/messages/%d" % (project, secrets.randbits(62))}
                reason = ""
            else:
                doc = google_error(status, gstatus, message, error_code)
                reason = error_code or gstatus
            self.log.add(Record(req.conn, req.stream, req.http, time.time(), req.method, req.path, req.headers,
                                req.body, payload, status, reason, "" if status == 200 else message, scripted, token))
            return status, [("content-type", "application/json; charset=UTF-8")] + list(headers), \
                json.dumps(doc).encode(), delay

        m = re.fullmatch(r"/v1/projects/([^/]+)/messages:send", req.path)
        project = m.group(1) if m else ""
        if not m:
            return answer(404, "NOT_FOUND", "The requested URL %s was not found on this server." % req.path)
        if req.method != "POST":
            return answer(405, "METHOD_NOT_ALLOWED", "%s is not allowed" % req.method)
        auth = req.headers.get("authorization", "")
        scheme, _, bearer = auth.partition(" ")
        if scheme.lower() != "bearer" or not self.oauth.token_ok(bearer.strip()):
            return answer(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 "
                          "access token, login cookie or other valid authentication credential.", None, False,
                          [("www-authenticate", 'Bearer realm="https://accounts.google.com/"')])
        if project != self.oauth.account.project_id:
            return answer(403, "PERMISSION_DENIED", "Permission 'cloudmessaging.messages.create' denied on "
                          "resource '//cloudmessaging.googleapis.com/projects/%s'" % project, "SENDER_ID_MISMATCH")
        if req.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return answer(400, "INVALID_ARGUMENT", "Invalid JSON payload received. content-type %r"
                          % req.headers.get("content-type"))
        refusal = self._check_message(payload)
        if refusal:
            return answer(refusal[0], refusal[1], refusal[2], "INVALID_ARGUMENT")
        scripted = self.script.take(token)
        if scripted:
            gstatus, message, code = _FCM_SCRIPTED.get(scripted.status, ("UNKNOWN", "scripted", None))
            return answer(scripted.status, gstatus, message, code, True, scripted.headers, scripted.delay)
        return answer(200)


class GoogleStandIns:
    """The OAuth token endpoint and FCM v1, and a service account whose token_uri is the former."""

    def __init__(self, pki, directory, project_id="ridepush-test", expires_in=3599):
        self.pki = pki
        self.oauth = OAuthStandIn(pki, expires_in=expires_in)
        try:
            self.account = ServiceAccount.create(directory, self.oauth.token_uri, project_id)
            self.oauth.account = self.account
            self.fcm = FcmStandIn(pki, self.oauth)
        except BaseException:
            self.oauth.stop()
            raise

    def server_args(self):
        return ["--fcm-service-account", self.account.path, "--fcm-url", self.fcm.url]

    def stop(self):
        try:
            self.fcm.stop()
        finally:
            self.oauth.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class PushStandIns:
    """All three stand-ins with one private CA: `server_args()` are the serve flags issue 38 names
    (the APNs key, the service account, both URLs and --outbound-ca-file), `env()` keeps a proxy
    in the environment from catching 127.0.0.1."""

    def __init__(self, directory, bundle_id="com.example.ridepush", project_id="ridepush-test"):
        self.dir = Path(directory)
        self.pki = make_pki(self.dir)
        self.apns_key = ApnsKey.create(self.dir, bundle_id)
        self.apns = ApnsStandIn(self.pki, self.apns_key)
        try:
            self.google = GoogleStandIns(self.pki, self.dir, project_id)
        except BaseException:
            self.apns.stop()
            raise
        self.oauth, self.fcm, self.account = self.google.oauth, self.google.fcm, self.google.account

    def server_args(self):
        return (self.apns_key.server_args() + ["--apns-url", self.apns.url] + self.google.server_args()
                + ["--outbound-ca-file", self.pki.ca])

    def env(self, base=None):
        env = dict(os.environ if base is None else base)
        for k in ("NO_PROXY", "no_proxy"):
            env[k] = ",".join(x for x in (env.get(k), "127.0.0.1", "localhost") if x)
        return env

    def stop(self):
        try:
            self.apns.stop()
        finally:
            self.google.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---- a small HTTP/2 client (for the stand-ins' own tests and for looking at them by hand) ----------

class H2Client:
    """One TLS connection with ALPN h2, verified against `ctx`; several requests may be in flight
    on it at once (send, then responses)."""

    def __init__(self, url, ctx, timeout=10):
        u = urllib.parse.urlsplit(url)
        self.authority, self.timeout = u.netloc, timeout
        raw = socket.create_connection((u.hostname, u.port), timeout=timeout)
        try:
            self.sock = ctx.wrap_socket(raw, server_hostname=u.hostname)
        except BaseException:
            raw.close()
            raise
        if self.sock.selected_alpn_protocol() != "h2":
            self.sock.close()
            raise ConnectionError("the server did not select h2 (got %r)" % self.sock.selected_alpn_protocol())
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.done = {}
        self.partial = {}

    def send(self, method, path, headers=(), body=b""):
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [(":method", method), (":scheme", "https"), (":authority", self.authority),
                                     (":path", path)] + [(k.lower(), str(v)) for k, v in headers],
                               end_stream=not body)
        for i in range(0, len(body), self.conn.max_outbound_frame_size):
            chunk = body[i:i + self.conn.max_outbound_frame_size]
            self.conn.send_data(sid, chunk, end_stream=i + len(chunk) >= len(body))
        self.sock.sendall(self.conn.data_to_send())
        self.partial[sid] = {"status": None, "headers": {}, "body": bytearray()}
        return sid

    def response(self, sid):
        """(status, headers, body) of stream `sid`, waiting at most `timeout` s for it."""
        deadline = time.monotonic() + self.timeout
        while sid not in self.done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer on stream %d in %ss" % (sid, self.timeout))
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            for ev in self.conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    hs = dict(ev.headers)
                    self.partial[ev.stream_id]["status"] = int(hs.pop(":status"))
                    self.partial[ev.stream_id]["headers"] = hs
                elif isinstance(ev, h2.events.DataReceived):
                    self.partial[ev.stream_id]["body"] += ev.data
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    p = self.partial.pop(ev.stream_id)
                    self.done[ev.stream_id] = (p["status"], p["headers"], bytes(p["body"]))
                elif isinstance(ev, h2.events.StreamReset):
                    self.partial.pop(ev.stream_id, None)
                    self.done[ev.stream_id] = (None, {}, b"")
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise ConnectionError("GOAWAY from the server: %r" % ev)
            self.sock.sendall(self.conn.data_to_send())
        return self.done.pop(sid)

    def request(self, method, path, headers=(), body=b""):
        return self.response(self.send(method, path, headers, body))

    def close(self):
        try:
            self.conn.close_connection()
            self.sock.sendall(self.conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError):
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
