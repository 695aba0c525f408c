"""The synthetic clusters of the scale benchmark, as plain data: the API
objects to seed, the same names as a Knot zone file, and dnsperf query mixes.

A cluster has services spread over NAMESPACES namespaces (each with a cluster
IP and 1 or 2 named ports), running pods (one IP each), and headless services
whose Endpoints hold ENDPOINTS addresses. Nothing here starts a process.
"""

import json
import random

NAMESPACES = 100
ENDPOINTS = 20
ZONE = "cluster.local"

SIZES = {
    # name: (services, ports per service, pods, headless services)
    "XS": (1000, 1, 1000, 10),
    "S": (10000, 1, 10000, 0),
    "L": (10000, 2, 150000, 1000),
    "XL": (50000, 1, 150000, 0),
}

PORTS = [("http", 80), ("metrics", 9090)]


def quad(base, i):
    """The i-th address of a /8-ish range starting at `base` (a.b), 250 per /24."""
    a, b = base
    return "%d.%d.%d.%d" % (a, b + i // 62500, (i // 250) % 250, i % 250 + 1)


def service_ip(i):
    return quad((10, 1), i)


def pod_ip(j):
    return quad((172, 16), j)


def endpoint_ip(k):
    return quad((100, 64), k)


class Cluster:
    """One size's objects, with the names they must answer."""

    def __init__(self, size):
        self.size = size
        self.services, self.ports, self.pods, self.headless = SIZES[size]

    def service(self, i):
        return "ns%d" % (i % NAMESPACES), "s%d" % i

    def pod(self, j):
        return "ns%d" % (j % NAMESPACES), "p%d" % j

    def headless_service(self, h):
        return "ns%d" % (h % NAMESPACES), "h%d" % h

    def service_name(self, i):
        ns, name = self.service(i)
        return "%s.%s.svc.%s" % (name, ns, ZONE)

    def pod_name(self, j):
        return "%s.%s.pod.%s" % (pod_ip(j).replace(".", "-"), self.pod(j)[0], ZONE)

    def headless_name(self, h):
        ns, name = self.headless_service(h)
        return "%s.%s.svc.%s" % (name, ns, ZONE)

    def last_names(self):
        """The names a complete sync answers last (one of each kind)."""
        names = [self.service_name(self.services - 1), self.pod_name(self.pods - 1)]
        if self.headless:
            names.append(self.headless_name(self.headless - 1))
        return names

    def objects(self, slices=False):
        """Every API object to seed, as dicts; with `slices`, the headless
        services' endpoints as EndpointSlices (what a real API server's
        controllers would have written from the Endpoints, or the pods)."""
        yield namespace("default")
        for n in range(NAMESPACES):
            yield namespace("ns%d" % n)
        yield service_doc("default", "kubernetes", "10.0.0.1", [("https", 443)])
        for i in range(self.services):
            ns, name = self.service(i)
            yield service_doc(ns, name, service_ip(i), PORTS[:self.ports])
        for h in range(self.headless):
            ns, name = self.headless_service(h)
            yield service_doc(ns, name, "None", PORTS[:1])
            ips = [endpoint_ip(h * ENDPOINTS + e) for e in range(ENDPOINTS)]
            yield (slice_doc if slices else endpoints_doc)(ns, name, ips, PORTS[:1])
        for j in range(self.pods):
            ns, name = self.pod(j)
            yield {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                   "spec": {"containers": [{"name": "c", "image": "app"}]},
                   "status": {"phase": "Running", "podIP": pod_ip(j)}}

    def write_seed(self, path, slices=False):
        with open(path, "w") as f:
            f.write("\n---\n".join(json.dumps(o, separators=(",", ":"))
                                    for o in self.objects(slices)))

    def zone(self):
        """The same names as a zone file for Knot (SRV targets the service name)."""
        lines = ["$ORIGIN %s." % ZONE, "$TTL 30",
                 "@ 3600 IN SOA ns.dns.%s. hostmaster.skydns.local. 1 28800 7200 604800 60" % ZONE,
                 "@ IN NS ns.dns", "ns.dns IN A 127.0.0.1",
                 "kubernetes.default.svc IN A 10.0.0.1"]
        for i in range(self.services):
            ns, name = self.service(i)
            lines.append("%s.%s.svc IN A %s" % (name, ns, service_ip(i)))
            for port, number in PORTS[:self.ports]:
                lines.append("_%s._tcp.%s.%s.svc IN SRV 10 100 %d %s.%s.svc"
                             % (port, name, ns, number, name, ns))
        for h in range(self.headless):
            ns, name = self.headless_service(h)
            for e in range(ENDPOINTS):
                lines.append("%s.%s.svc IN A %s" % (name, ns, endpoint_ip(h * ENDPOINTS + e)))
        for j in range(self.pods):
            lines.append("%s.%s.pod IN A %s" % (pod_ip(j).replace(".", "-"), self.pod(j)[0], pod_ip(j)))
        return "\n".join(lines) + "\n"

    def direct_mix(self, n, rng):
        """Names that exist, asked by their full name: 40% service A, 20% SRV,
        30% pod A, 10% headless A (service A instead when there are none)."""
        out = []
        for _ in range(n):
            r = rng.random()
            i = rng.randrange(self.services)
            if r < 0.2:
                ns, name = self.service(i)
                out.append("_http._tcp.%s.%s.svc.%s SRV" % (name, ns, ZONE))
            elif r < 0.5:
                out.append("%s A" % self.pod_name(rng.randrange(self.pods)))
            elif r < 0.6 and self.headless:
                out.append("%s A" % self.headless_name(rng.randrange(self.headless)))
            else:
                out.append("%s A" % self.service_name(i))
        return out

    def search_mix(self, n, rng):
        """What pods' resolvers send with `search <ns>.svc.cluster.local
        svc.cluster.local cluster.local` and ndots:5, each name as an A and
        AAAA pair: a service of another namespace (`s.ns`: one NXDOMAIN, then
        the answer), one of the pod's own (`s`: the answer at once), and an
        external name (three NXDOMAINs before the upstream, not asked here)."""
        out = []
        while len(out) < n:
            own = "ns%d" % rng.randrange(NAMESPACES)
            ns, name = self.service(rng.randrange(self.services))
            kind = rng.randrange(3)
            if kind == 0:
                names = ["%s.%s.%s.svc.%s" % (name, ns, own, ZONE), "%s.%s.svc.%s" % (name, ns, ZONE)]
            elif kind == 1:
                names = ["%s.%s.svc.%s" % (name, ns, ZONE)]
            else:
                ext = "www.example%d.com" % rng.randrange(1000)
                names = ["%s.%s.svc.%s" % (ext, own, ZONE), "%s.svc.%s" % (ext, ZONE),
                         "%s.%s" % (ext, ZONE)]
            for q in names:
                out += ["%s A" % q, "%s AAAA" % q]
        return out[:n]


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def service_doc(ns, name, ip, ports):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": [{"name": p, "protocol": "TCP", "port": n}
                                                for p, n in ports]}}


def endpoints_doc(ns, name, ips, ports):
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": ns},
            "subsets": [{"addresses": [{"ip": ip} for ip in ips],
                         "ports": [{"name": p, "protocol": "TCP", "port": n} for p, n in ports]}]}


def slice_doc(ns, name, ips, ports):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name + "-1", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
            "ports": [{"name": p, "protocol": "TCP", "port": n} for p, n in ports]}


def mix_file(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def rng():
    return random.Random(15)
