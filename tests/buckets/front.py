"""Google's front end, as far as the suite needs one: TLS for Cloud Storage's host names in front of
fake-gcs-server, a metadata server that hands out a token, and faults on request.

On a cluster every client reaches Cloud Storage through Google's front end at www.googleapis.com and
storage.googleapis.com (TLS), and takes its token from the metadata server. TensorFlow's GCS filesystem has
those endpoints compiled in (tsl/platform/cloud/gcs_file_system.cc: kGcsUriBase, kGcsUploadUriBase,
kStorageHost) and reads its CA bundle from CURL_CA_BUNDLE and the metadata server's address from
GCE_METADATA_HOST (compute_engine_metadata_client.cc); google-auth reads GCE_METADATA_HOST and GCE_METADATA_IP,
google-cloud-storage and Beam's GCSIO STORAGE_EMULATOR_HOST. The test's network namespace sends Google's names
here (tests/buckets/server.py); this front forwards each request to fake-gcs-server, which keeps the objects.

Where the two servers differ, the front does what Cloud Storage does, and nothing else:
- TensorFlow's uploads say `Transfer-Encoding: identity` (curl_http_request.cc sets it for a PUT or POST with
  a body of known length). Google's front end takes it; Go's net/http, under fake-gcs-server, answers
  501 "Unsupported transfer encoding" (net/http/transfer.go, readTransfer). The front drops the header:
  identity means the body as it is.
- An upload session's Location names the address the client used, not the backend's.
- A batch request's parts need no Content-ID at Cloud Storage, and google-cloud-storage sends none (batch.py,
  _prepare_batch_request; Beam's GCSIO renames and deletes by batches); fake-gcs-server skips a part without
  one (fakestorage/server.go, handleBatchCall). The front numbers the parts that have none.
- A resumable upload's status query (`PUT`, no body, `Content-Range: bytes */TOTAL`, what a client sends
  after a connection dropped: TensorFlow's gcs_file_system.cc RequestUploadSessionStatus) is answered by Cloud
  Storage with 308 and the bytes it holds, and the upload goes on; fake-gcs-server commits what it holds
  (fakestorage/upload.go, uploadFileContent: no known range means the end), which published an empty
  schema here. The front answers such a query itself from the bytes it has passed on.
- A request without the metadata server's token is refused with 401, as Cloud Storage refuses an anonymous
  client on a private bucket.
Faults (503, 429, a connection cut in the middle of an upload) are armed by the test: ``Front.fail``.
"""

from __future__ import annotations

import http.client
import http.server
import json
import re
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

TOKEN = "tfxd-tests-token"  # noqa: S105 - a test token, the metadata stand-in's only one
PROJECT = "tfxd-tests"
_CONTENT_RANGE = re.compile(r"bytes (\*|(\d+)-(\d+))/(\d+|\*)")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "te", "trailer", "upgrade",
               "proxy-connection", "content-length"}


@dataclass
class Fault:
    """``count`` requests whose method, path and client (User-Agent) match get ``status`` (an HTTP error)
    or, for ``cut``, the connection closed half-way through their body."""

    method: str
    path_contains: str
    status: int | None = None
    cut: bool = False
    count: int = 1
    agent_contains: str = ""
    hits: list[str] = field(default_factory=list)  # the paths it hit

    def matches(self, method: str, path: str, agent: str) -> bool:
        return (len(self.hits) < self.count and method == self.method and self.path_contains in path
                and self.agent_contains in agent)


@dataclass
class Seen:
    """What the front saw, for the tests to judge: each request's method, path, client and verdict."""

    requests: list[tuple[str, str, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, method: str, path: str, agent: str, status: int) -> None:
        with self.lock:
            self.requests.append((method, path, agent, status))


class Front:
    """The front on ``address``: TLS on 443 for Google's host names, plain HTTP on ``http_port`` (the
    metadata server, and STORAGE_EMULATOR_HOST's clients), both forwarding to fake-gcs-server at
    ``backend`` (host, port)."""

    def __init__(self, address: str, http_port: int, backend: tuple[str, int], cert: str, key: str) -> None:
        self.address, self.http_port, self.backend = address, http_port, backend
        self.faults: list[Fault] = []
        self.seen = Seen()
        self.uploads: dict[str, int] = {}  # a resumable upload's bytes the backend holds, by upload_id
        self._lock = threading.Lock()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._servers = [_Server((address, 443), _handler(self, "https://www.googleapis.com"), context),
                         _Server((address, http_port), _handler(self, f"http://{address}:{http_port}"), None)]
        self._threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in self._servers]

    def start(self) -> Front:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def fail(self, method: str, path_contains: str, *, status: int | None = None, cut: bool = False,
             count: int = 1, agent_contains: str = "") -> Fault:
        fault = Fault(method, path_contains, status=status, cut=cut, count=count, agent_contains=agent_contains)
        with self._lock:
            self.faults.append(fault)
        return fault

    def fault_for(self, method: str, path: str, agent: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path, agent):
                    fault.hits.append(path)
                    return fault
        return None


class _Server(http.server.ThreadingHTTPServer):
    """A threading HTTP server whose connections are TLS when it has a context; the handshake runs in the
    connection's own thread, so that one slow client holds up no other."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type, context: ssl.SSLContext | None) -> None:
        self.context = context
        super().__init__(address, handler)

    def finish_request(self, request, client_address) -> None:  # noqa: ANN001 - socketserver's signature
        if self.context is not None:
            try:
                request = self.context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)


def _parts_numbered(body: bytes, content_type: str) -> bytes:
    """A multipart batch body whose parts each carry a Content-ID (the ones that had none get one)."""
    boundary = re.search(r'boundary="?([^";]+)"?', content_type)
    if boundary is None:
        return body
    parts = body.split(b"--" + boundary.group(1).encode())
    for index, part in enumerate(parts):
        head_end = part.find(b"\n\n") if b"\r\n\r\n" not in part else part.find(b"\r\n\r\n")
        if head_end < 0 or b"application/http" not in part[:head_end] or b"content-id:" in part[:head_end].lower():
            continue
        newline = b"\r\n" if b"\r\n" in part[:head_end + 2] else b"\n"
        parts[index] = part[:head_end] + newline + f"Content-ID: <tfxd-part-{index}>".encode() + part[head_end:]
    return (b"--" + boundary.group(1).encode()).join(parts)


def _handler(front: Front, base: str) -> type:
    class Handler(_FrontHandler):
        pass

    Handler.front, Handler.base = front, base
    return Handler


class _FrontHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # an answer's head and body go out at once, not 40 ms apart (delayed ACK)
    front: Front
    base: str

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's names
        self._serve()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def _serve(self) -> None:
        if self.path.startswith("/computeMetadata/") or self.path == "/":
            return self._metadata()
        fault = self.front.fault_for(self.command, self.path, self.headers.get("User-Agent", ""))
        if fault is not None and fault.cut:
            self._cut()
            return
        body = self._body()
        if self.path.startswith("/batch/"):
            body = _parts_numbered(body, self.headers.get("Content-Type", ""))
        if fault is not None and fault.status is not None:
            return self._reply(fault.status, {"error": {"code": fault.status, "message": "injected by the test"}})
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._reply(401, {"error": {"code": 401, "message": "Anonymous caller does not have "
                                               "storage.objects.get access (no token from the metadata server)"}})
        upload = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("upload_id", [""])[0]
        sent = _CONTENT_RANGE.fullmatch(self.headers.get("Content-Range", "").strip())
        if self.command == "PUT" and upload and sent and sent.group(1) == "*" and sent.group(4) != "*":
            held = self.front.uploads.get(upload, 0)
            if held < int(sent.group(4)):
                return self._resume_incomplete(held)
        status = self._forward(body)
        if upload and sent and sent.group(1) != "*" and status in (200, 201, 308):
            self.front.uploads[upload] = int(sent.group(3)) + 1

    def _resume_incomplete(self, held: int) -> None:
        """Cloud Storage's answer to a status query on an upload it does not hold whole: 308, and the bytes
        it holds (none: no Range)."""
        self.front.seen.add(self.command, self.path, self.headers.get("User-Agent", ""), 308)
        self.send_response(308, "Resume Incomplete")
        if held:
            self.send_header("Range", f"bytes=0-{held - 1}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size + 2)[:size]
                if not size:
                    break
                chunks.append(chunk)
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _cut(self) -> None:
        """Read part of the body, then close the connection without an answer: a link that dropped."""
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(min(length // 2, 1 << 16))
        self.front.seen.add(self.command, self.path, self.headers.get("User-Agent", ""), 0)
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _forward(self, body: bytes) -> int:
        connection = http.client.HTTPConnection(*self.front.backend, timeout=120)
        connection.connect()
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["Content-Length"] = str(len(body))
        try:
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            content = answer.read()
        finally:
            connection.close()
        self.front.seen.add(self.command, self.path, self.headers.get("User-Agent", ""), answer.status)
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() in _HOP_BY_HOP:
                continue
            self.send_header(key, self._here(value) if key.lower() == "location" else value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(content)
        return answer.status

    def _here(self, location: str) -> str:
        """An upload session's address as this front's (fake-gcs-server writes http:// and the Host asked
        for; Cloud Storage answers with the scheme and host the client used)."""
        parts = urllib.parse.urlsplit(location)
        return urllib.parse.urlunsplit((*urllib.parse.urlsplit(self.base)[:2], *parts[2:]))

    def _metadata(self) -> None:
        """GCE's metadata server: the token every client on the cluster authenticates with."""
        self._body()
        if self.headers.get("Metadata-Flavor") != "Google":
            return self._reply(403, {"error": "Missing Metadata-Flavor: Google header"})
        path = self.path.split("?", 1)[0]
        email = f"tests@{PROJECT}.iam.gserviceaccount.com"
        # The account answers by its alias and by its email: google-auth's Compute Engine credentials ask
        # for `default` first and for the email they learnt on every later refresh
        # (google/auth/compute_engine/credentials.py, _retrieve_info).
        answers: dict[str, Callable[[], object]] = {"/": lambda: "ok", "/computeMetadata/v1/": lambda: "ok",
                                                    "/computeMetadata/v1/project/project-id": lambda: PROJECT}
        for account in ("default", email):
            accounts = f"/computeMetadata/v1/instance/service-accounts/{account}/"
            answers[accounts + "token"] = lambda: {"access_token": TOKEN, "expires_in": 3599,
                                                   "token_type": "Bearer"}
            answers[accounts] = lambda: {"email": email, "aliases": ["default"],
                                         "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
            answers[accounts + "email"] = lambda: email
        answer = answers.get(path)
        self._reply(200 if answer else 404, answer() if answer else {"error": f"no {path} here"})

    def _reply(self, status: int, content: object) -> None:
        data = (content if isinstance(content, str) else json.dumps(content)).encode()
        self.front.seen.add(self.command, self.path, self.headers.get("User-Agent", ""), status)
        self.send_response(status)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", "text/plain" if isinstance(content, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
