//! Go's duration text: [`parse`] is `time.ParseDuration` step for step (the
//! same arithmetic, limits and error wording) and [`format`] is
//! `Duration.String()`. skydns, kube2sky and exec-healthz all read their
//! durations here.

use std::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;
/// `1 << 63`: one past the largest Go duration, the most negative one's magnitude.
const LIMIT: u64 = 1 << 63;

/// Parses a Go duration literal into signed nanoseconds, exactly as Go's
/// `time.ParseDuration`. The error is Go's message without the `time: ` prefix.
pub fn parse_nanos(text: &str) -> Result<i64, String> {
    let invalid = || format!("invalid duration {text:?}");
    let (negative, mut s) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let (nanos, rest) = component(s, text)?;
        total = total
            .checked_add(nanos)
            .filter(|&t| t <= LIMIT)
            .ok_or_else(invalid)?;
        s = rest;
    }
    match (negative, i64::try_from(total)) {
        (false, Ok(n)) => Ok(n),
        (true, Ok(n)) => Ok(-n),
        (true, Err(_)) => Ok(i64::MIN), // total == 1 << 63
        (false, Err(_)) => Err(invalid()),
    }
}

/// Parses a Go duration literal that must not be negative (`-0s` is zero).
/// Flags take their durations this way: `std::time::Duration` cannot hold a
/// negative one, and none of the flags has a meaning for it.
pub fn parse(text: &str) -> Result<Duration, String> {
    let nanos = parse_nanos(text)?;
    let nanos =
        u64::try_from(nanos).map_err(|_| format!("negative duration {text:?} is not allowed"))?;
    Ok(Duration::from_nanos(nanos))
}

/// One `[0-9]*(\.[0-9]*)?unit` component: its nanoseconds and the rest.
fn component<'a>(s: &'a str, whole: &str) -> Result<(u64, &'a str), String> {
    let invalid = || format!("invalid duration {whole:?}");
    if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
        return Err(invalid());
    }
    let (int, int_len) = leading_int(s).ok_or_else(invalid)?;
    let mut rest = &s[int_len..];
    let mut fraction = (0, 1.0);
    let mut fraction_len = 0;
    if let Some(after_dot) = rest.strip_prefix('.') {
        let (f, scale, len) = leading_fraction(after_dot);
        fraction = (f, scale);
        fraction_len = len;
        rest = &after_dot[len..];
    }
    if int_len == 0 && fraction_len == 0 {
        return Err(invalid()); // ".s", "-.s"
    }
    let unit_len = rest
        .find(|c: char| c == '.' || c.is_ascii_digit())
        .unwrap_or(rest.len());
    let unit = &rest[..unit_len];
    let scale: u64 = match unit {
        "" => return Err(format!("missing unit in duration {whole:?}")),
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(format!("unknown unit {unit:?} in duration {whole:?}")),
    };
    if int > LIMIT / scale {
        return Err(invalid());
    }
    let mut nanos = int * scale;
    let (f, f_scale) = fraction;
    if f > 0 {
        // Go: "float64 is needed to be nanosecond accurate for fractions of hours".
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let part = (f as f64 * (scale as f64 / f_scale)) as u64;
        nanos = nanos
            .checked_add(part)
            .filter(|&n| n <= LIMIT)
            .ok_or_else(invalid)?;
    }
    Ok((nanos, &rest[unit_len..]))
}

/// Go's `leadingInt`: the value of the leading digits and how many there
/// are; `None` past `1 << 63`.
fn leading_int(s: &str) -> Option<(u64, usize)> {
    let len = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut x: u64 = 0;
    for digit in s.bytes().take(len) {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(digit - b'0');
        if x > LIMIT {
            return None;
        }
    }
    Some((x, len))
}

/// Go's `leadingFraction`: the digits' value, `10^(digits kept)` and how
/// many digits there are. Digits past what a u64 holds are skipped, not an
/// error (precision stops growing).
fn leading_fraction(s: &str) -> (u64, f64, usize) {
    let len = s.bytes().take_while(u8::is_ascii_digit).count();
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for digit in s.bytes().take(len) {
        if overflow || x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(digit - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, len)
}

/// Formats a duration as Go's `Duration.String()`: `2s`, `1m30s`, `1h0m0s`,
/// `1.5s`, `500ms`, `1.5µs`, `10ns`, `0s`.
pub fn format(d: Duration) -> String {
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

#[cfg(test)]
mod tests;
