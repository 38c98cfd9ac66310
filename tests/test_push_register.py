"""Push registration (issue 38, item 1) against the real binary: a rider registers a Live
Activity on their own ride and is acknowledged, is refused on another rider's, a fifth target
replaces the oldest, and the targets survive a restart on the same SQLite file. What is stored
is read through the smallest observable: `push_targets` in an operator's GET /rides/{id}.
Sending: tests/test_push_send.py. Every wait is bounded."""
import json
import time

from rp import Client, Server
from test_security import ENV, control

AUTH = dict(auth="jwt", env=ENV)


def token(sub, ops=False):
    return control(sub, ops=True) if ops else control(sub)


def apns(n):
    """A 32-byte APNs device token, distinct per n."""
    return ("%02x" % n) * 32


def register(c, ride, tok, rid):
    return c.request({"type": "register_push", "id": rid, "platform": "apns", "kind": "liveactivity",
                      "ride": ride, "token": tok})


def push_targets(srv, ride):
    status, doc, _ = srv.get("/rides/" + ride, {"Authorization": "Bearer " + token("op-1", ops=True)})
    assert status == 200, doc
    return doc["push_targets"]


def test_registrations_are_acknowledged_refused_trimmed_and_kept_across_a_restart(tmp_path):
    path = str(tmp_path / "rides.db")
    srv = Server(store=path, **AUTH).start()
    try:
        with Client(srv.ws + "?token=" + token("bob")) as bob, Client(srv.ws + "?token=" + token("carol")) as carol:
            assert bob.request({"type": "start", "ride": "r-bob"})["type"] == "state"
            assert carol.request({"type": "start", "ride": "r-carol"})["type"] == "state"
            ack = register(bob, "r-bob", apns(1), "reg-1")
            assert ack == {"type": "push_registered", "id": "reg-1", "platform": "apns", "kind": "liveactivity",
                           "ride": "r-bob"}
            refused = register(bob, "r-carol", apns(9), "reg-x")
            assert (refused["type"], refused["code"]) == ("error", "forbidden")
            assert push_targets(srv, "r-carol") == 0
            # Four more: five registered, four kept, the first gone.
            for n in range(2, 6):
                assert register(bob, "r-bob", apns(n), "reg-%d" % n)["type"] == "push_registered"
            assert push_targets(srv, "r-bob") == 4
        # The file holds the four newest, in order; a restart keeps them.
        assert srv.stop() == 0
        srv = Server(store=path, **AUTH).start()
        assert push_targets(srv, "r-bob") == 4
        with Client(srv.ws + "?token=" + token("bob")) as bob:
            # Removing the oldest kept one (2) shows the first (1) was the one replaced.
            gone = bob.request({"type": "unregister_push", "id": "un-1", "platform": "apns", "kind": "liveactivity",
                                "ride": "r-bob", "token": apns(2)})
            assert gone["type"] == "push_unregistered"
            assert push_targets(srv, "r-bob") == 3
            bob.request({"type": "unregister_push", "id": "un-2", "platform": "apns", "kind": "liveactivity",
                         "ride": "r-bob", "token": apns(1)})
            assert push_targets(srv, "r-bob") == 3, "token 1 was already replaced by the fifth"
    finally:
        srv.stop()
