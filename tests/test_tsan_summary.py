"""scripts/tsan-summary.sh, the verdict of `make tsan`: it must fail on a report in RidePush
code and only then. The reports are shaped as ThreadSanitizer writes them (log_path files,
stacks as in a real report of this server); every thread in the server is created by
RidePush code, so a race inside lws must not count as ours because of its threads."""
import os
import subprocess

import rp

SCRIPT = os.path.join(rp.ROOT, "scripts", "tsan-summary.sh")

OURS = "/work/x/Sources/RideCore/SlewingClock.swift:61:35 (ridepush+0x2408e6)"
OUR_TEST = "/work/x/Tests/RidePushServerTests/ShardTests.swift:40:9 (RidePushPackageTests.xctest+0x1234)"
LWS = "<null> <null> (libwebsockets.so.17+0x2621d)"
LIBC = "__libc_start_call_main csu/../sysdeps/nptl/libc_start_call_main.h:58:16 (libc.so.6+0x27249)"
FOUNDATION = "/home/build-user/swift-foundation/Sources/FoundationEssentials/Data.swift:10 (libFoundationEssentials.so+0x10)"
CREATED_BY_US = "$s8ridepush12serveCommand /work/x/Sources/ridepush/Serve.swift:134:13 (ridepush+0x4e187c)"


def stack(*frames):
    return "".join(f"    #{i} f{i} {fr}\n" for i, fr in enumerate(frames))


def race(first, second, threads=(CREATED_BY_US,)):
    return ("==================\n"
            "WARNING: ThreadSanitizer: data race (pid=1)\n"
            "  Read of size 8 at 0x721c00000118 by thread T4:\n" + stack(*first) + "\n"
            "  Previous write of size 8 at 0x721c00000118 by thread T5:\n" + stack(*second) + "\n"
            "  Thread T4 'ridepush' (tid=23736, running) created by main thread at:\n" + stack(*threads) + "\n"
            "  Thread T5 'ridepush' (tid=23737, running) created by main thread at:\n" + stack(*threads) + "\n"
            "SUMMARY: ThreadSanitizer: data race in f0\n"
            "==================\n")


def leak(created):
    return ("==================\n"
            "WARNING: ThreadSanitizer: thread leak (pid=1)\n"
            "  Thread T3 (tid=9, finished) created by main thread at:\n" + stack(*created) + "\n"
            "SUMMARY: ThreadSanitizer: thread leak in f0\n"
            "==================\n")


def summary(tmp_path, *reports):
    d = tmp_path / "tsan"
    d.mkdir()
    for i, text in enumerate(reports):
        (d / f"report.{100 + i}").write_text(text)
    r = subprocess.run(["bash", SCRIPT, str(d)], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout.splitlines()[0]


def test_no_report_files_pass(tmp_path):
    assert summary(tmp_path) == (0, "tsan: no reports")


def test_a_race_in_ridepush_code_fails(tmp_path):
    assert summary(tmp_path, race([OURS, LWS], [OURS, LWS])) == (
        1, "tsan: 1 report(s) in 1 file(s): 1 naming RidePush code, 0 inside libwebsockets only, 0 elsewhere only")


def test_one_side_in_ridepush_code_is_enough(tmp_path):
    assert summary(tmp_path, race([LWS, LIBC], [OURS, LWS]))[0] == 1


def test_a_race_in_a_swift_test_of_ours_fails(tmp_path):
    assert summary(tmp_path, race([OUR_TEST, LIBC], [OUR_TEST]))[0] == 1


def test_races_inside_lws_or_foundation_are_listed_but_pass(tmp_path):
    # the threads were created by ridepush code in both: that alone does not make them ours
    code, line = summary(tmp_path, race([LWS, LIBC], [LWS]), race([FOUNDATION], [FOUNDATION, LIBC]) + race([LIBC], [LIBC]))
    assert (code, line) == (
        0, "tsan: 3 report(s) in 2 file(s): 0 naming RidePush code, 1 inside libwebsockets only, 2 elsewhere only")


def test_a_thread_leaked_by_ridepush_code_fails(tmp_path):
    assert summary(tmp_path, leak([CREATED_BY_US, LIBC]), race([LWS], [LWS])) == (
        1, "tsan: 2 report(s) in 2 file(s): 1 naming RidePush code, 1 inside libwebsockets only, 0 elsewhere only")
