"""The SDK's push registration (issue 38, item 7) against the real server: `registerPush` /
`unregisterPush` of RidePushClient, through `ridepush-sdk-probe push` (one call each, printing
the acknowledgement or the error the call threw). A Live Activity token, a push-to-start token
and an FCM token are acknowledged and stored (an operator's GET /rides/{id} counts them); a
malformed token is refused with bad_request and another rider's ride with forbidden, storing
nothing; unregistering removes the target. Every wait is bounded."""
import json
import os
import subprocess

from rp import BIN, ROOT, Client, Server
from test_security import ENV, control

PROBE = os.path.join(os.path.dirname(BIN), "ridepush-sdk-probe")
APNS = "7b1f0c3e5a2d4f6b8c9e0a1b2c3d4e5f7b1f0c3e5a2d4f6b8c9e0a1b2c3d4e5f"


def probe(srv, sub, action, platform, kind, ride, token):
    """One SDK call as `sub`; its one output line, parsed."""
    env = dict(os.environ, RIDEPUSH_TOKEN=control(sub))
    r = subprocess.run([PROBE, "push", srv.ws, action, platform, kind, ride or "-", token],
                       capture_output=True, text=True, timeout=30, env=env, cwd=ROOT)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def push_targets(srv, ride):
    status, doc, _ = srv.get("/rides/" + ride, {"Authorization": "Bearer " + control("op-1", ops=True)})
    assert status == 200, doc
    return doc["push_targets"]


def test_the_sdk_registers_is_acknowledged_and_bad_registrations_are_refused():
    with Server(auth="jwt", env=ENV) as srv:
        with Client(srv.ws + "?token=" + control("bob")) as bob, Client(srv.ws + "?token=" + control("carol")) as carol:
            assert bob.request({"type": "start", "ride": "r-bob"})["type"] == "state"
            assert carol.request({"type": "start", "ride": "r-carol"})["type"] == "state"

        # A Live Activity's token (printed in upper case by the app: the server keeps it in lower case).
        ack = probe(srv, "bob", "register", "apns", "liveactivity", "r-bob", APNS.upper())
        assert ack == {"kind": "push_registered", "platform": "apns", "push_kind": "liveactivity", "ride": "r-bob"}, ack
        assert push_targets(srv, "r-bob") == 1
        # The rider's push-to-start token: no ride, none echoed.
        ack = probe(srv, "bob", "register", "apns", "push_to_start", None, APNS)
        assert ack == {"kind": "push_registered", "platform": "apns", "push_kind": "push_to_start", "ride": ""}, ack
        # An Android device's FCM token on the same ride.
        ack = probe(srv, "bob", "register", "fcm", "notification", "r-bob", "fGx3kQ2sR9e:APA91bH7vLq0zT4mN8pK2w")
        assert ack["kind"] == "push_registered" and ack["push_kind"] == "notification", ack
        assert push_targets(srv, "r-bob") == 2

        # Refusals come back as the server's error codes, and nothing is stored.
        for bad in ("not-a-token", "abcd", "00" * 201):
            err = probe(srv, "bob", "register", "apns", "liveactivity", "r-bob", bad)
            assert err["kind"] == "error" and err["code"] == "bad_request", (bad[:20], err)
            assert "token" in err["message"], err
        err = probe(srv, "bob", "register", "fcm", "notification", "r-bob", "has\\backslash")
        assert (err["kind"], err["code"]) == ("error", "bad_request"), err
        err = probe(srv, "bob", "register", "apns", "liveactivity", "r-carol", APNS)
        assert (err["kind"], err["code"]) == ("error", "forbidden"), err
        assert push_targets(srv, "r-bob") == 2
        assert push_targets(srv, "r-carol") == 0

        gone = probe(srv, "bob", "unregister", "apns", "liveactivity", "r-bob", APNS)
        assert gone == {"kind": "push_unregistered", "platform": "apns", "push_kind": "liveactivity", "ride": "r-bob"}, gone
        assert push_targets(srv, "r-bob") == 1, "the FCM target stays"
