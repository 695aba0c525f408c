//! Go-compatible command-line text, for the Go programs this project replaces
//! (SkyDNS 2.5, kube2sky 1.2, exec-healthz 1.0): [`args`] (flag spellings),
//! [`flag`] (clap value parsers), [`duration`] (`time.ParseDuration`,
//! `Duration.String()`), [`int`] (`strconv.ParseInt(s, 0, 64)`), [`parse_bool`]
//! (`strconv.ParseBool`) and [`time`] (`time.Time.String()`).

pub mod args;
pub mod duration;
pub mod flag;
pub mod int;
pub mod time;

/// Go's `strconv.ParseBool`: `1 t T TRUE true True` and
/// `0 f F FALSE false False`; anything else is `None`.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse_bool_takes_gos_spellings_only() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(super::parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(super::parse_bool(f), Some(false), "{f}");
        }
        for bad in ["", "yes", "tRUE", "2", " true"] {
            assert_eq!(super::parse_bool(bad), None, "{bad}");
        }
    }
}
