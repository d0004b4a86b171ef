#!/usr/bin/env python3
"""A point-to-point link with a fixed one-way delay, between two network namespaces.

Stands in for `veth + tc qdisc add ... netem delay D` on a kernel without sch_netem (this
project's machines). It makes a TUN device in each namespace (IFF_TUN |
IFF_NO_PI, so each read is one IP packet) and carries every packet read from one device to
the other, DELAY_MS after it was read, in order. That is netem's `delay D` on each side of
a wire: a round trip costs 2 * D plus the relay's own time (tens of microseconds; rtt/run
measures the link with ping, and reports that figure, not 2 * D).

    delay-link.py NS_A DEV_A NS_B DEV_B DELAY_MS MAX_SECONDS

Prints `ready` once both devices exist (the caller then gives them addresses and brings
them up) and relays until SIGTERM, SIGINT or MAX_SECONDS. The devices go away with the
process (they are not persistent).
"""
import ctypes
import fcntl
import os
import select
import signal
import struct
import sys
import time
from collections import deque

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000

libc = ctypes.CDLL(None, use_errno=True)


def tun_in(namespace, name):
    """A TUN device called `name` made in namespace `namespace`; returns its descriptor."""
    ns = os.open(f"/var/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(ns, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {namespace}: {os.strerror(err)}")
    finally:
        os.close(ns)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def main():
    ns_a, dev_a, ns_b, dev_b, delay_ms, max_seconds = sys.argv[1:7]
    delay = float(delay_ms) / 1000
    end = time.monotonic() + float(max_seconds)
    a = tun_in(ns_a, dev_a)
    b = tun_in(ns_b, dev_b)
    print("ready", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    # Per direction, packets in the order read, each with the time it may leave.
    queues = {a: deque(), b: deque()}
    other = {a: b, b: a}
    while not stop and time.monotonic() < end:
        now = time.monotonic()
        for destination, queue in ((b, queues[a]), (a, queues[b])):
            while queue and queue[0][0] <= now:
                _, packet = queue.popleft()
                try:
                    os.write(destination, packet)
                except OSError:
                    pass  # a device that is down drops it, as a link would
        due = [q[0][0] for q in queues.values() if q]
        timeout = max(0.0, min(due) - time.monotonic()) if due else 0.5
        try:
            readable, _, _ = select.select([a, b], [], [], timeout)
        except InterruptedError:
            continue
        now = time.monotonic()
        for fd in readable:
            for _ in range(64):
                try:
                    packet = os.read(fd, 65536)
                except BlockingIOError:
                    break
                queues[fd].append((now + delay, packet))
    os.close(a)
    os.close(b)


if __name__ == "__main__":
    main()
