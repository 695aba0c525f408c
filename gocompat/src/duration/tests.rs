//! Go's own tables for `time.ParseDuration` (`parseDurationTests` and
//! `parseDurationErrorTests` in `src/time/time_test.go`), then the
//! non-negative [`parse`] the flags use, then `Duration.String()`.

use super::*;

const NS: i64 = 1;
const US: i64 = 1_000 * NS;
const MS: i64 = 1_000 * US;
const S: i64 = 1_000 * MS;
const M: i64 = 60 * S;
const H: i64 = 60 * M;

#[test]
fn go_parse_duration_tests() {
    let table: &[(&str, i64)] = &[
        // simple
        ("0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        // sign
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0", 0),
        ("+0", 0),
        // decimal
        ("5.0s", 5 * S),
        ("5.6s", 5 * S + 600 * MS),
        ("5.s", 5 * S),
        (".5s", 500 * MS),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", S + 4 * MS),
        ("1.0040s", S + 4 * MS),
        ("100.00100s", 100 * S + MS),
        // different units
        ("10ns", 10 * NS),
        ("11us", 11 * US),
        ("12µs", 12 * US), // U+00B5
        ("12μs", 12 * US), // U+03BC
        ("13ms", 13 * MS),
        ("14s", 14 * S),
        ("15m", 15 * M),
        ("16h", 16 * H),
        // composite durations
        ("3h30m", 3 * H + 30 * M),
        ("10.5s4m", 4 * M + 10 * S + 500 * MS),
        ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
        (
            "1h2m3s4ms5us6ns",
            H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
        ),
        ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
        // large value
        ("52763797000ns", 52_763_797_000 * NS),
        // more than 9 digits after decimal point, see https://golang.org/issue/6617
        ("0.3333333333333333333h", 20 * M),
        // 9007199254740993 = 1<<53+1 cannot be stored precisely in a float64
        ("9007199254740993ns", (1 << 53) + 1),
        // largest duration that can be represented by int64 in nanoseconds
        ("9223372036854775807ns", i64::MAX),
        ("9223372036854775.807us", i64::MAX),
        ("9223372036s854ms775us807ns", i64::MAX),
        ("-9223372036854775808ns", i64::MIN),
        ("-9223372036854775.808us", i64::MIN),
        ("-9223372036s854ms775us808ns", i64::MIN),
        // huge string; issue 15011.
        ("0.100000000000000000000h", 6 * M),
        // This value tests the first overflow check in leadingFraction.
        (
            "0.830103483285477580700h",
            49 * M + 48 * S + 372_539_827 * NS,
        ),
    ];
    for &(text, want) in table {
        assert_eq!(parse_nanos(text), Ok(want), "{text}");
    }
}

#[test]
fn go_parse_duration_error_tests() {
    let table = [
        // invalid
        "",
        "3",
        "-",
        "s",
        ".",
        "-.",
        ".s",
        "+.s",
        "1d",
        "\u{FFFD}",
        "\u{FFFD} hello \u{FFFD} world",
        // overflow
        "9223372036854775810ns",
        "9223372036854775808ns",
        "-9223372036854775809ns",
        "9223372036854776us",
        "3000000h",
        "9223372036854775.808us",
        "9223372036854ms775us808ns",
    ];
    for text in table {
        let err = parse_nanos(text).expect_err(text);
        // Go quotes the whole input in every message.
        assert!(err.contains(&format!("{text:?}")), "{text}: {err}");
    }
}

#[test]
fn error_messages_are_gos() {
    assert_eq!(
        parse_nanos("abc"),
        Err("invalid duration \"abc\"".to_owned())
    );
    assert_eq!(
        parse_nanos("10"),
        Err("missing unit in duration \"10\"".to_owned())
    );
    assert_eq!(
        parse_nanos("3d"),
        Err("unknown unit \"d\" in duration \"3d\"".to_owned())
    );
}

#[test]
fn flags_take_non_negative_durations() {
    assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse("1h2m3.5s"), Ok(Duration::from_millis(3_723_500)));
    assert_eq!(parse("300ms"), Ok(Duration::from_millis(300)));
    assert_eq!(parse("-0s"), Ok(Duration::ZERO));
    assert_eq!(
        parse("9223372036854775807ns"),
        Ok(Duration::from_nanos(i64::MAX as u64))
    );
    assert_eq!(
        parse("-1s"),
        Err("negative duration \"-1s\" is not allowed".to_owned())
    );
    // Once a float-based parser panicked here ("cannot convert float seconds").
    assert!(parse("99999999999999999h").is_err());
    assert!(parse("1e3s").is_err());
}

#[test]
fn formats_durations_like_go() {
    assert_eq!(format(Duration::ZERO), "0s");
    assert_eq!(format(Duration::from_secs(2)), "2s");
    assert_eq!(format(Duration::from_secs(90)), "1m30s");
    assert_eq!(format(Duration::from_secs(3_600)), "1h0m0s");
    assert_eq!(format(Duration::from_millis(1_500)), "1.5s");
    assert_eq!(format(Duration::from_millis(500)), "500ms");
    assert_eq!(format(Duration::from_micros(1_500)), "1.5ms");
    assert_eq!(format(Duration::from_nanos(10)), "10ns");
    assert_eq!(format(Duration::from_micros(3)), "3µs");
}
