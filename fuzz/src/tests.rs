//! The short fuzz run of every `cargo test`: each target over its seeds,
//! then over seeded random mutations of them (deterministic, so a failure
//! reproduces). The long, coverage-guided runs are `fuzz/run.sh`'s.

use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One random change: flip, set, insert or remove bytes, or cut the end.
fn mutate(rng: &mut StdRng, input: &mut Vec<u8>) {
    let at = |rng: &mut StdRng, len: usize| rng.random_range(0..len.max(1));
    match rng.random_range(0..6) {
        0 if !input.is_empty() => {
            let i = at(rng, input.len());
            input[i] ^= 1 << rng.random_range(0..8);
        }
        1 if !input.is_empty() => {
            let i = at(rng, input.len());
            input[i] = [0, 0xff, 0xc0, 0x3f, 41, 1][rng.random_range(0..6)];
        }
        2 => {
            let i = at(rng, input.len() + 1).min(input.len());
            let n = rng.random_range(1..8);
            for _ in 0..n {
                input.insert(i, rng.random());
            }
        }
        3 if !input.is_empty() => {
            let i = at(rng, input.len());
            input.remove(i);
        }
        4 => input.truncate(at(rng, input.len() + 1)),
        _ if input.len() >= 12 => {
            // A header count: where parsers trip.
            let i = 4 + 2 * rng.random_range(0..4);
            input[i + 1] = rng.random_range(0..4);
        }
        _ => input.push(rng.random()),
    }
}

#[test]
fn packet_seeds_keep_every_property() {
    for seed in seeds() {
        packet(&seed);
    }
}

#[test]
fn mutated_packets_keep_every_property() {
    let mut rng = StdRng::seed_from_u64(0x5eed_d115);
    let seeds = seeds();
    for _ in 0..10_000 {
        let mut input = seeds[rng.random_range(0..seeds.len())].clone();
        for _ in 0..rng.random_range(1..5) {
            mutate(&mut rng, &mut input);
        }
        packet(&input);
    }
}

#[test]
fn mutated_etcd_values_keep_every_property() {
    let values = [
        r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
        r#"{"host":"kubernetes.default.svc.cluster.local.","port":443}"#,
        r#"{"host":"www.example.org.","mail":true,"priority":70000}"#,
        r#"{"text":"a\\065\\\"b\\255","ttl":5,"group":"g"}"#,
        r#"{"host":"2001:db8::1","targetstrip":9}"#,
    ];
    let mut rng = StdRng::seed_from_u64(0x0e7c_d000);
    for value in values {
        etcd_value(value.as_bytes());
    }
    for _ in 0..1_000 {
        let mut input = values[rng.random_range(0..values.len())]
            .as_bytes()
            .to_vec();
        mutate(&mut rng, &mut input);
        etcd_value(&input);
    }
}

#[test]
fn the_properties_catch_a_reply_with_bytes_after_it() {
    // The check itself can fail: a reply with a trailing byte is refused.
    let request = query("kubernetes.default.svc.cluster.local.", 1);
    let Outcome::Done(Some(mut reply)) = packet_handler().handle(&request, Transport::Udp) else {
        panic!("answered");
    };
    check_reply(&request, &reply, Transport::Udp);
    reply.push(0);
    let caught = std::panic::catch_unwind(|| check_reply(&request, &reply, Transport::Udp));
    assert!(caught.is_err());
}

#[test]
fn the_packet_handler_signs_do_requests() {
    let mut m = Message::from_vec(&query("nosuch.default.svc.cluster.local.", 1)).unwrap();
    let mut edns = hickory_proto::op::Edns::new();
    edns.set_dnssec_ok(true);
    m.edns = Some(edns);
    let request = m.to_vec().unwrap();
    let Outcome::Done(Some(reply)) = packet_handler().handle(&request, Transport::Tcp) else {
        panic!("an answer from memory")
    };
    let reply = Message::from_vec(&reply).unwrap();
    let types: Vec<u16> = reply
        .authorities
        .iter()
        .map(|r| u16::from(r.record_type()))
        .collect();
    // SOA, three NSEC3s (50), and an RRSIG (46) for each.
    assert_eq!(types.iter().filter(|&&t| t == 50).count(), 3, "{types:?}");
    assert_eq!(types.iter().filter(|&&t| t == 46).count(), 4, "{types:?}");
}
