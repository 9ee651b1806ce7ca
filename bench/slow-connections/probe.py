#!/usr/bin/env python3
"""Slow clients against `assay serve`: N connections that stall (half inside their request
headers, half after a head that promises a body), while /health is asked every 100 ms.

Reports /health's latency (median and worst), how many of its requests failed, and how long
the server took to close the stalled connections. The server runs with the open-file limit
given (default 1,024, the common default) so that a server which holds slow connections
until it runs out of descriptors shows it. Standard library only.

    python3 bench/slow-connections/probe.py --assay target/release/assay --project examples/coparent \
        --connections 200 --seconds 20 [--header-timeout 10 --body-timeout 30 --nofile 1024]
"""

import argparse
import resource
import socket
import statistics
import subprocess
import sys
import time


def health(addr, timeout=5.0):
    start = time.monotonic()
    try:
        with socket.create_connection(addr, timeout=timeout) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        ok = data.startswith(b"HTTP/1.1 200")
    except OSError:
        ok = False
    return ok, time.monotonic() - start


def closed(sock):
    """Whether the server has finished with `sock` (answered and closed, or reset it)."""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assay", required=True)
    ap.add_argument("--project", required=True)
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--header-timeout", type=float, default=10.0)
    ap.add_argument("--body-timeout", type=float, default=30.0)
    ap.add_argument("--nofile", type=int, default=1024)
    a = ap.parse_args()

    # The probe itself needs a descriptor per connection; the server gets --nofile.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, a.connections + 256)), hard))

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (a.nofile, a.nofile))

    server = subprocess.Popen(
        [a.assay, "serve", "--port", "0", "--project", a.project,
         "--header-timeout", str(a.header_timeout), "--body-timeout", str(a.body_timeout)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=limit, text=True)
    try:
        url = server.stdout.readline().strip()
        host, port = url.removeprefix("http://").rsplit(":", 1)
        addr = (host, int(port))
        socks = []
        for i in range(a.connections):
            s = socket.create_connection(addr)
            if i % 2 == 0:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            else:
                s.sendall(b"POST /cli/calibrate?dry_run=true HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
            socks.append((time.monotonic(), s))
        latencies, failures = [], 0
        open_socks = list(socks)
        closed_after = []
        start = time.monotonic()
        while time.monotonic() - start < a.seconds:
            ok, took = health(addr)
            latencies.append(took)
            failures += 0 if ok else 1
            still = []
            for opened, s in open_socks:
                if closed(s):
                    closed_after.append(time.monotonic() - opened)
                    s.close()
                else:
                    still.append((opened, s))
            open_socks = still
            time.sleep(0.1)
        print(f"connections {a.connections}, nofile {a.nofile}, header timeout {a.header_timeout} s, "
              f"body timeout {a.body_timeout} s, {a.seconds:.0f} s")
        print(f"/health: {len(latencies)} requests, {failures} failed, "
              f"median {statistics.median(latencies) * 1000:.1f} ms, worst {max(latencies) * 1000:.1f} ms")
        if closed_after:
            print(f"stalled connections closed: {len(closed_after)} of {a.connections}, "
                  f"the last after {max(closed_after):.1f} s")
        print(f"still open at the end: {len(open_socks)}")
        for _, s in open_socks:
            s.close()
        return 0 if failures == 0 and not open_socks else 1
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
