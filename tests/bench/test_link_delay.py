"""bench/link_delay.py, the slow and lossy link of the faults bench where the kernel has no netem: two
hosts of their own (replica_hosts: namespaces on a bridge), a TCP echo between them, the delayer on one.
Judged by the kernel: the packets it queues reach the echo only through the delayer's verdicts (held for
the delay it set each way), every packet dropped when loss is 1 (the connection never opens: the bite),
and once the delayer is stopped its rules are gone and the link carries the echo undelayed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.bench import BENCH
from tests.network_guard.sitecustomize import HOSTS_ENV
from tfxd.components.trainer.replica_hosts import NETWORK, ReplicaHost, ReplicaHosts

ECHO = """\
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", 7777))
server.listen()
print("listening", flush=True)
connection, _ = server.accept()
while data := connection.recv(100):
    connection.sendall(data)
"""

CLIENT = """\
import socket, sys
try:
    connection = socket.create_connection((sys.argv[1], 7777), timeout=float(sys.argv[2]))
except OSError as exc:
    sys.exit(f"no connection: {exc}")
connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(5):
    connection.sendall(b"x")
    assert connection.recv(10) == b"x"
print("echoed 5", flush=True)
"""


@contextmanager
def _pair() -> Iterator[tuple[ReplicaHost, ReplicaHost]]:
    """Two hosts, a and b, each a namespace whose `eth0` is linked to one bridge (replica_hosts: what the
    local cluster's replicas run on)."""
    with ReplicaHosts({"a": "a", "b": "b"}) as hosts:
        yield hosts.hosts["a"], hosts.hosts["b"]


@contextmanager
def delayed(namespace: str, stats: Path, *args: str) -> Iterator[subprocess.Popen]:
    """bench/link_delay.py on eth0 of ``namespace`` (``args``: its --delay, --loss), stopped (SIGTERM) on
    the way out, when it writes its counts to ``stats``."""
    delayer = subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, os.path.join(BENCH, "link_delay.py"),
                                "--device", "eth0", "--queue", "3", "--stats", str(stats), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert delayer.stdout.readline().strip() == "link delay ready", delayer.communicate()[0]
        yield delayer
    finally:
        delayer.terminate()
        delayer.wait(timeout=10)


def _echo(a: ReplicaHost, b: ReplicaHost, timeout: float = 5) -> subprocess.CompletedProcess:
    """5 round trips from a to the echo on b (the hosts' network: the suite's own test hosts)."""
    server = subprocess.Popen(b.command([sys.executable, "-c", ECHO]), stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        return subprocess.run(a.command([sys.executable, "-c", CLIENT, b.address, str(timeout)]),
                              capture_output=True, text=True, timeout=60, env={**os.environ, HOSTS_ENV: NETWORK})
    finally:
        server.kill()
        server.wait()


def _rules(namespace: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "exec", namespace, "iptables", "-S"], capture_output=True, text=True,
                            check=True).stdout
    return [line for line in listed.splitlines() if "NFQUEUE" in line]


def test_packets_are_held_for_the_delay_each_way_and_the_link_is_left_as_it_was(tmp_path):
    stats = tmp_path / "stats.json"
    with _pair() as (a, b):
        with delayed(b.namespace, stats, "--delay", "0.05"):
            assert _rules(b.namespace) == ["-A INPUT -i eth0 -j NFQUEUE --queue-num 3 --queue-bypass",
                                 "-A OUTPUT -o eth0 -j NFQUEUE --queue-num 3 --queue-bypass"]
            echoed = _echo(a, b)
        assert echoed.returncode == 0 and "echoed 5" in echoed.stdout, echoed.stdout + echoed.stderr
        counts = json.loads(stats.read_text())
        # the handshake, 5 requests and 5 replies, their acks: every one through a verdict, none early
        assert counts["dropped"] == 0 and counts["accepted"] >= 13, counts
        assert counts["least_hold_s"] >= 0.05, counts
        assert _rules(b.namespace) == []  # stopped, it took its rules with it: the link carries the echo as before
        assert _echo(a, b).returncode == 0


def test_a_loss_of_one_drops_every_packet(tmp_path):
    stats = tmp_path / "stats.json"
    with _pair() as (a, b), delayed(b.namespace, stats, "--delay", "0", "--loss", "1"):
        echoed = _echo(a, b, timeout=2)
    assert echoed.returncode == 1 and "no connection" in echoed.stderr, echoed.stdout + echoed.stderr
    counts = json.loads(stats.read_text())
    assert counts["accepted"] == 0 and counts["dropped"] >= 1, counts

