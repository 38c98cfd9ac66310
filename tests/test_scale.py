"""1,000 rides × 2 subscribers: one shared seq/at per second, and the process's threads and
timers do not grow with rides (issue 2). Prints the server's CPU per tick, measured."""
import asyncio
import json
import os
import time

from websockets.asyncio.client import connect

from rp import Server

RIDES = 1000
SUBS_PER_RIDE = 2
TICKS = 4


def proc_threads(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("Threads:")).split()[1])


def proc_timers(pid):
    """Kernel timer and event objects the process holds (lws keeps its timers in user space)."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if "timerfd" in target or "eventfd" in target:
            n += 1
    return n


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run(server):
    pid = server.proc.pid
    async with connect(server.ws, subprotocols=["ride.v1"]) as dev:
        threads0, timers0 = proc_threads(pid), proc_timers(pid)  # serving, no rides yet
        for i in range(RIDES):
            await dev.send(json.dumps({"type": "start", "ride": "s-%d" % i}))
        for _ in range(RIDES):
            assert json.loads(await asyncio.wait_for(dev.recv(), 5))["state"] == "riding"
    conns = []
    for i in range(RIDES * SUBS_PER_RIDE):
        ws = await connect(server.ws, subprotocols=["ride.v1"], open_timeout=10)
        await ws.send(json.dumps({"type": "subscribe", "ride": "s-%d" % (i // SUBS_PER_RIDE)}))
        conns.append(ws)
    for ws in conns:
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "state"
    threads1, timers1 = proc_threads(pid), proc_timers(pid)

    # Collect TICKS whole ticks on every connection; skip the first (may be partial).
    async def collect(ws):
        got = []
        while len(got) < TICKS + 1:
            m = json.loads(await asyncio.wait_for(ws.recv(), 5))
            if m["type"] == "tick":
                got.append((m["seq"], m["at"], m["ride"]))
        return got[1:]
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    results = await asyncio.gather(*(collect(ws) for ws in conns))
    cpu1, t1 = cpu_seconds(pid), time.monotonic()
    for ws in conns:
        await ws.close()
    return threads0, timers0, threads1, timers1, results, (cpu1 - cpu0, t1 - t0)


def test_thousand_rides_two_subscribers_each_share_one_tick_per_second():
    # One device starts all rides, so lift the per-connection control rate for it.
    with Server("--control-rate", "5000") as server:
        threads0, timers0, threads1, timers1, results, (cpu, wall) = asyncio.run(run(server))
        status, health, _ = server.get("/healthz")
    assert health["rides"]["riding"] == RIDES
    assert threads1 == threads0, "threads grew with rides: %d → %d" % (threads0, threads1)
    assert timers1 == timers0, "kernel timers grew with rides: %d → %d" % (timers0, timers1)
    # Each subscriber is sent its own ride's ticks, never another's (the bench counts seq only).
    for i, got in enumerate(results):
        assert {ride for _, _, ride in got} == {"s-%d" % (i // SUBS_PER_RIDE)}, (i, got[:2])
    # Every tick has one (seq, at) for all 2,000 subscribers, and seq and at advance together.
    at_by_seq = {}
    for got in results:
        seqs = [s for s, _, _ in got]
        assert seqs == list(range(seqs[0], seqs[0] + TICKS)), seqs
        for s, at, _ in got:
            at_by_seq.setdefault(s, set()).add(at)
    assert all(len(ats) == 1 for ats in at_by_seq.values()), at_by_seq
    ordered = sorted((s, next(iter(a))) for s, a in at_by_seq.items())
    for (s1, a1), (s2, a2) in zip(ordered, ordered[1:]):
        assert a2 - a1 == (s2 - s1) * 1000
    # One tick per wall second: CPU per second of the window is CPU per tick.
    print("\n1,000 rides × 2 subscribers: threads %d (before rides %d), kernel timers %d; "
          "server CPU %.1f ms over %.1f s = %.2f ms per tick for 2,000 subscribers (%.1f µs per delivered tick)"
          % (threads1, threads0, timers1, cpu * 1000, wall, cpu * 1000 / wall, cpu * 1e6 / wall / 2000))
