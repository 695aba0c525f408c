//! Go's `time.Time.String()` for wall-clock instants in UTC
//! (`2015-07-08 17:59:45.698036238 +0000 UTC`), the `<ts>` exec-healthz
//! prints in its 503 bodies.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Formats a wall-clock instant as Go's `time.Time.String()` in UTC, e.g.
/// `2015-07-08 17:59:45.698036238 +0000 UTC`. The fractional second has its
/// trailing zeros trimmed and is left out when zero, as Go's
/// `.999999999` layout does. Instants before 1970 print as the epoch.
pub fn format(t: SystemTime) -> String {
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
    fn formats_time_like_go_time_string() {
        let t = UNIX_EPOCH + Duration::new(1_436_378_385, 698_036_238);
        assert_eq!(format(t), "2015-07-08 17:59:45.698036238 +0000 UTC");
        let t = UNIX_EPOCH + Duration::new(1_436_378_385, 500_000_000);
        assert_eq!(format(t), "2015-07-08 17:59:45.5 +0000 UTC");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400); // leap day 2000
        assert_eq!(format(t), "2000-02-29 00:00:00 +0000 UTC");
        assert_eq!(format(UNIX_EPOCH), "1970-01-01 00:00:00 +0000 UTC");
    }
}
