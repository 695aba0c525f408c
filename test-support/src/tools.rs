//! Finding the command-line tools the tests run, in `PATH` and the `sbin`
//! directories. A missing tool is a test failure that says which Debian package
//! to install, never a silent pass.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Directories searched after `PATH`.
const SBIN: &[&str] = &["/usr/local/sbin", "/usr/sbin", "/sbin"];

/// The path of `binary`, or an error naming `debian_package`.
pub fn require(binary: &str, debian_package: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    search(std::env::split_paths(&path), binary).with_context(|| {
        format!(
            "`{binary}` is not installed: run `apt-get install -y {debian_package}` \
                 (or scripts/test.sh, which installs it)"
        )
    })
}

/// A [`Command`] for `binary`, found as [`require`] finds it.
pub fn command(binary: &str, debian_package: &str) -> Result<Command> {
    Ok(Command::new(require(binary, debian_package)?))
}

/// The stdout of a command that succeeded, as text; an error saying
/// `what` failed, with the command's stderr, when it did not.
pub fn stdout_of(out: std::process::Output, what: &str) -> Result<String> {
    anyhow::ensure!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// Runs Debian's `promtool` with `args` in `dir` (where the rule files
/// are); its output, or an error holding it when it fails.
pub fn promtool(dir: &Path, args: &[&str]) -> Result<String> {
    let out = command("promtool", "prometheus")?
        .args(args)
        .current_dir(dir)
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    anyhow::ensure!(out.status.success(), "promtool {args:?}: {text}");
    Ok(text)
}

/// The first executable `binary` in `dirs`, then in [`SBIN`].
fn search(dirs: impl Iterator<Item = PathBuf>, binary: &str) -> Option<PathBuf> {
    dirs.chain(SBIN.iter().map(PathBuf::from))
        .map(|dir| dir.join(binary))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_names_its_package() {
        let err = require("no-such-tool-x9", "some-package").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`no-such-tool-x9` is not installed: run `apt-get install -y some-package` \
             (or scripts/test.sh, which installs it)"
        );
    }

    #[test]
    fn sbin_is_searched_when_path_lacks_it() {
        // `ldconfig` lives in /sbin or /usr/sbin on every Debian system.
        let path = search(std::iter::empty(), "ldconfig").unwrap();
        assert!(path.ends_with("sbin/ldconfig"), "{}", path.display());
    }
}
