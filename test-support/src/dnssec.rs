//! DNSSEC key pairs made by BIND's `dnssec-keygen` at test time, never
//! committed: [`keygen`] makes one in a temporary directory, deleted with the
//! returned [`KeyPair`]. A missing `dnssec-keygen` fails the test, naming the
//! package to install.

use anyhow::{ensure, Context, Result};
use std::path::Path;
use tempfile::TempDir;

/// A key pair written by `dnssec-keygen` into a temporary directory.
pub struct KeyPair {
    /// The directory holding the pair (deleted on drop).
    pub dir: TempDir,
    /// `<dir>/K<zone>+<alg>+<tag>`, without `.key` or `.private`.
    pub base: String,
    /// The key tag dnssec-keygen put in the file name.
    pub tag: u16,
}

impl KeyPair {
    /// The directory holding the pair (where a test may write more files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// `dnssec-keygen -q -n ZONE <args> <zone>` (e.g. `args` `-a
/// ECDSAP256SHA256`) in a fresh directory.
pub fn keygen(zone: &str, args: &[&str]) -> Result<KeyPair> {
    let mut command = crate::tools::command("dnssec-keygen", "bind9-utils")?;
    let dir = tempfile::tempdir().context("creating a key directory")?;
    let out = command
        .arg("-K")
        .arg(dir.path())
        .args(["-q", "-n", "ZONE"])
        .args(args)
        .arg(zone)
        .stdin(std::process::Stdio::null())
        .output()
        .context("running dnssec-keygen")?;
    ensure!(
        out.status.success(),
        "dnssec-keygen {args:?} {zone}: {out:?}"
    );
    let name = String::from_utf8(out.stdout)?.trim().to_string();
    let tag = name
        .rsplit('+')
        .next()
        .and_then(|t| t.parse().ok())
        .with_context(|| format!("no key tag in {name:?}"))?;
    let base = dir.path().join(&name);
    let base = base.to_str().context("a UTF-8 temporary path")?.to_string();
    Ok(KeyPair { dir, base, tag })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_is_named_by_zone_algorithm_and_tag() {
        let key = keygen("cluster.local.", &["-a", "ECDSAP256SHA256"]).unwrap();
        let name = Path::new(&key.base).file_name().unwrap().to_str().unwrap();
        assert_eq!(name, format!("Kcluster.local.+013+{:05}", key.tag));
        for ext in ["key", "private"] {
            assert!(Path::new(&format!("{}.{ext}", key.base)).is_file(), "{ext}");
        }
    }
}
