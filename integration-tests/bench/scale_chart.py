"""Draws scale.json (written by scale.py) as one PNG of four panels: QPS per
server and query mix, propagation percentiles, sync and restart times, and
memory, each against cluster size, with the goals of docs/testing.md ("At cluster sizes") drawn
as dashed lines; and, when the run has the propagation breakdown, a second
PNG beside it (`<name>-propagation.png`): p50 and p99 of each step, per
size, with etcd's own put as the floor. Needs matplotlib (Debian's
python3-matplotlib).

Usage: scale_chart.py scale.json scale.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def bars(ax, sizes, series, width=0.8):
    n = len(series)
    for k, (label, values) in enumerate(series):
        xs = [i + (k - (n - 1) / 2) * width / n for i in range(len(sizes))]
        ax.bar(xs, values, width / n, label=label)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels(sizes)


def goal(ax, y, text):
    ax.axhline(y, color="grey", linestyle="--", linewidth=1)
    ax.annotate(text, (1.0, y), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                fontsize=8, color="grey")


def main():
    data = json.load(open(sys.argv[1]))
    rs = data["results"]
    sizes = ["%s\n%dk svc, %dk pods" % (r["size"], r["services"] // 1000, r["pods"] // 1000) for r in rs]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    (qps, prop), (sync, mem) = axes

    bars(qps, sizes, [
        ("skydns, direct", [r["qps_direct_skydns"] / 1000 for r in rs]),
        ("Knot, direct", [r["qps_direct_knot"] / 1000 for r in rs]),
        ("skydns, search path", [r["qps_search_skydns"] / 1000 for r in rs]),
        ("Knot, search path", [r["qps_search_knot"] / 1000 for r in rs]),
        ("skydns, 200 changes/s", [r["qps_direct_churn"] / 1000 for r in rs]),
    ])
    qps.set_title("Queries per second (dnsperf, 4 clients)")
    qps.set_ylabel("thousand QPS")
    qps.legend(fontsize=8, loc="lower right")

    bars(prop, sizes, [("p50", [r["propagation_p50_ms"] for r in rs]),
                       ("p99", [r["propagation_p99_ms"] for r in rs])])
    goal(prop, 5, "goal p50 5 ms")
    goal(prop, 20, "goal p99 20 ms")
    prop.set_title("Propagation: Service POST -> DNS answer")
    prop.set_ylabel("ms")
    prop.legend(fontsize=8, loc="upper left")

    bars(sync, sizes, [("kube2sky initial sync", [r["sync_s"] for r in rs]),
                       ("kube2sky restart", [r["restart_s"] for r in rs]),
                       ("skydns restart", [r["skydns_restart_s"] for r in rs])])
    # Issue #32's goals for the initial sync (the earlier ones: L 10 s, XL 30 s).
    goal(sync, 1, "goal S 1 s")
    goal(sync, 5, "goal XL 5 s")
    sync.set_title("Sync and restart")
    sync.set_ylabel("seconds")
    sync.legend(fontsize=8, loc="upper left")

    bars(mem, sizes, [("kube2sky peak RSS", [r["kube2sky_peak_mb"] for r in rs]),
                      ("skydns RSS", [r["skydns_rss_mb"] for r in rs])])
    goal(mem, 150, "goal kube2sky 150 MB")
    goal(mem, 100, "goal skydns 100 MB")
    mem.set_title("Memory")
    mem.set_ylabel("MB")
    mem.legend(fontsize=8, loc="upper left")

    fig.suptitle("kube-dns-rs at cluster sizes, %s, %s" % (data["date"], data["machine"]), fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)
    if all("propagation_steps" in r for r in rs):
        steps_chart(data, sys.argv[2].rsplit(".", 1)[0] + "-propagation.png")


def steps_chart(data, path):
    """Per size, the p50 and p99 of each step of propagation."""
    rs = data["results"]
    fig, axes = plt.subplots(1, len(rs), figsize=(6 * len(rs), 4.5), squeeze=False)
    for ax, r in zip(axes[0], rs):
        steps = r["propagation_steps"]["steps"]
        names = [name for name, v in steps.items() if v]
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [steps[n][0] for n in names], 0.4, label="p50")
        ax.bar([x + 0.2 for x in xs], [steps[n][1] for n in names], 0.4, label="p99")
        ax.axhline(r["etcd_put_p50_ms"], color="grey", linestyle=":", linewidth=1)
        ax.axhline(r["etcd_put_p99_ms"], color="grey", linestyle="--", linewidth=1)
        ax.annotate("etcd put alone, p50 / p99", (1.0, r["etcd_put_p99_ms"]),
                    xycoords=("axes fraction", "data"), ha="right", va="bottom", fontsize=8,
                    color="grey")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([n.replace("-> ", "").replace(" ", "\n", 2) for n in names], fontsize=7)
        ax.set_ylabel("ms")
        ax.set_title("%s: total p50 %.1f ms, p99 %.1f ms" % (
            r["size"], r["propagation_p50_ms"], r["propagation_p99_ms"]), fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle("Where propagation time goes (Service POST -> answer), %s" % data["date"],
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


main()
