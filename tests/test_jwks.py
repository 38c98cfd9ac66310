"""The identity provider's tokens (issue 27, item 3), made here with Python's `cryptography` the way
a provider signs them (RS256, ES256 with raw r||s, EdDSA) and checked by the real binary's
`ridepush token --verify` against a JWKS file: accepted by kid; refused for a foreign key, an
unknown kid, an algorithm other than the key's, and the HS256-with-the-public-key confusion;
refused without issuer and audience pinned (unless --jwt-any-issuer), and an RSA key with e = 1
(whose forged tokens would verify) refused whole (issue 36, findings 3 and 7)."""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import time

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from rp import BIN, ROOT

SECRET = "jwks-test-shared-secret-0123456789abcdef"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint(n, size):
    return n.to_bytes(size, "big")


class Key:
    """A provider key: its private half signs, its public half goes into the JWKS."""

    def __init__(self, kind):
        self.kind = kind
        if kind == "RS256":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif kind == "ES256":
            self.private = ec.generate_private_key(ec.SECP256R1())
        else:
            self.private = ed25519.Ed25519PrivateKey.generate()
        self.public = self.private.public_key()

    def jwk(self, kid):
        if self.kind == "RS256":
            n = self.public.public_numbers()
            return {"kid": kid, "kty": "RSA", "alg": "RS256", "use": "sig",
                    "n": b64(uint(n.n, 256)), "e": b64(uint(n.e, 3))}
        if self.kind == "ES256":
            n = self.public.public_numbers()
            return {"kid": kid, "kty": "EC", "crv": "P-256", "x": b64(uint(n.x, 32)), "y": b64(uint(n.y, 32))}
        raw = self.public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kid": kid, "kty": "OKP", "crv": "Ed25519", "x": b64(raw)}

    def pem(self):
        return self.public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, data):
        if self.kind == "RS256":
            return self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        if self.kind == "ES256":
            # JWS carries r||s, 32 bytes each (RFC 7518 §3.4), not the DER that cryptography returns.
            r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(hashes.SHA256())))
            return uint(r, 32) + uint(s, 32)
        return self.private.sign(data)

    def token(self, claims, kid, alg=None):
        header = {"alg": alg or self.kind, "typ": "JWT"}
        if kid is not None:
            header["kid"] = kid
        signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
        return signing_input + "." + b64(self.sign(signing_input.encode()))


def hs256(claims, secret, header=None):
    signing_input = b64(json.dumps(header or {"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(mac)


KINDS = ("RS256", "ES256", "EdDSA")
KIDS = {"RS256": "rsa-2026", "ES256": "ec-2026", "EdDSA": "ed-2026"}


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    keys = {kind: Key(kind) for kind in KINDS}
    foreign = {kind: Key(kind) for kind in KINDS}
    directory = tmp_path_factory.mktemp("jwks")
    path = directory / "jwks.json"
    path.write_text(json.dumps({"keys": [keys[k].jwk(KIDS[k]) for k in KINDS]}))
    return {"keys": keys, "foreign": foreign, "jwks": str(path), "dir": directory}


def claims(**extra):
    now = int(time.time())
    c = {"sub": "rider-7", "scope": "control", "iat": now, "exp": now + 600, "iss": "https://idp.example/", "aud": "ridepush"}
    c.update(extra)
    return c


# The provider's issuer and the audience its tokens name for RidePush, as a server pins them.
PINNED = ("--jwt-issuer", "https://idp.example/", "--jwt-audience", "ridepush")


def verify(token, *args, secret=None, policy=PINNED):
    env = {k: v for k, v in os.environ.items() if k != "RIDEPUSH_JWT_SECRET"}
    if secret:
        env["RIDEPUSH_JWT_SECRET"] = secret
    return subprocess.run([BIN, "token", "--verify", token, *args, *policy], capture_output=True, text=True,
                          env=env, timeout=30, cwd=ROOT)


@pytest.mark.parametrize("kind", KINDS)
def test_accepted_by_kid(provider, kind):
    c = claims(rides=["r-1"])
    result = verify(provider["keys"][kind].token(c, KIDS[kind]), "--jwks", provider["jwks"])
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed == {"sub": "rider-7", "scope": "control", "rides": ["r-1"], "iat": c["iat"], "exp": c["exp"]}


@pytest.mark.parametrize("kind", KINDS)
def test_refused_for_a_foreign_key_under_a_known_kid(provider, kind):
    result = verify(provider["foreign"][kind].token(claims(), KIDS[kind]), "--jwks", provider["jwks"])
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == "ridepush token: refused (badSignature): token signature does not match\n"


@pytest.mark.parametrize("kind", KINDS)
def test_refused_for_an_unknown_kid_and_no_kid(provider, kind):
    key = provider["keys"][kind]
    unknown = verify(key.token(claims(), "retired-2019"), "--jwks", provider["jwks"])
    assert unknown.returncode == 1
    assert unknown.stderr == 'ridepush token: refused (unknownKey): token kid "retired-2019" is not a known key\n'
    bare = verify(key.token(claims(), None), "--jwks", provider["jwks"])
    assert bare.returncode == 1 and "(unknownKey)" in bare.stderr


@pytest.mark.parametrize("alg, kid", [("RS256", "ec-2026"), ("ES256", "rsa-2026"), ("EdDSA", "ec-2026"), ("ES256", "ed-2026")])
def test_refused_when_the_header_names_another_algorithm_than_the_key(provider, alg, kid):
    # Signed by the key the kid names, so only the algorithm check can refuse it.
    signer = next(k for k in KINDS if KIDS[k] == kid)
    result = verify(provider["keys"][signer].token(claims(), kid, alg=alg), "--jwks", provider["jwks"])
    assert result.returncode == 1
    assert f'refused (unsupportedAlgorithm): token alg {alg} does not match key "{kid}"' in result.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_hs256_made_with_the_public_key_as_secret_is_refused(provider, kind):
    key = provider["keys"][kind]
    as_secret = key.pem()
    named = hs256(claims(), as_secret, header={"alg": "HS256", "typ": "JWT", "kid": KIDS[kind]})
    # With and without a shared secret configured: the key's kid fixes its algorithm.
    for secret in (None, SECRET):
        result = verify(named, "--jwks", provider["jwks"], secret=secret)
        assert result.returncode == 1, result.stdout
        assert f'refused (unsupportedAlgorithm): token alg HS256 does not match key "{KIDS[kind]}"' in result.stderr
    # Without kid, against the one PEM key: checked with the real secret, which it is not.
    pem_file = provider["dir"] / f"{kind}.pem"
    pem_file.write_bytes(as_secret)
    unnamed = hs256(claims(), as_secret)
    result = verify(unnamed, "--jwt-public-key", str(pem_file), secret=SECRET)
    assert result.returncode == 1 and "refused (badSignature)" in result.stderr
    result = verify(unnamed, "--jwt-public-key", str(pem_file))
    assert result.returncode == 1 and "refused (unsupportedAlgorithm): token alg HS256 refused" in result.stderr
    # The same PEM key does verify its own signature (so the refusals above are not a broken key).
    own = verify(key.token(claims(), None), "--jwt-public-key", str(pem_file))
    assert own.returncode == 0, own.stderr


def test_hs256_with_the_shared_secret_still_works_beside_the_keys(provider):
    c = claims(ops=True)
    del c["iss"]
    result = verify(hs256(c, SECRET.encode()), "--jwks", provider["jwks"], secret=SECRET)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ops"] is True


def test_issuer_audience_and_claim_namespace(provider):
    key = provider["keys"]["ES256"]
    ns = "https://rides.example/"
    c = claims(aud=["ridepush"], scope="openid email", **{ns + "scope": "watch", ns + "rides": ["r-9"]})
    args = ["--jwks", provider["jwks"], "--jwt-issuer", "https://idp.example/", "--jwt-audience", "ridepush",
            "--jwt-claim-namespace", ns]
    ok = verify(key.token(c, KIDS["ES256"]), *args, policy=())
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["scope"] == "watch" and json.loads(ok.stdout)["rides"] == ["r-9"]
    wrong_aud = verify(key.token(dict(c, aud="someone-else"), KIDS["ES256"]), *args, policy=())
    assert "token aud does not name the configured audience" in wrong_aud.stderr
    wrong_iss = verify(key.token(dict(c, iss="https://evil.example/"), KIDS["ES256"]), *args, policy=())
    assert "token iss is not the configured issuer" in wrong_iss.stderr


def test_without_issuer_and_audience_the_providers_tokens_are_refused(provider):
    """As the server: a key set alone accepts nobody's tokens; --jwt-any-issuer says otherwise
    on purpose, and then another project's token passes (which is why it must be said)."""
    key = provider["keys"]["EdDSA"]
    other_project = key.token(claims(iss="https://other-project.example/", aud="other-app", ops=True), KIDS["EdDSA"])
    for policy in ((), ("--jwt-issuer", "https://idp.example/"), ("--jwt-audience", "ridepush")):
        result = verify(key.token(claims(), KIDS["EdDSA"]), "--jwks", provider["jwks"], policy=policy)
        assert result.returncode == 1, (policy, result.stdout)
        assert "identity-provider tokens are refused: no " in result.stderr and "--jwt-any-issuer" in result.stderr, result.stderr
    refused = verify(other_project, "--jwks", provider["jwks"])
    assert refused.returncode == 1 and "token iss is not the configured issuer" in refused.stderr, refused.stderr
    anyone = verify(other_project, "--jwks", provider["jwks"], policy=("--jwt-any-issuer",))
    assert anyone.returncode == 0 and json.loads(anyone.stdout)["ops"] is True, anyone.stderr


def pkcs1_sha256(message, size):
    """EMSA-PKCS1-v1_5 of SHA-256(message) in `size` bytes (RFC 8017 §9.2): what s^e mod n must
    equal. With e = 1 it is itself a valid signature: anyone can make one."""
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(message).digest()
    return b"\x00\x01" + b"\xff" * (size - len(digest_info) - 3) + b"\x00" + digest_info


def test_an_rsa_key_with_exponent_1_is_refused_and_its_forgery_with_it(provider):
    """A real 2048-bit modulus published with e = 1 (cryptography refuses to build such a key,
    so the JWK is written by hand): a forged ops token, its "signature" the padded digest, would
    verify. The key file is refused whole, as a short key is; e = 2 too; e = 3 and 65537 load."""
    n = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_numbers().n
    header = {"alg": "RS256", "typ": "JWT", "kid": "weak"}
    signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims(sub="mallory", ops=True)).encode())
    forged = signing_input + "." + b64(pkcs1_sha256(signing_input.encode(), 256))
    for e, loads in ((1, False), (2, False), (3, True), (65537, True)):
        path = provider["dir"] / f"e{e}.json"
        path.write_text(json.dumps({"keys": [{"kid": "weak", "kty": "RSA", "n": b64(uint(n, 256)), "e": b64(uint(e, 3).lstrip(b"\0"))}]}))
        result = verify(forged, "--jwks", str(path))
        if loads:
            assert result.returncode == 1 and "refused (badSignature)" in result.stderr, (e, result.stderr)
        else:
            assert result.returncode == 2, (e, result.stdout)
            assert result.stderr == f'ridepush token: {path} key 1 (kid "weak"): RSA public exponent must be odd and at least 3 (65537 in practice)\n'
    # The same key as PEM (SubjectPublicKeyInfo written out by hand, as DER).
    def der(tag, body):
        size = len(body)
        length = bytes([size]) if size < 128 else bytes([0x80 | ((size.bit_length() + 7) // 8)]) + size.to_bytes((size.bit_length() + 7) // 8, "big")
        return bytes([tag]) + length + body
    def der_int(v):
        raw = v.to_bytes((v.bit_length() + 8) // 8, "big")
        return der(0x02, raw)
    rsa_key = der(0x30, der_int(n) + der_int(1))
    algorithm = der(0x30, bytes.fromhex("06092a864886f70d0101010500"))
    spki = der(0x30, algorithm + der(0x03, b"\x00" + rsa_key))
    pem = provider["dir"] / "e1.pem"
    pem.write_text("-----BEGIN PUBLIC KEY-----\n" + base64.encodebytes(spki).decode() + "-----END PUBLIC KEY-----\n")
    # A PEM key verifies tokens without kid: the forgery over such a header.
    bare = b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode()) + "." + signing_input.split(".")[1]
    result = verify(bare + "." + b64(pkcs1_sha256(bare.encode(), 256)), "--jwt-public-key", str(pem))
    assert result.returncode == 2, result.stdout
    assert result.stderr == f"ridepush token: {pem}: RSA public exponent must be odd and at least 3 (65537 in practice)\n"


def test_a_bad_key_file_is_named(provider):
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key().public_numbers()
    path = provider["dir"] / "small.json"
    path.write_text(json.dumps({"keys": [{"kid": "old", "kty": "RSA", "n": b64(uint(small.n, 128)), "e": b64(uint(small.e, 3))}]}))
    result = verify(provider["keys"]["RS256"].token(claims(), "old"), "--jwks", str(path))
    assert result.returncode == 2
    assert result.stderr == f'ridepush token: {path} key 1 (kid "old"): RSA key of 1024 bits; RS256 needs at least 2048\n'
