"""The suite's network guard: a socket may reach loopback and the suite's own test hosts, nothing else.

tests/conftest.py installs it in pytest's processes and puts this folder first on PYTHONPATH, so every Python
process a test starts (a `tfxd run`, Beam's SDK workers, a Trainer replica, a replayed task) imports it at
start-up as its ``sitecustomize``. A connection elsewhere is refused with an OSError naming the address, and
written, with the process's pid, to the file TFXD_TESTS_NETWORK_GUARD names: conftest fails the test during
which a line appeared, even when the code that dialled caught the error (google-auth's metadata-server probe,
a client's retry loop do). A test that makes test hosts of its own (network namespaces) names their networks
in TFXD_TESTS_HOSTS (CIDRs, comma-separated) for the processes it starts. Code outside Python (gRPC's and
TensorFlow's C++ channels, the JVM's) is not seen here.

It guards one more thing a cluster would catch and a laptop would not: tfxd's code handing a bucket path
(gs://..., s3://...) to a local file function (open, os.makedirs, os.replace, glob, ...), seen through
Python's audit events. Locally that quietly makes a folder named `gs:` in the working directory; on a cluster
it fails the task. It is refused the same way, naming the path and the function. Libraries are left to
themselves: TensorFlow's checkpoint writer globs its prefix with Python's glob for a size metric
(tensorflow/python/checkpoint/checkpoint.py, _get_checkpoint_size), which finds nothing on a bucket and
harms nothing.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import re
import socket
import sys
import sysconfig

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


def _record(where: str) -> None:
    log = os.environ.get(LOG_ENV)
    if log:
        with contextlib.suppress(OSError), open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {where}\n")


def _refuse(family: int, address: object) -> None:
    where = refusal(family, address)
    if where is None:
        return
    _record(f"a connection to {where}")
    raise OSError(errno.ENETUNREACH, f"tfxd's tests reach only loopback and their own test hosts: a connection "
                                     f"to {where} refused (tests/network_guard)")


# a bucket URI, or what pathlib makes of one (Path("gs://b/x") is gs:/b/x), at the start of a path or of
# one of its parts
_BUCKET_PATH = re.compile(r"(^|/)(gs|s3):/")
# Python's audit events (docs.python.org/3/library/audit_events.html) that take a local path first
_LOCAL_FILE_EVENTS = frozenset({"open", "os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir",
                                "os.listdir", "os.scandir", "os.truncate", "shutil.rmtree", "shutil.copyfile",
                                "shutil.move", "os.chmod", "os.utime", "os.symlink", "os.link"})


def bucket_path_refusal(event: str, args: tuple) -> str | None:
    """Why ``event`` may not run on ``args``' paths: one of them is a bucket path, or None."""
    if event not in _LOCAL_FILE_EVENTS:
        return None
    for arg in args[:2]:
        if isinstance(arg, bytes):
            arg = arg.decode("utf-8", "replace")
        if isinstance(arg, os.PathLike):
            arg = os.fspath(arg)
        if isinstance(arg, str) and _BUCKET_PATH.search(arg):
            return f"a bucket path opened as a local file: {arg} ({event})"
    return None


_STDLIB = sysconfig.get_paths()["stdlib"]


def _called_by_a_library() -> bool:
    """Whether the nearest caller outside the standard library (glob, pathlib, shutil) is a library's code
    (site-packages) rather than tfxd's."""
    frame = sys._getframe(2)  # noqa: SLF001 - past the audit hook and this function
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<") or name.startswith(_STDLIB) or name == __file__):
            return f"{os.sep}site-packages{os.sep}" in name
        frame = frame.f_back
    return False


def _bucket_hook(event: str, args: tuple) -> None:
    where = bucket_path_refusal(event, args)
    if where is not None and not _called_by_a_library():
        _record(where)
        raise OSError(errno.EINVAL, f"{where}: a local file function on a bucket path (tests/network_guard)")


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
    sys.addaudithook(_bucket_hook)  # for good: audit hooks cannot be removed


if os.environ.get(LOG_ENV):
    install()
