#!/usr/bin/env python3
"""kube2sky under faults: every case on a real etcd (v3 API) and the API test
server, seeded with SERVICES services (one named port each, --pods=false).

For each case the expected keys of etcd are computed here from the services
the API server holds (the A record, the SRV record and the PTR of each
service; the key labels by an FNV-1a written here, not by kube2sky), and
after the fault ends etcd is read every 100 ms until it holds exactly those
keys. Each case reports keys missing and keys stale when it converged (or at
the 60 s limit) and the seconds from the end of the fault to convergence.
kube2sky is restarted when it exits, as the kubelet would.

Usage: reliability.py BIN_DIR [SERVICES]   (run by reliability.sh;
ONLY=<text> runs the cases whose title contains it; KEEP=1 keeps the logs)
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from benchlib import free_port

BIN = sys.argv[1]
SERVICES = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
LIMIT = 60.0
WORK = tempfile.mkdtemp(prefix="reliability-")
ROOT = "/skydns/local/cluster/svc/"


def fnv(data):
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "%x" % h


REST = ',"priority":10,"weight":10,"ttl":30,"targetstrip":0}'


def expected_keys(services):
    """Every key kube2sky must write for `services` (name -> cluster IP)."""
    keys = set()
    for name, ip in services.items():
        label = fnv(('{"host":"%s"%s' % (ip, REST)).encode())
        d = ROOT + "default/" + name + "/"
        keys.add(d + label)
        port = "_https" if name == "kubernetes" else "_http"
        keys.add(d + "_tcp/" + port + "/" + label)
        a, b, c, e = ip.split(".")
        keys.add("/skydns/arpa/in-addr/%s/%s/%s/%s" % (a, b, c, e))
    return keys


def service_doc(name, ip, port="http"):
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": ip, "ports": [{"name": port, "protocol": "TCP",
                                             "port": 443 if port == "https" else 80}]},
    }


def ip_of(i):
    return "10.1.%d.%d" % (i // 250, i % 250 + 1)


class Etcd:
    def __init__(self):
        self.client, self.peer = free_port(), free_port()
        self.url = "http://127.0.0.1:%d" % self.client
        self.data = os.path.join(WORK, "etcd")
        self.proc = None

    def start(self):
        peer = "http://127.0.0.1:%d" % self.peer
        log = open(os.path.join(WORK, "etcd.log"), "a")
        env = dict(os.environ, ETCD_UNSUPPORTED_ARCH=os.uname().machine)
        self.proc = subprocess.Popen(
            ["etcd", "--name", "b", "--data-dir", self.data,
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "b=" + peer], stdout=log, stderr=log, env=env)
        until(lambda: http_ok(self.url + "/version"), "etcd")

    def count(self):
        """How many keys are under /skydns/ (cheap: one key read, etcd counts the rest)."""
        out = subprocess.run(
            ["etcdctl", "--endpoints", self.url, "get", "/skydns/", "--prefix", "--keys-only", "--limit=1",
             "-w", "json"], capture_output=True, text=True, env=dict(os.environ, ETCDCTL_API="3"))
        if out.returncode != 0:
            return None
        return json.loads(out.stdout).get("count", 0)

    def keys(self):
        out = subprocess.run(
            ["etcdctl", "--endpoints", self.url, "get", "/skydns/", "--prefix", "--keys-only"],
            capture_output=True, text=True, env=dict(os.environ, ETCDCTL_API="3"))
        if out.returncode != 0:
            return None
        return {k for k in out.stdout.split("\n") if k}


class Api:
    def __init__(self):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None

    def start(self, services, bookmark_interval=1):
        seed = os.path.join(WORK, "seed.json")
        with open(seed, "w") as f:
            docs = [service_doc(n, ip, "https" if n == "kubernetes" else "http")
                    for n, ip in services.items()]
            f.write("\n---\n".join(json.dumps(d) for d in docs))
        log = open(os.path.join(WORK, "api.log"), "a")
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "kube-api-test-server"), "--listen", "127.0.0.1:%d" % self.port,
             "--seed", seed, "--service-cidr", "10.0.0.0/8",
             "--bookmark-interval", str(bookmark_interval)],
            stdout=log, stderr=log)
        until(lambda: http_ok(self.url + "/version"), "API server")

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read()

    def admin(self, what):
        self.request("POST", "/admin/" + what)


class Kube2sky:
    def __init__(self, etcd, api):
        self.etcd, self.api, self.proc, self.restarts = etcd, api, None, 0
        self.port = free_port()

    def start(self):
        log = open(os.path.join(WORK, "kube2sky.log"), "a")
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "kube2sky"), "--etcd-api=v3", "--etcd-server=" + self.etcd.url,
             "--kube-master-url=" + self.api.url, "--healthz-port=%d" % self.port,
             "--pods=false", "--etcd-loss-check-interval=1s", "--etcd-max-txn-ops=1024"],
            stdout=log, stderr=log)

    def supervise(self):
        """Restarts kube2sky if it exited (restartPolicy: Always)."""
        if self.proc.poll() is not None:
            self.restarts += 1
            self.start()


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except Exception:
        return False


def until(cond, what, limit=120):
    deadline = time.time() + limit
    while not cond():
        if time.time() > deadline:
            raise SystemExit("timed out waiting for " + what)
        time.sleep(0.05)


def converge(etcd, k2s, services, since):
    """Reads etcd until it holds exactly the expected keys: (missing, stale, seconds)."""
    want = expected_keys(services)
    while time.time() - since < LIMIT:
        k2s.supervise()
        # Counting is cheap; the keys are read only when the count is right,
        # so the poller does not slow down what it measures.
        if etcd.count() == len(want):
            at = time.time()
            have = etcd.keys()
            if have == want:
                return 0, 0, at - since
        time.sleep(0.1)
    have = etcd.keys() or set()
    return len(want - have), len(have - want), None


def churn(api, services, n=30):
    """Deletes n services and creates n new ones through the API."""
    victims = random.sample(sorted(k for k in services if k != "kubernetes"), n)
    for name in victims:
        api.request("DELETE", "/api/v1/namespaces/default/services/" + name)
        del services[name]
    base = max(int(k[1:]) for k in services if k != "kubernetes") + 1
    for i in range(base, base + n):
        name = "s%d" % i
        api.request("POST", "/api/v1/namespaces/default/services", service_doc(name, ip_of(i)))
        services[name] = ip_of(i)


def seeded(n):
    services = {"kubernetes": "10.0.0.1"}
    services.update({"s%d" % i: ip_of(i) for i in range(n)})
    return services


def pipeline(n=SERVICES, bookmark_interval=1):
    services = seeded(n)
    etcd, api = fresh(services, bookmark_interval)
    k2s = Kube2sky(etcd, api)
    k2s.start()
    m, s, t = converge(etcd, k2s, services, time.time())
    if t is None:
        raise SystemExit("initial sync did not converge: %s missing, %s stale" % (m, s))
    return etcd, api, k2s, services


def stop(*procs):
    for p in procs:
        if p.proc and p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def finish(etcd, api, k2s, services):
    """Converges from now, stops everything: (missing, stale, seconds, restarts)."""
    result = converge(etcd, k2s, services, time.time())
    stop(k2s, api, etcd)
    return result + (k2s.restarts,)


def fresh(services, bookmark_interval=1):
    """A new etcd and an API server seeded with `services`."""
    shutil.rmtree(os.path.join(WORK, "etcd"), ignore_errors=True)
    etcd, api = Etcd(), Api()
    etcd.start()
    api.start(services, bookmark_interval)
    return etcd, api


def case_etcd_killed():
    etcd, api, k2s, services = pipeline()
    etcd.proc.send_signal(signal.SIGKILL)
    etcd.proc.wait()
    churn(api, services)
    time.sleep(2)
    etcd.start()
    return finish(etcd, api, k2s, services)


def case_etcd_stopped():
    etcd, api, k2s, services = pipeline()
    etcd.proc.send_signal(signal.SIGSTOP)
    churn(api, services)
    time.sleep(20)
    etcd.proc.send_signal(signal.SIGCONT)
    return finish(etcd, api, k2s, services)


def case_etcd_wiped():
    etcd, api, k2s, services = pipeline()
    etcd.proc.kill()
    etcd.proc.wait()
    shutil.rmtree(etcd.data)
    etcd.start()
    return finish(etcd, api, k2s, services)


def case_api_down_changed():
    etcd, api, k2s, services = pipeline()
    api.stop()
    victims = random.sample(sorted(k for k in services if k != "kubernetes"), 30)
    for name in victims:
        del services[name]
    # 60 new: the restarted server's resourceVersion is past the old one,
    # and its watch cache starts now (old resourceVersions: 410 Gone).
    for i in range(SERVICES, SERVICES + 60):
        services["s%d" % i] = ip_of(i)
    time.sleep(10)
    api.start(services)
    api.admin("expire-history")
    return finish(etcd, api, k2s, services)


def case_api_lower_rv():
    etcd, api, k2s, services = pipeline()
    churn(api, services, 200)  # the old server's resourceVersion grows
    converge(etcd, k2s, services, time.time())
    api.stop()
    for name in sorted(k for k in services if k != "kubernetes")[: SERVICES // 2]:
        del services[name]
    api.start(services)  # fewer objects: a lower resourceVersion
    return finish(etcd, api, k2s, services)


def case_410_storm():
    etcd, api, k2s, services = pipeline()
    for _ in range(10):
        churn(api, services, 5)
        api.admin("expire-history")
        api.admin("drop-watches")
        time.sleep(0.2)
    return finish(etcd, api, k2s, services)


def case_no_bookmarks():
    # No bookmarks: the endpoints watch (no events) keeps its first
    # resourceVersion; after the history expires and watches drop, it
    # resumes from a resourceVersion the server no longer has (410).
    etcd, api, k2s, services = pipeline(bookmark_interval=3600)
    churn(api, services)
    api.admin("expire-history")
    api.admin("drop-watches")
    return finish(etcd, api, k2s, services)


def complete_or_absent(keys):
    """Services in `keys` that are not whole (A and SRV both, or neither)."""
    per = {}
    for k in keys:
        if k.startswith(ROOT):
            name = k[len(ROOT):].split("/")[1]
            per[name] = per.get(name, 0) + 1
    return sum(1 for n in per.values() if n != 2)


def case_kube2sky_killed_mid_sync():
    services = seeded(SERVICES)
    etcd, api = fresh(services)
    k2s = Kube2sky(etcd, api)
    broken = reads = 0
    for _ in range(5):
        k2s.start()
        deadline = time.time() + random.uniform(0.5, 3.0)
        while time.time() < deadline:
            keys = etcd.keys()
            reads += 1
            broken += complete_or_absent(keys or set()) > 0
        k2s.proc.send_signal(signal.SIGKILL)
        k2s.proc.wait()
    k2s.start()
    print("  kube2sky killed 5 times: %d of %d reads saw a partial service" % (broken, reads))
    return finish(etcd, api, k2s, services)


def case_sigterm_40k():
    etcd, api = fresh(seeded(40000))
    k2s = Kube2sky(etcd, api)
    k2s.start()
    until(lambda: len(etcd.keys() or ()) > 1000, "the 40k sync to write")
    t = time.time()
    k2s.proc.send_signal(signal.SIGTERM)
    code = k2s.proc.wait()
    took = time.time() - t
    stop(api, etcd)
    print("  SIGTERM during a 40k-service sync: exit %d after %.2f s" % (code, took))
    return "exit %d" % code, "-", took, 0


def cpu_seconds(pid):
    """User + system CPU of a process so far, from /proc."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def case_initial_sync_40k():
    services = seeded(40000)
    etcd, api = fresh(services)
    k2s = Kube2sky(etcd, api)
    k2s.start()
    missing, stale, seconds = converge(etcd, k2s, services, time.time())
    cpu = cpu_seconds(k2s.proc.pid)
    stop(k2s, api, etcd)
    print("  initial sync of 40k services: %s s, kube2sky CPU %.2f s" % (seconds, cpu))
    return missing, stale, seconds, k2s.restarts


CASES = [
    ("initial sync of 40k services (s from kube2sky start; CPU printed above)", case_initial_sync_40k),
    ("etcd SIGKILLed, 30+30 changes, restarted", case_etcd_killed),
    ("etcd SIGSTOPped 20 s, 30+30 changes", case_etcd_stopped),
    ("etcd wiped", case_etcd_wiped),
    ("API server down 10 s, back with 30 deleted and 60 new services", case_api_down_changed),
    ("API server back with half the services, lower resourceVersion", case_api_lower_rv),
    ("410 storm: 10 x (changes, history expired, watches dropped)", case_410_storm),
    ("no bookmarks: watches resume from an expired resourceVersion", case_no_bookmarks),
    ("kube2sky SIGKILLed 5 times during the sync", case_kube2sky_killed_mid_sync),
    ("SIGTERM during a 40k-service sync (exit code, seconds to exit)", case_sigterm_40k),
]


def main():
    random.seed(7)
    rows = []
    only = os.environ.get("ONLY", "")
    try:
        for title, case in [c for c in CASES if only in c[0]]:
            print("case: " + title, flush=True)
            missing, stale, seconds, restarts = case()
            secs = "-" if seconds is None else "%.2f" % seconds
            rows.append((title, missing, stale, secs, restarts))
            print("  missing %s, stale %s, converged after %s s, kube2sky restarts %d"
                  % (missing, stale, secs, restarts), flush=True)
    finally:
        if os.environ.get("KEEP"):
            print("logs kept in " + WORK)
        else:
            shutil.rmtree(WORK, ignore_errors=True)
    print("\n| case (%d services, etcd v3) | keys missing | keys stale | s to converge | kube2sky restarts |" % SERVICES)
    print("|---|---|---|---|---|")
    for row in rows:
        print("| %s | %s | %s | %s | %s |" % row)


if __name__ == "__main__":
    main()
