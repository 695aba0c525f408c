//! Go flag values as clap value parsers: any `fn(&str) -> Result<T, String>`
//! is one, so each program's flag structs (skydns's are split by feature)
//! name these without depending on one another.

use std::time::Duration;

/// Go's `strconv.ParseBool`, naming the bad value.
pub fn boolean(s: &str) -> Result<bool, String> {
    crate::parse_bool(s).ok_or_else(|| format!("invalid boolean {s:?} (use true or false)"))
}

/// Go's `time.ParseDuration` for non-negative values (`300ms`, `2s`,
/// `1h2m3.5s`).
pub fn duration(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn boolean_names_the_bad_value() {
        assert_eq!(super::boolean("T"), Ok(true));
        assert_eq!(super::boolean("0"), Ok(false));
        assert_eq!(
            super::boolean("yes"),
            Err("invalid boolean \"yes\" (use true or false)".to_string())
        );
    }

    #[test]
    fn duration_is_gos() {
        assert_eq!(super::duration("1m2.5s"), Ok(Duration::from_millis(62_500)));
        assert!(super::duration("5").is_err(), "a unit is required");
    }

    use std::time::Duration;
}
