//! The process groups a test process started, stopped should it die without
//! dropping their [`crate::process::Process`]: killed at a timeout (as the
//! mutation check kills a test run that hangs on a mutant) or by Ctrl-C.
//! Each group is its own (so a test can signal it whole), so killing the
//! test's group does not reach them. One `bash` per test process, in a group
//! of its own, reads `+pgid` and `-pgid` lines from a pipe whose writing end
//! only the test process holds; at the pipe's end (the test process is gone,
//! however it ended) it kills the groups still open.

use std::io::{PipeWriter, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The reaper's script: the open groups as " 12 34 ", each killed at the end.
const SCRIPT: &str = r#"open=" "
while read -r op pgid; do
  case $op in
    +) open="$open$pgid " ;;
    -) open=${open/ $pgid / } ;;
  esac
done
for pgid in $open; do kill -KILL -- "-$pgid" 2>/dev/null; done"#;

/// The pipe to this test process's reaper, started at the first call;
/// `None` when it could not start (no bash): groups are then stopped only
/// when dropped, as before.
fn pipe() -> Option<&'static Mutex<PipeWriter>> {
    static PIPE: OnceLock<Option<Mutex<PipeWriter>>> = OnceLock::new();
    PIPE.get_or_init(|| {
        // Both ends are close-on-exec: no child but the reaper holds one.
        let (reader, writer) = std::io::pipe().ok()?;
        Command::new("bash")
            .args(["-c", SCRIPT])
            .stdin(reader)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok()?;
        Some(Mutex::new(writer))
    })
    .as_ref()
}

fn send(line: &str) {
    if let Some(pipe) = pipe() {
        let mut writer = pipe.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = writer.write_all(line.as_bytes());
    }
}

/// Group `pgid` is killed if this test process dies before [`stopped`].
pub(crate) fn started(pgid: u32) {
    send(&format!("+ {pgid}\n"));
}

/// Group `pgid` is stopped: the reaper forgets it.
pub(crate) fn stopped(pgid: u32) {
    send(&format!("- {pgid}\n"));
}

#[cfg(test)]
mod tests {
    use crate::process::{processes_with, Process};
    use crate::wait::eventually_blocking;
    use std::process::Command;
    use std::time::Duration;

    /// A test process killed with a group it started open: the reaper
    /// kills the group. The "test process" is a child of this test, which
    /// runs this test binary's `reaper_child` mode.
    #[test]
    fn a_group_left_open_by_a_killed_test_process_is_killed() {
        let token = format!("reaper-{}", std::process::id());
        let exe = std::env::current_exe().expect("the test executable");
        let mut child = Command::new(exe)
            .args([
                "--exact",
                "reaper::tests::reaper_child",
                "--ignored",
                "--nocapture",
            ])
            .env("REAPER_TOKEN", &token)
            .spawn()
            .expect("the test binary");
        eventually_blocking("the child's sleeper", Duration::from_secs(60), || {
            anyhow::ensure!(!processes_with(&token).is_empty(), "not started");
            Ok(())
        })
        .expect("started");
        child.kill().expect("SIGKILL to the child");
        child.wait().expect("reaped");
        eventually_blocking("the sleeper killed", Duration::from_secs(60), || {
            let left = processes_with(&token);
            anyhow::ensure!(left.is_empty(), "still running: {left:?}");
            Ok(())
        })
        .expect("the reaper killed the group");
    }

    /// Run only by the test above: starts a group and waits to be killed.
    #[test]
    #[ignore = "run by a_group_left_open_by_a_killed_test_process_is_killed"]
    fn reaper_child() {
        let Ok(token) = std::env::var("REAPER_TOKEN") else {
            return;
        };
        let mut command = Command::new("sh");
        command.args(["-c", &format!("sleep 3600; : {token}")]);
        let _sleeper = Process::spawn("sleeper", command).expect("sleeper");
        loop {
            std::thread::park();
        }
    }
}
