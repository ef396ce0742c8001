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
With several nodes (--nodes) each job goes to all of them: the stages are given per node, the
last node's `written` to `done` is NI->job, and every NodeImage change seen on the watch while the
jobs ran is counted per node (status writes are the agents', spec writes the manager's).

Environment: KUBE_LOCAL_APISERVER, KUBE_LOCAL_TOKEN, KUBE_LOCAL_CA (kube-local's env file).
"""
import argparse
import datetime
import http.client
import json
import os
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
    ap.add_argument("--nodes", required=True,
                    help="node=daemon-pod,...: the job's nodes and their agents (logs read)")
    ap.add_argument("--parallelism", type=int, default=0, help="default: the number of nodes")
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--bare-pull", required=True, help="bare-cri-pull binary")
    ap.add_argument("--cri-socket", required=True)
    ap.add_argument("--run-id", default=str(int(time.time())))
    ap.add_argument("--target-ms", type=float, default=300)
    a = ap.parse_args()

    api = Api()
    agents = dict(x.split("=", 1) for x in a.nodes.split(","))
    nodes = list(agents)
    parallelism = a.parallelism or len(nodes)
    run = a.run_id
    job_tags = [f"j{run}-{i}" for i in range(a.jobs + 1)]  # index 0: warm-up
    bare_tags = [f"b{run}-{i}" for i in range(a.jobs + 1)]
    registry_tags(a.registry, a.repo, a.source.split(":")[0], a.source.split(":")[1],
                  job_tags + bare_tags)
    image = f"{a.registry}/{a.repo}"

    lock = threading.Condition()  # guards the maps below; notified on every watch event
    tag_seen, tag_done, job_done = {}, {}, {}  # (tag, node) / job name -> arrival
    last = {}  # node -> (spec, status) of its NodeImage's previous event
    writes = []  # (arrival, node, "spec" | "status") for every change the watch showed
    stop = threading.Event()

    def on_nodeimage(now, typ, obj):
        node = obj.get("metadata", {}).get("name")
        if node not in agents:
            return
        with lock:
            spec, status = obj.get("spec"), obj.get("status")
            before = last.get(node)
            if before is not None:
                if before[0] != spec:
                    writes.append((now, node, "spec"))
                if before[1] != status:
                    writes.append((now, node, "status"))
            last[node] = (spec, status)
            for t in ((spec or {}).get("images", {}).get(image, {}).get("tags") or []):
                tag_seen.setdefault((t.get("tag"), node), now)
            st = ((status or {}).get("imageStatuses") or {}).get(image, {})
            for t in st.get("tags") or []:
                if t.get("phase") == "Succeeded":
                    tag_done.setdefault((t.get("tag"), node), now)
            lock.notify_all()

    def on_job(now, typ, obj):
        if (obj.get("status") or {}).get("succeeded", 0) >= 1:
            with lock:
                job_done.setdefault(obj["metadata"]["name"], now)
                lock.notify_all()

    watchers = [
        threading.Thread(target=api.watch, daemon=True, args=(
            "/apis/apps.kruise.io/v1alpha1/nodeimages", on_nodeimage, stop)),
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
        with lock:
            return lock.wait_for(cond, timeout=seconds)

    created = {}

    def create_job(i):
        name = f"latency-{run}-{i}"
        created[name] = time.time()
        api.call("POST", f"/apis/apps.kruise.io/v1alpha1/namespaces/{a.namespace}/imagepulljobs", {
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImagePullJob",
            "metadata": {"name": name, "namespace": a.namespace},
            "spec": {"image": f"{image}:{job_tags[i]}", "selector": {"names": nodes},
                     "parallelism": parallelism, "pullPolicy": {"backoffLimit": 0, "timeoutSeconds": 60},
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

    window = (created[f"latency-{run}-1"], max(job_done.values()))
    pulls = {n: daemon_pulls(subprocess.run([a.kubectl, "-n", "kruise-system", "logs", pod],
                                            check=True, capture_output=True, text=True,
                                            timeout=60).stdout)
             for n, pod in agents.items()}
    stages = ("job->tag", "tag->pull", "pull", "write")
    per_node = {n: {k: [] for k in stages} for n in nodes}
    totals, ni_job, missing = [], [], []
    for i in range(1, a.jobs + 1):
        name, tag = f"latency-{run}-{i}", job_tags[i]
        ref = f"{image}:{tag}"
        gaps = [n for n in nodes if (tag, n) not in tag_seen or (tag, n) not in tag_done
                or ref not in pulls[n]]
        if name not in job_done or gaps:
            missing.append(f"job {i}: done {name in job_done}, incomplete on {gaps}")
            continue
        c = created[name]
        for n in nodes:
            end, dur = pulls[n][ref]
            r = per_node[n]
            r["job->tag"].append(tag_seen[(tag, n)] - c)
            r["tag->pull"].append(end - dur - tag_seen[(tag, n)])
            r["pull"].append(dur)
            r["write"].append(tag_done[(tag, n)] - end)
        last_done = max(tag_done[(tag, n)] for n in nodes)
        ni_job.append(job_done[name] - last_done)
        totals.append(job_done[name] - c)
    for m in missing:
        print(m)
    ms = lambda xs: "%6.0f %5.0f %5.0f" % tuple(x * 1000 for x in quantiles(xs))
    print(f"{len(totals)} jobs, one every {a.interval:g} s, over {len(nodes)} node(s), "
          f"parallelism {parallelism}; ms as median p10 p90")
    print(f"{'':12}" + "".join(f"{n:>20}" for n in nodes))
    for k in stages:
        print(f"{k:12}" + "".join(f"{ms(per_node[n][k]):>20}" for n in nodes))
    print(f"{'NI->job':12}{ms(ni_job):>20}   (the last node's Succeeded -> job succeeded)")
    print(f"{'total':12}{ms(totals):>20}   (job created -> succeeded={len(nodes)})")
    bare_q = quantiles(bare)
    print(f"{'bare pull':12}{ms(bare):>20}   (bare-cri-pull on the first node, {len(bare)} pulls "
          f"interleaved)")
    # NodeImage writes seen on the watch while the jobs ran, per node and job.
    for kind in ("status", "spec"):
        counts = {n: sum(1 for t, node, k in writes if k == kind and node == n
                         and window[0] <= t <= window[1] + 1) for n in nodes}
        print(f"NodeImage {kind} writes per job: " + ", ".join(
            f"{n} {counts[n] / a.jobs:.1f}" for n in nodes))
    total = quantiles(totals)[0]
    over = (total - bare_q[0]) * 1000
    if len(nodes) == 1:
        ok = len(totals) == a.jobs and over <= a.target_ms
        print(f"SUMMARY job created -> succeeded median {total * 1000:.0f} ms, bare PullImage "
              f"median {bare_q[0] * 1000:.0f} ms: +{over:.0f} ms (target <= +{a.target_ms:.0f} "
              f"ms) {'OK' if ok else 'MISSED'}; {len(totals)}/{a.jobs} jobs measured")
    else:
        ok = len(totals) == a.jobs
        print(f"SUMMARY fan-out to {len(nodes)} nodes (parallelism {parallelism}): job created -> "
              f"succeeded={len(nodes)} median {total * 1000:.0f} ms, bare PullImage median "
              f"{bare_q[0] * 1000:.0f} ms (+{over:.0f} ms); {len(totals)}/{a.jobs} jobs measured")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
