//! Go's integer text: `strconv.ParseInt(s, 0, 64)`, the parser behind
//! Go's `flag.Int`, so `-port=0x1f90` means what it meant in the Go original.

/// Go's `strconv.ParseInt(value, 0, 64)`, which `flag.Int` uses: optional
/// sign, then decimal, `0x` hex, `0o` or leading-`0` octal, or `0b` binary,
/// with `_` allowed between digits (and after a base prefix).
pub fn parse(value: &str) -> Result<i64, String> {
    let syntax = || "not an integer (parse error)".to_owned();
    let range = || "value out of range".to_owned();
    let (negative, s) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    let prefix = s.get(..2).map(str::to_ascii_lowercase);
    let (base, digits) = match prefix.as_deref() {
        Some("0b") if s.len() >= 3 => (2, &s[2..]),
        Some("0o") if s.len() >= 3 => (8, &s[2..]),
        Some("0x") if s.len() >= 3 => (16, &s[2..]),
        _ if s.starts_with('0') => (8, &s[1..]),
        _ if s.is_empty() => return Err(syntax()),
        _ => (10, s),
    };
    let mut n: u64 = 0;
    let mut underscores = false;
    for c in digits.chars() {
        if c == '_' {
            underscores = true;
            continue;
        }
        let d = c.to_digit(base).ok_or_else(syntax)?;
        n = n
            .checked_mul(u64::from(base))
            .and_then(|n| n.checked_add(u64::from(d)))
            .ok_or_else(range)?;
    }
    if underscores && !underscores_ok(s) {
        return Err(syntax());
    }
    let magnitude = i64::try_from(n);
    match (negative, magnitude) {
        (false, Ok(n)) => Ok(n),
        (true, Ok(n)) => Ok(-n),
        (true, Err(_)) if n == 1 << 63 => Ok(i64::MIN),
        _ => Err(range()),
    }
}

/// Go's `underscoreOK`: each `_` sits between digits, or right after a base
/// prefix and before a digit (`s` has no sign).
fn underscores_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let lower = |c: u8| c.to_ascii_lowercase();
    let (mut i, mut saw, hex) = match b {
        [b'0', p, ..] if matches!(lower(*p), b'b' | b'o' | b'x') => (2, '0', lower(*p) == b'x'),
        _ => (0, '^', false),
    };
    while let Some(&c) = b.get(i) {
        i += 1;
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = '0';
        } else if c == b'_' {
            if saw != '0' {
                return false;
            }
            saw = '_';
        } else if saw == '_' {
            return false;
        } else {
            saw = '!';
        }
    }
    saw != '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_base_zero_like_go() {
        for (text, want) in [
            ("8080", 8080),
            ("+8080", 8080),
            ("0x1f90", 8080),
            ("0X1F90", 8080),
            ("010", 8),
            ("0o17", 15),
            ("0b1010", 10),
            ("8_080", 8080),
            ("0x_1f_90", 8080),
            ("0_10", 8),
            ("0", 0),
            ("-0x10", -16),
            ("-9223372036854775808", i64::MIN),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
        for bad in [
            "",
            "+",
            "0x",
            "08",
            "0b2",
            "_80",
            "80_",
            "8__0",
            "0x_",
            "1e3",
            " 80",
            "9223372036854775808",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
