#!/usr/bin/python3
"""ImagePullJob latency on kube-local, with its breakdown (GitHub issue 13, part 3).

Run by bench/manager/job_latency.sh, which deploys kruise-daemon (DaemonSet) and kruise-manager
(host process) first. Every INTERVAL seconds it creates an ImagePullJob for a new tag of an image
whose layers containerd already holds, and between two jobs it times a bare CRI PullImage of
another new tag of the same image (bare-cri-pull), so both see the same machine state.

Times are taken where they happen, on the one clock of this machine:
  created   the benchmark sends the job's POST
  tag       the NodeImage with the job's tag in spec reaches the benchmark's watch
  pull      the daemon's log line "pulled REF in D" (its timestamp minus D is the PullImage start)
  written   the NodeImage with the tag Succeeded reaches the watch
  done      the job with status.succeeded=1 reaches the watch
so total = (tag - created) + (pull start - tag) + D + (written - pull end) + (done - written).

Environment: KUBE_LOCAL_APISERVER, KUBE_LOCAL_TOKEN, KUBE_LOCAL_CA (kube-local's env file).
"""
import argparse
import datetime
import http.client
import json
import re
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

ACCEPT = ("application/vnd.oci.image.manifest.v1+json, "
          "application/vnd.docker.distribution.manifest.v2+json")


class Api:
    def __init__(self):
        import os
        u = urllib.parse.urlsplit(os.environ["KUBE_LOCAL_APISERVER"])
        self.host, self.port = u.hostname, u.port
        self.token = os.environ["KUBE_LOCAL_TOKEN"]
        self.ctx = ssl.create_default_context(cafile=os.environ["KUBE_LOCAL_CA"])

    def conn(self, timeout=30):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def call(self, method, path, body=None):
        c = self.conn()
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data) if data else None

    def watch(self, path, on_event, stop):
        """Lists `path`, then streams its watch to on_event(received, type, object) until stop."""
        rv = self.call("GET", path)["metadata"]["resourceVersion"]
        sep = "&" if "?" in path else "?"
        c = self.conn(timeout=None)
        c.request("GET", f"{path}{sep}watch=1&resourceVersion={rv}&allowWatchBookmarks=false",
                  headers={"Authorization": "Bearer " + self.token})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"watch {path}: {r.status}")
        while not stop.is_set():
            line = r.readline()
            if not line:
                break
            now = time.time()
            ev = json.loads(line)
            on_event(now, ev["type"], ev["object"])


def registry_tags(registry, repo, source_repo, source_tag, tags):
    """Makes repo:tag for every tag the same manifest as source_repo:source_tag (blobs mounted)."""
    req = urllib.request.Request(f"http://{registry}/v2/{source_repo}/manifests/{source_tag}",
                                 headers={"Accept": ACCEPT})
    with urllib.request.urlopen(req) as r:
        manifest, media_type = r.read(), r.headers["Content-Type"]
    m = json.loads(manifest)
    for d in [m["config"]["digest"]] + [layer["digest"] for layer in m["layers"]]:
        req = urllib.request.Request(
            f"http://{registry}/v2/{repo}/blobs/uploads/?mount={d}&from={source_repo}",
            method="POST", data=b"")
        with urllib.request.urlopen(req) as r:
            if r.status != 201:
                raise RuntimeError(f"mounting {d} into {repo}: {r.status}")
    for t in tags:
        req = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{t}", method="PUT",
                                     data=manifest, headers={"Content-Type": media_type})
        with urllib.request.urlopen(req) as r:
            if r.status != 201:
                raise RuntimeError(f"tagging {repo}:{t}: {r.status}")


def parse_duration(s):
    """absl::FormatDuration output ("263.5ms", "1.25s", "1m2.5s", "850us") -> seconds."""
    total = 0.0
    for num, unit in re.findall(r"([0-9.]+)(h|ms|us|ns|m|s)", s):
        total += float(num) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]
    return total


def daemon_pulls(log_text):
    """"pulled REF in D" lines -> {ref: (end epoch seconds, duration seconds)} (last one wins)."""
    out = {}
    for line in log_text.splitlines():
        m = re.match(r"(\S+Z) \S+ \S+\] pulled (\S+) in (\S+)", line)
        if not m:
            continue
        ts = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ")
        end = ts.replace(tzinfo=datetime.timezone.utc).timestamp()
        out[m.group(2)] = (end, parse_duration(m.group(3)))
    return out


def quantiles(xs):
    xs = sorted(xs)
    if not xs:
        return float("nan"), float("nan"), float("nan")
    q = lambda p: xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]
    return statistics.median(xs), q(0.1), q(0.9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--registry", required=True)
    ap.add_argument("--repo", default="kruise-bench/jobs")
    ap.add_argument("--source", default="busybox:1.35", help="image whose manifest is tagged")
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--bare-pull", required=True, help="bare-cri-pull binary")
    ap.add_argument("--cri-socket", required=True)
    ap.add_argument("--daemon-log-cmd", required=True,
                    help="shell command printing the daemon pod's log")
    ap.add_argument("--run-id", default=str(int(time.time())))
    ap.add_argument("--target-ms", type=float, default=300)
    a = ap.parse_args()

    api = Api()
    run = a.run_id
    job_tags = [f"j{run}-{i}" for i in range(a.jobs + 1)]  # index 0: warm-up
    bare_tags = [f"b{run}-{i}" for i in range(a.jobs + 1)]
    registry_tags(a.registry, a.repo, a.source.split(":")[0], a.source.split(":")[1],
                  job_tags + bare_tags)
    image = f"{a.registry}/{a.repo}"

    lock = threading.Lock()
    tag_seen, tag_done, job_done = {}, {}, {}
    stop = threading.Event()

    def on_nodeimage(now, typ, obj):
        if obj.get("metadata", {}).get("name") != a.node:
            return
        with lock:
            for t in (obj.get("spec", {}).get("images", {}).get(image, {}).get("tags") or []):
                tag_seen.setdefault(t.get("tag"), now)
            st = (obj.get("status", {}).get("imageStatuses") or {}).get(image, {})
            for t in st.get("tags") or []:
                if t.get("phase") == "Succeeded":
                    tag_done.setdefault(t.get("tag"), now)

    def on_job(now, typ, obj):
        if (obj.get("status") or {}).get("succeeded", 0) >= 1:
            with lock:
                job_done.setdefault(obj["metadata"]["name"], now)

    watchers = [
        threading.Thread(target=api.watch, daemon=True, args=(
            f"/apis/apps.kruise.io/v1alpha1/nodeimages?fieldSelector=metadata.name%3D{a.node}",
            on_nodeimage, stop)),
        threading.Thread(target=api.watch, daemon=True, args=(
            f"/apis/apps.kruise.io/v1alpha1/namespaces/{a.namespace}/imagepulljobs", on_job,
            stop)),
    ]
    for w in watchers:
        w.start()
    time.sleep(1.0)  # both watches established (a job before that would only lose its sample)

    def bare_pull(tag):
        out = subprocess.run([a.bare_pull, "--socket", a.cri_socket, f"{image}:{tag}"],
                             check=True, capture_output=True, text=True).stdout
        return float(out.split()[-1]) / 1000

    def wait(cond, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            with lock:
                if cond():
                    return True
            time.sleep(0.005)
        return False

    created = {}

    def create_job(i):
        name = f"latency-{run}-{i}"
        created[name] = time.time()
        api.call("POST", f"/apis/apps.kruise.io/v1alpha1/namespaces/{a.namespace}/imagepulljobs", {
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImagePullJob",
            "metadata": {"name": name, "namespace": a.namespace},
            "spec": {"image": f"{image}:{job_tags[i]}", "selector": {"names": [a.node]},
                     "parallelism": 1, "pullPolicy": {"backoffLimit": 0, "timeoutSeconds": 60},
                     "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 120}}})
        return name

    # Warm-up: layers and snapshot cached for both paths, connections open.
    bare_pull(bare_tags[0])
    name0 = create_job(0)
    if not wait(lambda: name0 in job_done, 60):
        sys.exit("warm-up job did not succeed within 60 s")

    bare = []
    start = time.time() + 0.5
    for i in range(1, a.jobs + 1):
        t_i = start + (i - 1) * a.interval
        time.sleep(max(0.0, t_i - time.time()))
        name = create_job(i)
        if not wait(lambda: name in job_done, 30):
            print(f"job {name}: not succeeded after 30 s", file=sys.stderr)
        # The bare pull in the gap before the next job.
        time.sleep(max(0.0, t_i + a.interval * 0.5 - time.time()))
        bare.append(bare_pull(bare_tags[i]))
    wait(lambda: len(job_done) >= a.jobs + 1, 30)
    stop.set()

    pulls = daemon_pulls(subprocess.run(a.daemon_log_cmd, shell=True, check=True,
                                        capture_output=True, text=True).stdout)
    rows = []
    print(f"{'job':>4} {'total':>7} {'job->tag':>9} {'tag->pull':>10} {'pull':>7} "
          f"{'write':>7} {'NI->job':>8}   (ms)")
    for i in range(1, a.jobs + 1):
        name, tag = f"latency-{run}-{i}", job_tags[i]
        ref = f"{image}:{tag}"
        if name not in job_done or tag not in tag_seen or tag not in tag_done or ref not in pulls:
            print(f"{i:>4} incomplete (job done {name in job_done}, tag seen {tag in tag_seen}, "
                  f"tag Succeeded {tag in tag_done}, daemon pull {ref in pulls})")
            continue
        end, dur = pulls[ref]
        c = created[name]
        r = {"total": job_done[name] - c, "job->tag": tag_seen[tag] - c,
             "tag->pull": end - dur - tag_seen[tag], "pull": dur, "write": tag_done[tag] - end,
             "NI->job": job_done[name] - tag_done[tag]}
        rows.append(r)
        print(f"{i:>4} " + " ".join(f"{r[k] * 1000:>{w}.0f}" for k, w in (
            ("total", 7), ("job->tag", 9), ("tag->pull", 10), ("pull", 7), ("write", 7),
            ("NI->job", 8))))
    print()
    print(f"{'':12} {'median':>8} {'p10':>8} {'p90':>8}   (ms, {len(rows)} jobs, "
          f"one every {a.interval:g} s)")
    for k in ("total", "job->tag", "tag->pull", "pull", "write", "NI->job"):
        m, lo, hi = quantiles([r[k] for r in rows])
        print(f"{k:12} {m * 1000:>8.0f} {lo * 1000:>8.0f} {hi * 1000:>8.0f}")
    m, lo, hi = quantiles(bare)
    print(f"{'bare pull':12} {m * 1000:>8.0f} {lo * 1000:>8.0f} {hi * 1000:>8.0f}   "
          f"(bare-cri-pull, {len(bare)} pulls interleaved)")
    total = quantiles([r["total"] for r in rows])[0]
    over = (total - m) * 1000
    ok = len(rows) == a.jobs and over <= a.target_ms
    print(f"SUMMARY job created -> succeeded median {total * 1000:.0f} ms, bare PullImage median "
          f"{m * 1000:.0f} ms: +{over:.0f} ms (target <= +{a.target_ms:.0f} ms) "
          f"{'OK' if ok else 'MISSED'}; {len(rows)}/{a.jobs} jobs measured")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
