//! A backup of a test's etcd and its restore: the data directory copied
//! with the member stopped, and the server started again from the copy.

use super::Etcd;
use anyhow::{ensure, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

impl Etcd {
    /// Stops the server, copies its data aside (a backup taken with the
    /// member stopped), and starts it again on its data. For [`Etcd::restore`].
    pub fn back_up(&mut self) -> Result<PathBuf> {
        self.stop();
        self.generation += 1;
        let backup = self.dir.path().join(format!("backup-{}", self.generation));
        copy_dir(&self.data, &backup)?;
        self.respawn_on_same_ports()?;
        Ok(backup)
    }

    /// Starts the server again on its ports from a copy of `backup`: a
    /// store restored from an older backup, its revision back there.
    pub fn restore(&mut self, backup: &Path) -> Result<()> {
        self.stop();
        self.generation += 1;
        self.data = self.dir.path().join(format!("data-{}", self.generation));
        copy_dir(backup, &self.data)?;
        self.respawn_on_same_ports()
    }
}

/// `cp -a from to`: a directory copied with its modes.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    ensure!(
        status.success(),
        "cp -a {} {}: {status}",
        from.display(),
        to.display()
    );
    Ok(())
}
