#!/usr/bin/python3
"""A read-only, rate-limited HTTP proxy in front of a plain-HTTP image registry, for e2e tests.

Pulls through it take long enough that a test can watch progress rise and can restart the puller
while a layer is still downloading. Only GET and HEAD are forwarded; blob bodies are sent at
--rate bytes per second (manifests and other small bodies at full speed). Each request is appended
to --log as "METHOD PATH STATUS".

Usage: throttle_proxy.py --listen 127.0.0.1:PORT --upstream http://127.0.0.1:16408 --rate 8388608
The proxy prints "ready" on stdout once it listens.
"""
import argparse
import http.client
import http.server
import sys
import threading
import time
import urllib.parse

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--rate", type=int, default=8 << 20)
    ap.add_argument("--log", default="")
    args = ap.parse_args()
    up = urllib.parse.urlsplit(args.upstream)
    log_lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def record(self, status):
            if not args.log:
                return
            with log_lock, open(args.log, "a") as f:
                f.write(f"{self.command} {self.path} {status}\n")

        def forward(self):
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            headers["Host"] = up.netloc
            try:
                conn.request(self.command, self.path, headers=headers)
                resp = conn.getresponse()
            except OSError as e:
                self.send_error(502, str(e))
                self.record(502)
                return
            self.record(resp.status)
            self.send_response(resp.status)
            length = None
            for k, v in resp.getheaders():
                if k.lower() in HOP_HEADERS:
                    continue
                if k.lower() == "content-length":
                    length = int(v)
                self.send_header(k, v)
            if length is None and self.command != "HEAD":
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command == "HEAD":
                resp.close()
                conn.close()
                return
            throttle = "/blobs/" in self.path
            chunk = 64 << 10
            start = time.monotonic()
            sent = 0
            try:
                while True:
                    data = resp.read(chunk)
                    if not data:
                        break
                    self.wfile.write(data)
                    sent += len(data)
                    if throttle:
                        ahead = sent / args.rate - (time.monotonic() - start)
                        if ahead > 0:
                            time.sleep(ahead)  # rate limiting, not synchronisation
            except OSError:
                self.close_connection = True
            finally:
                resp.close()
                conn.close()

        do_GET = forward
        do_HEAD = forward

    host, port = args.listen.rsplit(":", 1)
    server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
