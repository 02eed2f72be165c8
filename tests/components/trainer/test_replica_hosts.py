"""Hosts of their own for a local cluster's replicas (components/trainer/replica_hosts.py), with real
namespaces, links and sockets: each replica reaches the others by name at port 2222 and nothing else; a
cut link cuts it off; nothing is left behind, nor after an owner that died without cleaning up."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.network_guard.sitecustomize import HOSTS_ENV
from tfxd.components.trainer import replica_hosts
from tfxd.components.trainer.replica_hosts import HostsUnavailable, ReplicaHosts

# one accepted connection on port 2222, then prints what it got; and a client that sends its argument
SERVE = ("import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
         "s.bind(('', 2222)); s.listen(); c, _ = s.accept(); print(c.recv(64).decode())")
SEND = "import socket, sys; socket.create_connection((sys.argv[1], 2222), timeout=2).sendall(sys.argv[2].encode())"


def _left(bridge: str) -> list[str]:
    listed = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found = [line for line in (listed + namespaces).splitlines() if bridge in line]
    return found + [str(p) for p in Path("/etc/netns").glob(f"{bridge}-*")]


def _send(host: replica_hosts.ReplicaHost, to: str, text: str) -> subprocess.CompletedProcess:
    env = {**os.environ, HOSTS_ENV: replica_hosts.NETWORK}  # the suite's network guard lets them through
    return subprocess.run(host.command([sys.executable, "-c", SEND, to, text]), capture_output=True, text=True,
                          timeout=30, env=env)


def test_replicas_reach_each_other_by_name_at_2222_a_cut_link_cuts_one_off_and_nothing_is_left():
    with ReplicaHosts({n: n for n in ("chief-0", "worker-0", "ps-0")}) as hosts:
        bridge = hosts.bridge
        chief, worker = hosts.hosts["chief-0"], hosts.hosts["worker-0"]
        hosts_file = Path("/etc/netns", worker.namespace, "hosts").read_text()
        assert hosts_file.splitlines()[2:] == [f"{h.address} {h.hostname}" for h in hosts.hosts.values()]
        assert len({h.address for h in hosts.hosts.values()}) == 3
        server = subprocess.Popen(chief.command([sys.executable, "-c", SERVE]), stdout=subprocess.PIPE, text=True)
        for _ in range(100):  # until it listens
            if _send(worker, "chief-0", "hello from worker-0").returncode == 0:
                break
            time.sleep(0.1)
        assert server.communicate(timeout=30)[0].strip() == "hello from worker-0"
        assert hosts.cut_off("chief-0") is None
        subprocess.run(["ip", "link", "set", chief.link, "down"], check=True)
        assert hosts.cut_off("chief-0") == f"was cut off from the others (its host's link {chief.link} is down)"
        assert "TimeoutError: timed out" in _send(worker, "chief-0", "x").stderr
        assert _left(bridge)
    assert _left(bridge) == []


def test_a_dead_owners_hosts_are_swept_by_the_next_cluster():
    """A tfxd killed with its cluster up (SIGKILL runs no cleanup) leaves its namespaces; the next
    ReplicaHosts removes them, and keeps the ones whose owner lives. Other tests' clusters may sweep the
    orphan first and take its bridge's number, so the orphan's things are told apart by what no other
    cluster has: its replicas' names and its links' index and address."""
    script = ("import os, sys; from tfxd.components.trainer.replica_hosts import ReplicaHosts; "
              "h = ReplicaHosts({'swept-0': 'worker-0', 'swept-1': 'worker-1'}).__enter__(); "
              "print(h.bridge, flush=True); os._exit(0)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    orphan = set(_left(done.stdout.strip()))
    assert len(orphan) >= 7  # the bridge, two links, two namespaces, two hosts files
    with ReplicaHosts({"worker-0": "worker-0"}) as hosts:
        assert orphan.isdisjoint(_left(done.stdout.strip())) and _left(hosts.bridge)
    assert done.stdout.strip() not in replica_hosts.sweep()  # swept already


def test_without_root_it_says_what_to_do(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(HostsUnavailable, match=r"need root .*set targets.local.trainer.network to loopback"):
        ReplicaHosts({"worker-0": "worker-0", "worker-1": "worker-1"}).__enter__()
    with ReplicaHosts({}) as nothing:  # a loopback cluster asks for none and needs nothing
        assert nothing.hosts == {}


def test_replicas_reach_this_machine_only_at_the_addresses_given():
    """``reach``: a test's front on this machine, known by a name of its own in the replicas' hosts files,
    is reached through the bridge; another of this machine's addresses is not (no route to it)."""
    here, elsewhere = "10.204.255.1", "10.204.255.2"  # above every bridge's /24 (tfxdb0..249)
    # two addresses of this machine on a link of their own (a veth pair: this kernel has no dummy links)
    subprocess.run(["ip", "link", "add", "tfxdtest0", "type", "veth", "peer", "name", "tfxdtest1"], check=True)
    try:
        for address in (here, elsewhere):
            subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "tfxdtest0"], check=True)
        for link in ("tfxdtest0", "tfxdtest1"):
            subprocess.run(["ip", "link", "set", link, "up"], check=True)
        with socket.socket() as front, ReplicaHosts({"worker-0": "worker-0"}, reach={here: ["front.test"]}) as hosts:
            front.bind(("0.0.0.0", 2222))
            front.listen()
            worker = hosts.hosts["worker-0"]
            sent = _send(worker, "front.test", "hello from worker-0")
            assert sent.returncode == 0, sent.stderr
            connection, (source, _) = front.accept()
            with connection:
                assert connection.recv(64) == b"hello from worker-0" and source == worker.address
            assert "Network is unreachable" in _send(worker, elsewhere, "x").stderr
    finally:
        subprocess.run(["ip", "link", "del", "tfxdtest0"], capture_output=True)
