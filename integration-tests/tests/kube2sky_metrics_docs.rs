//! kube2sky's series as the docs list them: the list under `/metrics` in
//! docs/kube2sky.md and the table under "## kube2sky" in docs/monitoring.md
//! name the same series with the same labels, and exactly the families the
//! real kube2sky serves on `/metrics`, with the labels its samples carry
//! (a Service with a bad port name gives `kube2sky_skipped_total` a sample,
//! a re-watch answered 410 Gone `kube2sky_watch_restarts_total`).

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Context, Result};
use kube2sky_support::*;
use kube_api_test_server::ResourceKind;
use std::collections::{BTreeMap, BTreeSet};
use test_support::wait::within;

/// Series name (`_total` included) → label names.
type Series = BTreeMap<String, BTreeSet<String>>;

/// A Service whose port name is not a DNS-1123 label: skipped, counted.
const BAD_PORT: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
 "spec":{"clusterIP":"10.0.0.77","ports":[{"name":"a.b","port":80,"protocol":"TCP"}]}}"#;

fn doc(name: &str) -> Result<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/").to_owned() + name;
    std::fs::read_to_string(&path).with_context(|| path)
}

/// The text between the first pair of backticks in `s`.
fn first_code(s: &str) -> Option<&str> {
    let (_, rest) = s.split_once('`')?;
    Some(rest.split_once('`')?.0)
}

/// docs/kube2sky.md: the items under "- `/metrics`: ...", each
/// `` `name{label,label}` ``.
fn kube2sky_md(text: &str) -> Result<Series> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("- `/metrics`:"));
    ensure!(lines.next().is_some(), "no \"- `/metrics`:\" item");
    let mut series = Series::new();
    for line in lines.map_while(|l| l.strip_prefix("  - ")) {
        let code = first_code(line).with_context(|| format!("no series in {line:?}"))?;
        let (name, labels) = match code.split_once('{') {
            Some((name, labels)) => (name, labels.trim_end_matches('}')),
            None => (code, ""),
        };
        let labels = labels.split(',').filter(|l| !l.is_empty());
        series.insert(name.to_owned(), labels.map(str::to_owned).collect());
    }
    Ok(series)
}

/// docs/monitoring.md: the rows of the table under "## kube2sky",
/// `` | `name` | `label`, `label` | what | ``.
fn monitoring_md(text: &str) -> Result<Series> {
    let (_, section) = text
        .split_once("\n## kube2sky\n")
        .context("no \"## kube2sky\" section")?;
    let mut series = Series::new();
    let rows = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    for row in rows.skip(2) {
        let cells: Vec<&str> = row.split('|').collect();
        ensure!(cells.len() >= 4, "row {row:?}");
        let name = first_code(cells[1]).with_context(|| format!("no series in {row:?}"))?;
        let labels = cells[2].split(',').filter_map(first_code);
        series.insert(name.to_owned(), labels.map(str::to_owned).collect());
    }
    Ok(series)
}

/// What `/metrics` serves: every family (`# TYPE`, counters with
/// `_total`), with the label names of its samples.
fn served(text: &str) -> Result<Series> {
    let mut series = Series::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').context("# TYPE line")?;
            let name = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_owned(),
            };
            series.entry(name).or_default();
        } else if !line.starts_with('#') && !line.is_empty() {
            let (sample, _) = line.rsplit_once(' ').context("sample line")?;
            let Some((name, labels)) = sample.split_once('{') else {
                continue;
            };
            let labels = labels.trim_end_matches('}').split(',');
            let names = labels
                .filter_map(|l| l.split_once('='))
                .map(|(k, _)| k.to_owned());
            series.entry(name.to_owned()).or_default().extend(names);
        }
    }
    Ok(series)
}

#[test]
fn kube2sky_md_and_monitoring_md_list_the_same_series() -> Result<()> {
    let listed = kube2sky_md(&doc("kube2sky.md")?)?;
    let table = monitoring_md(&doc("monitoring.md")?)?;
    ensure!(listed.len() >= 10, "docs/kube2sky.md lists only {listed:?}");
    ensure!(
        listed == table,
        "docs/kube2sky.md lists\n{listed:#?}\ndocs/monitoring.md\n{table:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_list_what_kube2sky_serves() -> Result<()> {
    let listed = kube2sky_md(&doc("kube2sky.md")?)?;
    let api = apiserver(&[KUBERNETES, BAD_PORT]).await?;
    let (_etcd, _kubectl, k2s) = cluster_on(&api, &[]).await?;
    let skipped = r#"kube2sky_skipped_total{kind="Services",field="PortName"}"#;
    let before = eventually("the bad port counted", DEADLINE, async || {
        let text = k2s.metrics().await?;
        let n = test_support::http::metric(&text, skipped);
        ensure!(n == Some(1.0), "{text}");
        Ok(text)
    })
    .await?;
    // As the docs say: no series of a family before its first count.
    let restarts = "kube2sky_watch_restarts_total";
    ensure!(!before.contains(restarts), "{before}");
    // A family without a sample is not served: make the watches restart.
    // They end while the server hangs, a delete moves the resourceVersion
    // on, the history is forgotten, so the re-watches get 410 Gone.
    within("3 watches", DEADLINE, api.wait_for_open_watches(3)).await?;
    api.pause();
    api.drop_watches();
    within("no watch", DEADLINE, api.wait_for_open_watches(0)).await?;
    store_delete(&api, ResourceKind::Service, "default", "web")?;
    api.expire_history();
    api.resume();
    let text = eventually("a watch restart counted", DEADLINE, async || {
        let text = k2s.metrics().await?;
        let counted = text.contains(&format!("{restarts}{{"));
        ensure!(counted, "{text}\nlog:\n{}", k2s.log());
        Ok(text)
    })
    .await?;
    let served = served(&text)?;
    let names = |s: &Series| s.keys().cloned().collect::<BTreeSet<_>>();
    ensure!(
        names(&listed) == names(&served),
        "docs/kube2sky.md lists {:?}, kube2sky serves {:?}",
        names(&listed),
        names(&served)
    );
    for (name, labels) in served.iter().filter(|(_, l)| !l.is_empty()) {
        ensure!(
            listed[name] == *labels,
            "{name}: documented labels {:?}, served {labels:?}",
            listed[name]
        );
    }
    Ok(())
}

#[test]
fn the_parsers_read_what_they_are_for() -> Result<()> {
    let md = "x\n- `/metrics`: these:\n  - `a_total`: one\n  - `b{k,f}`: two\n\nafter\n  - `c`\n";
    let want: Series = [
        ("a_total".to_owned(), BTreeSet::new()),
        ("b".to_owned(), ["k", "f"].map(str::to_owned).into()),
    ]
    .into();
    ensure!(kube2sky_md(md)? == want, "{:?}", kube2sky_md(md)?);
    let table = "\n## kube2sky\n\ntext\n\n| series | labels | what |\n|---|---|---|\n\
                 | `a_total` | | one |\n| `b` | `k`, `f` | two (`x`) |\n\n## next\n| `c` | | |\n";
    ensure!(monitoring_md(table)? == want, "{:?}", monitoring_md(table)?);
    let text = "# HELP a x\n# TYPE a counter\n# TYPE b gauge\nb{k=\"1\",f=\"2\"} 0\n# EOF\n";
    ensure!(served(text)? == want, "{:?}", served(text)?);
    Ok(())
}
