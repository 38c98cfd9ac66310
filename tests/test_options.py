"""Every command on the one parser (Sources/RideOptions): the same wording for the same
mistake in serve, ride, token and bench, environment values named as VAR=value, and help
printed from the option tables. No server is started: each mistake is refused before that."""
import os
import subprocess

import pytest

from rp import BIN, ROOT


def run(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("RIDEPUSH_")}
    e.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=e, timeout=20, cwd=ROOT)


@pytest.mark.parametrize("args, env, message", [
    (["serve", "--bogus"], {}, "ridepush serve: unknown option --bogus (see ridepush serve --help)\n"),
    (["serve", "stray"], {}, "ridepush serve: unexpected argument stray (see ridepush serve --help)\n"),
    (["serve", "--port", "70000"], {}, "ridepush serve: --port 70000: expected a whole number from 0 to 65535\n"),
    (["serve", "--threads=0"], {}, "ridepush serve: --threads 0: expected a whole number from 1 to 64\n"),
    (["serve", "--port"], {}, "ridepush serve: --port needs a value\n"),
    (["serve", "--trust-proxy=1"], {}, "ridepush serve: --trust-proxy takes no value\n"),
    (["serve", "--auth", "basic"], {}, "ridepush serve: --auth basic: expected jwt or none\n"),
    (["serve"], {"RIDEPUSH_PORT": "80x"}, "ridepush serve: RIDEPUSH_PORT=80x: expected a whole number from 0 to 65535\n"),
    (["serve"], {"RIDEPUSH_KEEPALIVE": "1"}, "ridepush serve: RIDEPUSH_KEEPALIVE=1: expected a whole number from 2 to 3600\n"),
    (["serve"], {"RIDEPUSH_CREATE_STORE": "maybe"}, "ridepush serve: RIDEPUSH_CREATE_STORE=maybe: expected 1 or 0\n"),
    (["ride", "start", "--limit", "0"], {}, "ridepush ride: --limit 0: expected a whole number of seconds from 1 to 1000000000\n"),
    (["ride", "end", "r-1", "--distance=-5"], {}, "ridepush ride: --distance -5: expected a whole number of metres from 0 to 1000000000\n"),
    (["ride", "start", "--lang", "fr"], {}, "ridepush ride: --lang fr: expected ko or en\n"),
    (["ride", "start", "extra"], {}, "ridepush ride: unexpected argument extra (see ridepush ride --help)\n"),
    (["token", "--frobnicate"], {}, "ridepush token: unknown option --frobnicate\nTry 'ridepush token --help'.\n"),
    (["backup", "--bogus"], {}, "ridepush backup: unknown option --bogus (see ridepush backup --help)\n"),
    (["backup", "--to", "b.db", "--pages", "0"], {}, "ridepush backup: --pages 0: expected a whole number from 1 to 65536\n"),
])
def test_a_refused_command_line_names_the_option_and_what_was_expected(args, env, message):
    r = run(*args, env=env)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", message)


def test_bench_errors_come_with_its_help():
    r = run("bench", "-n", "0")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("ridepush bench: -n 0: expected a whole number from 1 to 1000000\n\nusage: ridepush bench ")


def test_the_command_line_beats_the_environment():
    # A bad variable is not looked at when the option itself is given (and then the store is missing).
    r = run("serve", "--port", "0", "--store", "/nonexistent-dir/x.db", env={"RIDEPUSH_PORT": "junk"})
    assert r.returncode == 2 and "RIDEPUSH_PORT" not in r.stderr and "/nonexistent-dir/x.db" in r.stderr


@pytest.mark.parametrize("command, options", [
    (["serve"], ["--host ADDR", "--port N", "--public DIR", "--store PATH|memory|postgresql://USER@HOST:PORT/DB",
                 "--create-store", "--store-password-file F", "--plans FILE", "--zones FILE", "--max-speed-kph KPH", "--auth jwt|none", "--jwt-secret-file FILE",
                 "--jwks-file FILE", "--jwks-url URL", "--jwt-public-key FILE", "--jwt-issuer ISS", "--jwt-audience AUD", "--jwt-any-issuer",
                 "--jwt-claim-namespace PREFIX", "--tls-cert FILE", "--tls-key FILE", "--threads N", "--max-frame BYTES", "--max-subscriptions N",
                 "--max-open-rides-per-rider N", "--max-connections-per-ip N", "--trust-proxy", "--control-rate N", "--keepalive SECONDS",
                 "--handshake-timeout SECONDS", "--slow-consumer-lag SECONDS", "--log-format text|json", "--webhook URL", "--webhook-secret-file F",
                 "--webhook-endpoints-file F", "--webhook-health-age S",
                 "--outbound-ca-file F", "--apns-key-file F", "--apns-key-id KID", "--apns-team-id TEAM", "--apns-topic BUNDLE_ID",
                 "--apns-url URL", "--fcm-service-account F", "--fcm-url URL", "--live-activity-dismiss-after SECONDS", "--retain-ended DAYS", "--drain-seconds SECONDS", "--allow-origin ORIGIN", "-h, --help"]),
    (["ride"], ["--url ws://HOST:PORT/ws", "--token TOKEN", "--token-file PATH", "--ride ID", "--plan PLAN",
                "--limit SECONDS", "--distance METRES", "--force", "--gpx PATH", "--speed X", "--lang ko|en", "--wait SECONDS",
                "--insecure", "-h, --help"]),
    (["token"], ["--watch", "--control", "--ride ID", "--sub RIDER", "--ops", "--ttl DURATION", "--jwt-secret-file FILE", "--store PATH",
                 "--verify TOKEN", "--jwks-file, --jwks FILE", "--jwt-public-key FILE", "--jwt-issuer ISS",
                 "--jwt-audience AUD", "--jwt-claim-namespace PREFIX", "--jwt-any-issuer", "-h, --help"]),
    (["backup"], ["--store PATH", "--to FILE", "--force", "--pages N", "-h, --help"]),
    (["bench", "--transitions"], ["--transitions", "--url URL", "-n, --connections, --clients N", "--depth K",
                                  "-d, --duration S", "--disk DIR", "--one-ride N", "--open-rides N", "--token T", "--json",
                                  "-h, --help"]),
])
def test_help_lists_every_option_in_table_order(command, options):
    r = run(*command, "--help")
    assert r.returncode == 0 and r.stderr == ""
    listed = [line[2:].split("  ")[0] for line in r.stdout.splitlines()
              if line.startswith("  -") and not line.startswith("   ")]
    assert listed == options


def test_serve_help_names_every_environment_variable_with_its_default():
    out = " ".join(run("serve", "--help").stdout.split())  # the help wraps: compare words
    for text in ["(RIDEPUSH_PORT, default 8080)", "(RIDEPUSH_HOST, default 127.0.0.1)", "(RIDEPUSH_KEEPALIVE, default 30)",
                 "(RIDEPUSH_STORE_PASSWORD_FILE)", "(RIDEPUSH_TRUST_PROXY=1)", "(RIDEPUSH_CREATE_STORE=1)",
                 "(repeatable, RIDEPUSH_ALLOW_ORIGIN as a comma-separated list)", "(RIDEPUSH_AUTH, default jwt)",
                 "(RIDEPUSH_LOG_FORMAT, default text)", "(RIDEPUSH_THREADS, default number of cores)"]:
        assert text in out, text
