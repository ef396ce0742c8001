#!/usr/bin/env python3
"""Clients for bench/webhook/limits.sh (issue 33).

  limits.py post URL BODY_FILE N          N concurrent POSTs of BODY_FILE (one connection each);
                                          prints each status and latency, then a summary line
  limits.py idle HOST PORT N SECONDS      opens N TLS connections (handshake done, no request),
                                          holds them SECONDS, prints how many stayed open
"""
import http.client
import socket
import ssl
import sys
import threading
import time


def ctx():
    c = ssl.create_default_context()
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    return c


def post(url, body_file, n):
    host, port = url.split("//")[1].split("/")[0].split(":")
    path = "/" + url.split("//")[1].split("/", 1)[1]
    body = open(body_file, "rb").read()
    results = [None] * n
    barrier = threading.Barrier(n)

    def one(i):
        conn = http.client.HTTPSConnection(host, int(port), context=ctx(), timeout=60)
        try:
            conn.connect()
            barrier.wait()
            start = time.monotonic()
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            results[i] = (resp.status, time.monotonic() - start)
        except Exception as e:  # noqa: BLE001 - report whatever happened
            results[i] = (type(e).__name__, 0.0)
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = {}
    for status, took in results:
        codes[status] = codes.get(status, 0) + 1
        print(f"  {status} in {took * 1000:.0f} ms")
    print("summary: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items(), key=str)))


def idle(host, port, n, seconds):
    socks = []
    failed = 0
    c = ctx()
    for _ in range(n):
        try:
            s = socket.create_connection((host, int(port)), timeout=10)
            socks.append(c.wrap_socket(s, server_hostname=host))
        except Exception:  # noqa: BLE001 - refused or reset: counted
            failed += 1
    print(f"opened {len(socks)} TLS connections ({failed} refused)", flush=True)
    time.sleep(seconds)
    alive = 0
    for s in socks:
        try:
            s.setblocking(False)
            try:
                data = s.recv(1)
                alive += 0 if data == b"" else 1
            except (ssl.SSLWantReadError, BlockingIOError):
                alive += 1
        except Exception:  # noqa: BLE001 - closed by the server
            pass
        s.close()
    print(f"still open after {seconds} s: {alive}")


if __name__ == "__main__":
    if sys.argv[1] == "post":
        post(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "idle":
        idle(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
