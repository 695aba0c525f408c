//! kube2sky's transactions and the etcd they go to: every etcd of a v3
//! flavour allows transactions as large as kube2sky sends
//! (`-max-txn-ops` = `--etcd-max-txn-ops`, larger than etcd's default 128,
//! which costs etcd about twice the CPU per record in a full sync). A
//! kube2sky limit above its etcd's would only cost warnings and halved
//! transactions at every start; one below would waste the etcd setting.

use super::ha::{altered, fails};
use super::*;

/// etcd's default: 128 operations per transaction.
const DEFAULT: usize = 128;
/// kube2sky's default (`--etcd-max-txn-ops`).
const KUBE2SKY_DEFAULT: usize = 1024;

/// The value of `flag` in `list` (`flag value`, `flag=value`, with one
/// dash or two); the last one given, as Go's flag package and clap take.
fn flag_value(list: &[String], flag: &str) -> Option<usize> {
    let names = [format!("-{flag}"), format!("--{flag}")];
    list.iter().enumerate().rev().find_map(|(i, arg)| {
        let value = names.iter().find_map(|name| {
            if arg == name {
                list.get(i + 1).map(String::as_str)
            } else {
                arg.strip_prefix(name.as_str())?.strip_prefix('=')
            }
        })?;
        Some(
            value
                .parse()
                .unwrap_or_else(|e| panic!("{flag}={value}: {e}")),
        )
    })
}

/// `<workload>/<container>` and its transaction limit.
type Limit = (String, usize);

/// Each etcd's transaction limit and each kube2sky's, over every workload
/// of `m` (the defaults where a flag is absent).
fn limits(m: &Manifests) -> (Vec<Limit>, Vec<Limit>) {
    let (mut etcds, mut writers) = (Vec::new(), Vec::new());
    for (workload, template) in m.templates() {
        for c in &template.spec.as_ref().expect("pod spec").containers {
            let line: Vec<String> = [c.command.clone(), c.args.clone()]
                .into_iter()
                .flatten()
                .flatten()
                .collect();
            let what = format!("{workload}/{}", c.name);
            if line.first().is_some_and(|exe| exe.ends_with("/etcd")) {
                etcds.push((what, flag_value(&line, "max-txn-ops").unwrap_or(DEFAULT)));
            } else if c.name == "kube2sky" {
                let limit = flag_value(&line, "etcd-max-txn-ops").unwrap_or(KUBE2SKY_DEFAULT);
                writers.push((what, limit));
            }
        }
    }
    (etcds, writers)
}

fn check_txn_limits(m: &Manifests) {
    let (etcds, writers) = limits(m);
    assert!(
        !etcds.is_empty() && !writers.is_empty(),
        "deploy/{}: an etcd and a kube2sky",
        m.flavour
    );
    for (writer, sent) in &writers {
        assert!(*sent > DEFAULT, "{writer}: --etcd-max-txn-ops={sent}");
        for (etcd, allowed) in &etcds {
            assert_eq!(
                sent, allowed,
                "deploy/{}: {writer} sends transactions of {sent} operations, \
                 {etcd} allows {allowed}",
                m.flavour
            );
        }
    }
}

#[test]
fn kube2sky_sends_transactions_as_large_as_its_etcd_allows() {
    check_txn_limits(&Manifests::load("kubernetes"));
    check_txn_limits(&Manifests::load("shared-etcd"));
}

#[test]
fn txn_limit_checks_catch_an_etcd_or_a_kube2sky_left_at_another_limit() {
    let etcd_at = |limit: &'static str| {
        move |o: &mut Object| {
            if let Object::Deployment(d) = o {
                let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                for c in &mut pod.containers {
                    if let Some(command) = c.command.as_mut() {
                        if let Some(i) = command.iter().position(|a| a == "-max-txn-ops") {
                            command[i + 1] = limit.into();
                        }
                    }
                }
            }
        }
    };
    assert!(fails(
        check_txn_limits,
        &altered("kubernetes", etcd_at("512"))
    ));
    let default_etcd = |o: &mut Object| {
        if let Object::Deployment(d) = o {
            let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
            for c in &mut pod.containers {
                if let Some(command) = c.command.as_mut() {
                    if let Some(i) = command.iter().position(|a| a == "-max-txn-ops") {
                        command.drain(i..i + 2);
                    }
                }
            }
        }
    };
    assert!(fails(
        check_txn_limits,
        &altered("kubernetes", default_etcd)
    ));
    let kube2sky_at = |limit: Option<&'static str>| {
        move |o: &mut Object| {
            if let Object::Deployment(d) = o {
                let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                for c in &mut pod.containers {
                    if let Some(args) = c.args.as_mut() {
                        args.retain(|a| !a.starts_with("--etcd-max-txn-ops"));
                        if let Some(limit) = limit {
                            args.push(format!("--etcd-max-txn-ops={limit}"));
                        }
                    }
                }
            }
        }
    };
    assert!(fails(
        check_txn_limits,
        &altered("shared-etcd", kube2sky_at(Some("512")))
    ));
    // kube2sky's own default is the manifests' limit.
    assert!(!fails(
        check_txn_limits,
        &altered("kubernetes", kube2sky_at(None))
    ));
}
