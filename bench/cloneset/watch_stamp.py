#!/usr/bin/env python3
"""Streams `kubectl get pods -w --output-watch-events -o json` for a namespace and selector and
prints each event as one line, "<arrival epoch ms> <event JSON>", flushed at once (used by
update_bench.sh to time pod events against the moment it patched the CloneSet).

Usage: watch_stamp.py KUBECTL NAMESPACE SELECTOR [RESOURCE (pods)]
"""
import json
import signal
import subprocess
import sys
import time


def main() -> int:
    kubectl, ns, selector = sys.argv[1:4]
    resource = sys.argv[4] if len(sys.argv) > 4 else "pods"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so `finally` stops kubectl too
    proc = subprocess.Popen(
        [kubectl, "-n", ns, "get", resource, "-l", selector, "-w", "--output-watch-events", "-o", "json"],
        stdout=subprocess.PIPE, text=True)
    decoder = json.JSONDecoder()
    buf = ""
    try:
        for chunk in iter(lambda: proc.stdout.readline(), ""):
            buf += chunk
            while True:
                stripped = buf.lstrip()
                if not stripped:
                    buf = ""
                    break
                try:
                    event, end = decoder.raw_decode(stripped)
                except ValueError:
                    buf = stripped
                    break
                buf = stripped[end:]
                sys.stdout.write(f"{int(time.time() * 1000)} {json.dumps(event, separators=(',', ':'))}\n")
                sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    finally:
        proc.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
