//! Go-compatible time text: parsing Go duration literals (`2s`, `1m30s`,
//! `500ms`) as `time.ParseDuration` does, printing durations as Go's
//! `Duration.String()`, and printing wall-clock instants as Go's
//! `time.Time.String()` in UTC (`2015-07-08 17:59:45.698036238 +0000 UTC`),
//! which is the `<ts>` of exec-healthz's 503 bodies.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Parses a Go duration literal such as `2s`, `1m30s`, `1.5h` or `500ms`.
///
/// Signs are accepted as Go does, but a negative value is an error since
/// `std::time::Duration` cannot hold it (and no flag of exec-healthz has a
/// meaning for one). Returns a message in Go's wording on failure.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(format!("invalid duration {text:?}"));
    }
    let mut total: u128 = 0;
    let mut s = rest;
    while !s.is_empty() {
        let (nanos, remaining) = parse_component(s, text)?;
        total = total
            .checked_add(nanos)
            .ok_or_else(|| format!("invalid duration {text:?}"))?;
        s = remaining;
    }
    // Go durations are int64 nanoseconds: keep the same ceiling.
    if total > i64::MAX as u128 {
        return Err(format!("invalid duration {text:?}"));
    }
    if negative && total > 0 {
        return Err(format!("negative duration {text:?} is not allowed"));
    }
    let secs =
        u64::try_from(total / NANOS_PER_SEC).map_err(|_| format!("invalid duration {text:?}"))?;
    // The remainder is below 1e9 and always fits.
    let sub = u32::try_from(total % NANOS_PER_SEC).unwrap_or(0);
    Ok(Duration::new(secs, sub))
}

/// Parses one `<number><unit>` component; returns its nanoseconds and the rest.
fn parse_component<'a>(s: &'a str, whole: &str) -> Result<(u128, &'a str), String> {
    let invalid = || format!("invalid duration {whole:?}");
    let int_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let int_part = &s[..int_end];
    let mut rest = &s[int_end..];
    let mut frac_part = "";
    if let Some(after_dot) = rest.strip_prefix('.') {
        let frac_end = after_dot
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after_dot.len());
        frac_part = &after_dot[..frac_end];
        rest = &after_dot[frac_end..];
    }
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(invalid());
    }
    let unit_end = rest
        .find(|c: char| c == '.' || c.is_ascii_digit())
        .unwrap_or(rest.len());
    let unit = &rest[..unit_end];
    if unit.is_empty() {
        return Err(format!("missing unit in duration {whole:?}"));
    }
    let scale: u128 = match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3_600 * NANOS_PER_SEC,
        _ => return Err(format!("unknown unit {unit:?} in duration {whole:?}")),
    };
    let int_value: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| invalid())?
    };
    let mut nanos = int_value.checked_mul(scale).ok_or_else(invalid)?;
    // Fractional part: digits beyond nanosecond precision are truncated, as Go does.
    let mut place = scale;
    for digit in frac_part.bytes() {
        place /= 10;
        if place == 0 {
            break;
        }
        nanos += u128::from(digit - b'0') * place;
    }
    Ok((nanos, &rest[unit_end..]))
}

/// Formats a duration as Go's `Duration.String()`: `2s`, `1m30s`, `1h0m0s`,
/// `1.5s`, `500ms`, `1.5µs`, `10ns`, `0s`.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < NANOS_PER_SEC {
        let (unit, per) = match nanos {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", fixed_point(nanos, per));
    }
    let hours = nanos / (3_600 * NANOS_PER_SEC);
    let minutes = (nanos / (60 * NANOS_PER_SEC)) % 60;
    let seconds = fixed_point(nanos % (60 * NANOS_PER_SEC), NANOS_PER_SEC);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `value / per` printed with the fraction's trailing zeros trimmed.
fn fixed_point(value: u128, per: u128) -> String {
    let whole = value / per;
    let frac = value % per;
    if frac == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Formats a wall-clock instant as Go's `time.Time.String()` in UTC, e.g.
/// `2015-07-08 17:59:45.698036238 +0000 UTC`. The fractional second has its
/// trailing zeros trimmed and is left out when zero, as Go's
/// `.999999999` layout does. Instants before 1970 print as the epoch.
pub fn format_time(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since.as_secs();
    let days = secs / 86_400;
    let of_day = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let frac = if since.subsec_nanos() == 0 {
        String::new()
    } else {
        let digits = format!("{:09}", since.subsec_nanos());
        format!(".{}", digits.trim_end_matches('0'))
    };
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}{frac} +0000 UTC",
        of_day / 3_600,
        (of_day / 60) % 60,
        of_day % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day);
/// Howard Hinnant's `civil_from_days`, restricted to non-negative days.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_duration_literals() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(
            parse_duration("1h2m3s4ms5us6ns"),
            Ok(Duration::new(3_723, 4_005_006))
        );
        assert_eq!(parse_duration("3µs"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("+10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("-0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_bad_duration_literals() {
        assert_eq!(
            parse_duration("abc"),
            Err("invalid duration \"abc\"".to_owned())
        );
        assert_eq!(
            parse_duration("10"),
            Err("missing unit in duration \"10\"".to_owned())
        );
        assert_eq!(
            parse_duration("3d"),
            Err("unknown unit \"d\" in duration \"3d\"".to_owned())
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration(".s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("9999999999h").is_err());
    }

    #[test]
    fn formats_durations_like_go() {
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_secs(3_600)), "1h0m0s");
        assert_eq!(format_duration(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::from_micros(1_500)), "1.5ms");
        assert_eq!(format_duration(Duration::from_nanos(10)), "10ns");
        assert_eq!(format_duration(Duration::from_micros(3)), "3µs");
    }

    #[test]
    fn formats_time_like_go_time_string() {
        let t = UNIX_EPOCH + Duration::new(1_436_378_385, 698_036_238);
        assert_eq!(format_time(t), "2015-07-08 17:59:45.698036238 +0000 UTC");
        let t = UNIX_EPOCH + Duration::new(1_436_378_385, 500_000_000);
        assert_eq!(format_time(t), "2015-07-08 17:59:45.5 +0000 UTC");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400); // leap day 2000
        assert_eq!(format_time(t), "2000-02-29 00:00:00 +0000 UTC");
        assert_eq!(format_time(UNIX_EPOCH), "1970-01-01 00:00:00 +0000 UTC");
    }
}
