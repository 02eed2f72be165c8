"""A slow, lossy link where the kernel has no netem (CONFIG_NET_SCH_NETEM off, as on this machine): the
packets of a network namespace's interface go through netfilter's NFQUEUE to this process, which lets each
pass a fixed delay after it arrived, or drops it with a given probability, as `tc qdisc add ... netem delay
50ms loss 1%` would on that interface.

    ip netns exec NS python bench/link_delay.py --device eth0 --delay 0.05 --loss 0.01 --queue 7

adds the iptables rules in the namespace (`-o DEVICE` and `-i DEVICE` to queue NUM, with --queue-bypass so
that packets flow undelayed once this process is gone), reads the queue through the kernel's nfnetlink
protocol (linux/netfilter/nfnetlink_queue.h: bind, copy metadata only, then a verdict per packet id) and
removes its rules when stopped (SIGTERM). It writes one JSON line of counts to --stats on its way out:
packets accepted and dropped, and the least time it held an accepted packet. Both directions are delayed:
50 ms each way is 100 ms more round trip, as netem on both ends of a veth.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND, NFQNL_COPY_META = 1, 1
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NF_DROP, NF_ACCEPT = 0, 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
QUEUE_LENGTH = 8192  # packets the kernel holds for us before it lets them through (bypass)


def _attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(kind: int, queue: int, attributes: bytes, flags: int = NLM_F_REQUEST) -> bytes:
    """A netlink message to nfnetlink_queue: nlmsghdr, nfgenmsg (AF_UNSPEC, version 0, the queue
    number big-endian), then the attributes."""
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue) + attributes
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, 0, 0) + body


def _packet_ids(data: bytes) -> list[int]:
    """The packet ids of the NFQNL_MSG_PACKET messages in one read; an error message raises."""
    ids, at = [], 0
    while at + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, at)
        if kind == NLMSG_ERROR:
            [code] = struct.unpack_from("=i", data, at + 16)
            if code:
                raise OSError(-code, f"nfnetlink_queue refused a request: {os.strerror(-code)}")
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            offset = at + 20  # past nlmsghdr and nfgenmsg
            while offset + 4 <= at + length:
                size, attribute = struct.unpack_from("=HH", data, offset)
                if attribute & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from("!I", data, offset + 4)[0])
                offset += size + (-size % 4)
        at += length + (-length % 4)
    return ids


class LinkDelay:
    """Holds every packet of queue ``queue`` for ``delay`` seconds, then accepts it, or drops it with
    probability ``loss``."""

    def __init__(self, queue: int, delay: float, loss: float, seed: int = 0) -> None:
        self.queue, self.delay, self.loss, self.random = queue, delay, loss, random.Random(seed)
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((0, 0))
        self.held: collections.deque[tuple[float, int]] = collections.deque()
        self.ready = threading.Condition()
        self.stopping = False
        self.counts = {"accepted": 0, "dropped": 0, "least_hold_s": None}

    def bind(self) -> None:
        for attributes in (_attribute(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, 0)),
                           _attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
                           + _attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_LENGTH))):
            self.sock.send(_message(NFQNL_MSG_CONFIG, self.queue, attributes, NLM_F_REQUEST | NLM_F_ACK))
            _packet_ids(self.sock.recv(65536))  # the ack: raises when refused

    def receive(self) -> None:
        """Reads packets as they come; each is due ``delay`` after now."""
        while not self.stopping:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                return
            now = time.monotonic()
            with self.ready:
                self.held.extend((now, packet) for packet in _packet_ids(data))
                self.ready.notify()

    def release(self) -> None:
        """Gives each held packet its verdict when due, in arrival order (the delay is the same for all)."""
        while True:
            with self.ready:
                while not self.held and not self.stopping:
                    self.ready.wait()
                if self.stopping:  # what is held goes on, undelayed
                    for _, packet in self.held:
                        self._verdict(packet, NF_ACCEPT)
                    return
                arrived, packet = self.held[0]
                wait = arrived + self.delay - time.monotonic()
                if wait > 0:
                    self.ready.wait(wait)
                    continue
                self.held.popleft()
            verdict = NF_DROP if self.random.random() < self.loss else NF_ACCEPT
            self._verdict(packet, verdict)
            if verdict == NF_ACCEPT:
                held = time.monotonic() - arrived
                least = self.counts["least_hold_s"]
                self.counts["least_hold_s"] = held if least is None else min(least, held)
            self.counts["accepted" if verdict == NF_ACCEPT else "dropped"] += 1

    def _verdict(self, packet: int, verdict: int) -> None:
        self.sock.send(_message(NFQNL_MSG_VERDICT, self.queue,
                                _attribute(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet))))

    def stop(self) -> None:
        with self.ready:
            self.stopping = True
            self.ready.notify_all()


def rules(device: str, queue: int) -> list[list[str]]:
    """The iptables rules (without -A/-D) that send the device's packets, both ways, to ``queue``."""
    target = ["-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]
    return [["OUTPUT", "-o", device, *target], ["INPUT", "-i", device, *target]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="eth0")
    parser.add_argument("--delay", type=float, required=True, help="seconds each packet is held, each way")
    parser.add_argument("--loss", type=float, default=0.0, help="the probability a packet is dropped")
    parser.add_argument("--queue", type=int, default=0)
    parser.add_argument("--stats", help="a file for the counts, written on the way out")
    args = parser.parse_args()
    link = LinkDelay(args.queue, args.delay, args.loss)
    link.bind()
    signal.signal(signal.SIGTERM, lambda *_: link.stop())
    signal.signal(signal.SIGINT, lambda *_: link.stop())
    added = []
    try:
        for rule in rules(args.device, args.queue):
            subprocess.run(["iptables", "-A", *rule], check=True)
            added.append(rule)
        threading.Thread(target=link.receive, daemon=True).start()
        print("link delay ready", flush=True)
        link.release()
    finally:
        for rule in added:
            subprocess.run(["iptables", "-D", *rule], check=False)
        if args.stats:
            with open(args.stats, "w", encoding="utf-8") as out:
                out.write(json.dumps(link.counts) + "\n")


if __name__ == "__main__":
    main()
