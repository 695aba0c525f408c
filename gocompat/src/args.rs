//! Go flag spellings on top of clap: Go's `flag` package (skydns, exec-healthz)
//! and spf13/pflag (kube2sky) accept a single dash for long flags, and
//! kube2sky's pflag takes `_` for `-` in names. [`Spelling::to_gnu`] rewrites
//! those into the `--name[=value]` form clap parses; the rest passes through.

use std::ffi::OsString;
use std::io::Write as _;

/// How one program's Go flags may be spelled.
#[derive(Clone, Copy, Debug)]
pub struct Spelling {
    /// Single-letter flags clap defines as short options (`-h`, `-V`); they
    /// stay as they are. Any other `-x` is the long flag `--x`.
    pub short_flags: &'static [char],
    /// Whether `_` in a flag name means `-` (pflag's normalisation, with
    /// its deprecation warning on stderr).
    pub underscores_as_dashes: bool,
}

impl Spelling {
    /// Rewrites `args` (program name first) for clap: `-name[=value]` →
    /// `--name[=value]` and, when enabled, `--a_b` → `--a-b`. Stops at `--`;
    /// values, `-`, negative numbers and non-UTF-8 arguments pass unchanged.
    /// pflag's deprecation warnings go to stderr as pflag wrote them.
    pub fn to_gnu<I, A>(&self, args: I) -> Vec<OsString>
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        let (out, warnings) = self.to_gnu_noting(args);
        for warning in warnings {
            // Not eprintln!: a closed stderr must not panic flag parsing.
            let _ = writeln!(std::io::stderr(), "{warning}");
        }
        out
    }

    /// [`Spelling::to_gnu`], with the deprecation warnings (`WARNING: a_b
    /// is deprecated, use a-b instead`) returned instead of written, for a
    /// program to log once its log format is known.
    pub fn to_gnu_noting<I, A>(&self, args: I) -> (Vec<OsString>, Vec<String>)
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        let mut warnings = Vec::new();
        let mut out = Vec::new();
        let mut positional = false;
        for (i, arg) in args.into_iter().enumerate() {
            let arg = arg.into();
            if i == 0 || positional {
                out.push(arg);
                continue;
            }
            if arg == "--" {
                positional = true;
                out.push(arg);
                continue;
            }
            let rewritten = arg.to_str().and_then(|s| self.rewrite(s, &mut warnings));
            out.push(rewritten.map_or(arg, OsString::from));
        }
        (out, warnings)
    }

    /// The GNU spelling of one argument, or `None` to keep it as it is.
    fn rewrite(&self, arg: &str, warnings: &mut Vec<String>) -> Option<String> {
        let (body, single_dash) = match arg.strip_prefix("--") {
            Some(body) => (body, false),
            None => (arg.strip_prefix('-')?, true),
        };
        let first = body.chars().next()?;
        if !first.is_ascii_alphabetic() {
            return None; // "-5", "---x", "-=x": values or clap's errors
        }
        if single_dash && body.len() == 1 && self.short_flags.contains(&first) {
            return None;
        }
        let (name, value) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (body, None),
        };
        let name = if self.underscores_as_dashes && name.contains('_') {
            let dashed = name.replace('_', "-");
            warnings.push(format!(
                "WARNING: {name} is deprecated, use {dashed} instead"
            ));
            dashed
        } else if single_dash {
            name.to_owned()
        } else {
            return None;
        };
        Some(match value {
            Some(value) => format!("--{name}={value}"),
            None => format!("--{name}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO_FLAG: Spelling = Spelling {
        short_flags: &['h', 'V'],
        underscores_as_dashes: false,
    };
    const PFLAG: Spelling = Spelling {
        short_flags: &['h'],
        underscores_as_dashes: true,
    };

    fn gnu(spelling: Spelling, args: &[&str]) -> Vec<String> {
        let all = std::iter::once("prog").chain(args.iter().copied());
        spelling
            .to_gnu(all)
            .into_iter()
            .skip(1)
            .map(|a| a.into_string().expect("utf-8"))
            .collect()
    }

    #[test]
    fn underscored_names_are_noted_for_the_program_to_log() {
        let (args, warnings) = PFLAG.to_gnu_noting(["prog", "--kube_master_url=x", "-domain=a."]);
        assert_eq!(args, ["prog", "--kube-master-url=x", "--domain=a."]);
        assert_eq!(
            warnings,
            ["WARNING: kube_master_url is deprecated, use kube-master-url instead"]
        );
        let (_, none) = GO_FLAG.to_gnu_noting(["prog", "-domain=a."]);
        assert!(none.is_empty());
    }

    #[test]
    fn single_dash_long_flags_become_double_dash() {
        assert_eq!(
            gnu(
                GO_FLAG,
                &["-domain=a.", "-addr", "1.2.3.4:53", "--verbose", "-no-rec"]
            ),
            [
                "--domain=a.",
                "--addr",
                "1.2.3.4:53",
                "--verbose",
                "--no-rec"
            ]
        );
    }

    #[test]
    fn short_flags_values_and_positionals_stay() {
        assert_eq!(
            gnu(
                GO_FLAG,
                &["-h", "-V", "-ndots", "-5", "-", "---x", "--", "-domain"]
            ),
            ["-h", "-V", "--ndots", "-5", "-", "---x", "--", "-domain"]
        );
        // kube2sky has no -V, and glog's -v is a long flag there.
        assert_eq!(gnu(PFLAG, &["-v", "2", "-V"]), ["--v", "2", "--V"]);
    }

    #[test]
    fn underscores_become_dashes_only_where_pflag_did_it() {
        assert_eq!(
            gnu(
                PFLAG,
                &["--kube_master_url=http://x", "-etcd_server", "a_b"]
            ),
            ["--kube-master-url=http://x", "--etcd-server", "a_b"]
        );
        assert_eq!(gnu(GO_FLAG, &["--path_prefix=x"]), ["--path_prefix=x"]);
    }

    #[test]
    fn non_utf8_arguments_pass_through() {
        use std::os::unix::ffi::OsStringExt as _;
        let raw = OsString::from_vec(vec![b'-', b'x', 0xff]);
        let out = GO_FLAG.to_gnu([OsString::from("prog"), raw.clone()]);
        assert_eq!(out[1], raw);
    }
}
