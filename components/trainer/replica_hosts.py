"""Hosts of their own for a local cluster's replicas, as a Kubernetes cluster gives each pod one.

Each replica runs in a Linux network namespace with its own address, linked by a veth pair to a bridge
that joins only the cluster's replicas (no address on this machine's side: the replicas reach each other
and nothing else, and nothing reaches them). Every namespace's /etc/hosts (`ip netns exec` binds
/etc/netns/NAME/hosts over it) gives each replica's host name its address, so every replica listens on
the same port, the Training Operator's 2222, and the TF_CONFIG a cluster writes (`worker-1:2222`) runs
verbatim, with no map from cluster addresses to local ports. And a replica's link is its own: cutting it
(`ip link set LINK down`) or slowing it (a qdisc on it) is what a partitioned or congested pod sees.

Needs root and iproute2's `ip`, as network namespaces do. A tfxd killed before its cleanup leaves its
namespaces behind; the next ReplicaHosts removes those whose owner is gone (each bridge's owner file)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tfxd.components.trainer import tfjob_manifest

PORT = tfjob_manifest.PORT  # the Training Operator's default port, which its TF_CONFIG names for every replica
NETWORK = "10.204.0.0/16"  # one /24 per cluster: 10.204.K.0/24, K its bridge's number
_OWNERS = Path("/run/tfxd-hosts")  # {bridge}.pid: the pid of the process that made the bridge
_NETNS_ETC = Path("/etc/netns")
_CLUSTERS = 250  # bridge numbers tried
_IFF_UP = 0x1  # the administrative up flag in /sys/class/net/LINK/flags (linux/if.h)


class HostsUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, no `ip`, a container without CAP_NET_ADMIN); says which."""


@dataclass(frozen=True)
class ReplicaHost:
    """A replica's host: its namespace, its host name and address, and its link's end on the bridge."""

    namespace: str
    hostname: str
    address: str
    link: str  # the bridge's side of the replica's veth pair: set it down to cut the replica off

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run on this host: `ip netns exec` sets the namespace and its /etc/hosts, then execs it
        (the same pid, so the replica is still its starter's child)."""
        return ["ip", "netns", "exec", self.namespace, *argv]


class ReplicaHosts:
    """A context: a host for each replica in ``replicas`` ({replica name: its host name}), all removed on
    exit. ``reach``: this machine's addresses the replicas may reach, each with the names they know it by
    (a test's bucket front, an API server stand-in): the bridge gets an address and is the replicas'
    gateway to this machine, never beyond it (nothing forwards)."""

    def __init__(self, replicas: dict[str, str], reach: dict[str, list[str]] | None = None) -> None:
        self.replicas = replicas
        self.reach = reach or {}
        self.hosts: dict[str, ReplicaHost] = {}
        self.bridge: str | None = None

    def __enter__(self) -> ReplicaHosts:
        if not self.replicas:
            return self
        if os.geteuid() != 0:
            raise HostsUnavailable("hosts of their own need root (network namespaces): run tfxd as root, or "
                                   "set targets.local.trainer.network to loopback")
        if shutil.which("ip") is None:
            raise HostsUnavailable("hosts of their own need iproute2's `ip`: install it (apt-get install "
                                   "iproute2), or set targets.local.trainer.network to loopback")
        try:
            with _claiming():  # one process at a time sweeps and takes a number: none removes another's
                _sweep()
                number = self._bridge()
            for index, (name, hostname) in enumerate(self.replicas.items()):
                self.hosts[name] = self._host(number, index, name, hostname)
            hosts_file = _hosts_file(self.hosts.values(), self.reach)
            for host in self.hosts.values():
                (_NETNS_ETC / host.namespace).mkdir(parents=True, exist_ok=True)
                (_NETNS_ETC / host.namespace / "hosts").write_text(hosts_file, encoding="utf-8")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bridge is not None:
            with _claiming():  # its number is free only once its owner file is gone
                _remove(self.bridge)
        self.bridge = None

    def cut_off(self, name: str) -> str | None:
        """'was cut off from the others (its host's link is down)' when replica ``name``'s link is down,
        else None: what tfxd can tell of a replica TensorFlow lost while it was alive."""
        host = self.hosts.get(name)
        if host is None:
            return None
        return f"was cut off from the others (its host's link {host.link} is down)" if _down(host.link) else None

    def _bridge(self) -> int:
        """A bridge of a free number, owned by this process."""
        for number in [(os.getpid() + k) % _CLUSTERS for k in range(_CLUSTERS)]:
            name = f"tfxdb{number}"
            try:
                _ip("link", "add", name, "type", "bridge")
            except HostsUnavailable as error:
                if "File exists" in str(error):
                    continue
                raise
            self.bridge = name
            (_OWNERS / f"{name}.pid").write_text(str(os.getpid()), encoding="ascii")
            _ip("link", "set", name, "up")
            if self.reach:
                _ip("addr", "add", f"{_gateway(number)}/24", "dev", name)
            return number
        raise HostsUnavailable(f"no free bridge tfxdb0..tfxdb{_CLUSTERS - 1}: remove the stale ones "
                               "(`ip link del tfxdbN`)")

    def _host(self, number: int, index: int, name: str, hostname: str) -> ReplicaHost:
        host = ReplicaHost(namespace=f"tfxdb{number}-{name}", hostname=hostname,
                           address=f"10.204.{number}.{index + 2}", link=f"tfxdb{number}h{index}")
        inner = f"tfxdb{number}n{index}"
        _ip("netns", "add", host.namespace)
        _ip("link", "add", host.link, "type", "veth", "peer", "name", inner)
        _ip("link", "set", host.link, "master", f"tfxdb{number}", "up")
        _ip("link", "set", inner, "netns", host.namespace, "name", "eth0")
        commands = [("addr", "add", f"{host.address}/24", "dev", "eth0"), ("link", "set", "eth0", "up"),
                    ("link", "set", "lo", "up")]
        commands += [("route", "add", f"{address}/32", "via", _gateway(number)) for address in self.reach]
        for command in commands:
            _ip("netns", "exec", host.namespace, "ip", *command)
        return host


def _gateway(number: int) -> str:
    return f"10.204.{number}.1"


def _hosts_file(hosts: Iterable[ReplicaHost], reach: dict[str, list[str]]) -> str:
    lines = ["127.0.0.1 localhost", "::1 localhost"]
    lines += [f"{host.address} {host.hostname}" for host in hosts]
    lines += [f"{address} {' '.join(names)}" for address, names in reach.items()]
    return "\n".join(lines) + "\n"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode:
        raise HostsUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")


def _namespaces(bridge: str) -> list[str]:
    with contextlib.suppress(OSError):
        return [name for name in os.listdir("/run/netns") if name.startswith(f"{bridge}-")]
    return []


def _down(link: str) -> bool:
    """Whether ``link`` is set down or has lost its carrier (its peer down), read from the flags the kernel
    changes as `ip link set` returns. Not operstate: the kernel's link watcher updates that later (up to a
    second on a busy machine), so a link set up again could still read down."""
    device = Path("/sys/class/net") / link
    try:
        if not int((device / "flags").read_text(), 16) & _IFF_UP:
            return True
        return (device / "carrier").read_text().strip() == "0"
    except OSError:  # gone with its namespace, or (carrier) set down as it was read
        return device.exists()


def _links(bridge: str) -> list[str]:
    """The bridge's side of its replicas' veth pairs."""
    listed = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = (line.split(":")[1].strip().split("@")[0] for line in listed.splitlines() if line.count(":") >= 2)
    return [name for name in names if name.startswith(f"{bridge}h")]


def _remove(bridge: str) -> None:
    """A bridge's veth pairs (deleted here: a namespace's own go with it only later, as the kernel frees
    it), namespaces, hosts files, the bridge, its owner file."""
    for link in _links(bridge):
        subprocess.run(["ip", "link", "del", link], capture_output=True)
    for namespace in _namespaces(bridge):
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        shutil.rmtree(_NETNS_ETC / namespace, ignore_errors=True)
    subprocess.run(["ip", "link", "del", bridge], capture_output=True)
    with contextlib.suppress(OSError):
        (_OWNERS / f"{bridge}.pid").unlink()


@contextlib.contextmanager
def _claiming():
    """This machine's lock on sweeping and taking bridge numbers, held by one process at a time."""
    _OWNERS.mkdir(parents=True, exist_ok=True)
    with open(_OWNERS / "lock", "w", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def sweep() -> list[str]:
    """Remove the bridges (and their namespaces) whose owner process is gone; their names."""
    with _claiming():
        return _sweep()


def _sweep() -> list[str]:
    swept = []
    with contextlib.suppress(OSError):
        for owner in _OWNERS.glob("tfxdb*.pid"):
            with contextlib.suppress(OSError, ValueError):
                pid = int(owner.read_text(encoding="ascii"))
                if not _alive(pid):
                    _remove(owner.stem)
                    swept.append(owner.stem)
    return swept


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
