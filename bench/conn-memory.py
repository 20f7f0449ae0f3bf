#!/usr/bin/env python3
"""What one connection to a listener holds in the listening process's RSS:
opens N connections to host:port, optionally carries one REST exchange on
each (POST /v1/fetch, the downstream's REST route), holds them all open and
prints the process's RSS before and after (bench/README.md, "Memory per
request in flight"). Not CI; loopback only.

    python3 bench/conn-memory.py HOST:PORT N PID idle|send
"""
import socket
import sys
import time


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for pid {pid}")


def main():
    if len(sys.argv) != 5 or sys.argv[4] not in ("idle", "send"):
        raise SystemExit(__doc__)
    host, port = sys.argv[1].rsplit(":", 1)
    n, pid, send = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "send"
    if not host.startswith("127.") and host not in ("::1", "localhost"):
        raise SystemExit("loopback only")
    body = b'{"requestId":"c","items":10}'
    req = b"POST /v1/fetch HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    time.sleep(0.5)
    before = rss_mib(pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)))
        socks.append(s)
        if send:
            s.sendall(req)
    time.sleep(1)
    if send:
        for s in socks:
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = s.recv(65536)
                if not chunk:
                    raise SystemExit("a connection closed before its answer")
                got += chunk
    time.sleep(1.5)
    after = rss_mib(pid)
    what = "one exchange each" if send else "idle, never used"
    print(f"{n} connections ({what}): RSS {before:.1f} -> {after:.1f} MiB, {(after - before) / n * 1024:.1f} KiB each")


if __name__ == "__main__":
    main()
