"""The suite's network guard: a socket may reach loopback and the suite's own test hosts, nothing else.

tests/conftest.py installs it in pytest's processes and puts this folder first on PYTHONPATH, so every Python
process a test starts (a `tfxd run`, Beam's SDK workers, a Trainer replica, a replayed task) imports it at
start-up as its ``sitecustomize``. A connection elsewhere is refused with an OSError naming the address, and
written, with the process's pid, to the file TFXD_TESTS_NETWORK_GUARD names: conftest fails the test during
which a line appeared, even when the code that dialled caught the error (google-auth's metadata-server probe,
a client's retry loop do). A test that makes test hosts of its own (network namespaces) names their networks
in TFXD_TESTS_HOSTS (CIDRs, comma-separated) for the processes it starts. Code outside Python (gRPC's and
TensorFlow's C++ channels, the JVM's) is not seen here.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket

LOG_ENV = "TFXD_TESTS_NETWORK_GUARD"
HOSTS_ENV = "TFXD_TESTS_HOSTS"
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", ""})


def _own_networks() -> list:
    return [ipaddress.ip_network(cidr.strip(), strict=False)
            for cidr in os.environ.get(HOSTS_ENV, "").split(",") if cidr.strip()]


def _address_allowed(host: str) -> bool:
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified or any(address in net for net in _own_networks())


def refusal(family: int, address: object) -> str | None:
    """Why a socket of ``family`` may not reach ``address``, or None where it may (loopback, the suite's own
    test hosts, anything that is not an IP socket)."""
    if family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple) or not address:
        return None
    host, port = str(address[0]), address[1] if len(address) > 1 else ""
    if host.lower() in _LOOPBACK_NAMES:
        return None
    try:
        allowed = _address_allowed(host)
        resolved = host
    except ValueError:  # a host name: what it resolves to decides
        try:
            found = {info[4][0] for info in socket.getaddrinfo(host, None)}
        except OSError:
            return None  # unresolvable: the connection fails on its own
        allowed = all(_address_allowed(ip) for ip in found)
        resolved = f"{host} ({', '.join(sorted(found))})"
    if allowed:
        return None
    return f"{resolved}:{port}"


def _refuse(family: int, address: object) -> None:
    where = refusal(family, address)
    if where is None:
        return
    log = os.environ.get(LOG_ENV)
    if log:
        with contextlib.suppress(OSError), open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {where}\n")
    raise OSError(errno.ENETUNREACH, f"tfxd's tests reach only loopback and their own test hosts: a connection "
                                     f"to {where} refused (tests/network_guard)")


def install() -> None:
    """Wrap the socket methods that dial out; once per process however often it is called."""
    cls = socket.socket
    if getattr(cls, "_tfxd_network_guard", False):
        return
    connect, connect_ex, sendto = cls.connect, cls.connect_ex, cls.sendto

    def guarded_connect(self, address):
        _refuse(self.family, address)
        return connect(self, address)

    def guarded_connect_ex(self, address):
        _refuse(self.family, address)
        return connect_ex(self, address)

    def guarded_sendto(self, data, *args):
        _refuse(self.family, args[-1])
        return sendto(self, data, *args)

    cls.connect, cls.connect_ex, cls.sendto = guarded_connect, guarded_connect_ex, guarded_sendto
    cls._tfxd_network_guard = True


if os.environ.get(LOG_ENV):
    install()
