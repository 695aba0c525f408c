//! The arm64 images' binaries: skydns, kube2sky and exec-healthz
//! cross-compiled for `aarch64-unknown-linux-musl` the way
//! `scripts/build-release.sh --target` builds them (cargo-zigbuild, zig as
//! the C compiler and linker; debug profile here, for time), are static
//! AArch64 executables, and each runs under qemu's user-mode emulation and
//! prints its version. `scripts/install-deps.sh` installs the rustup
//! target, cargo-zigbuild and qemu-user-static.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "aarch64-unknown-linux-musl";
const BINARIES: [&str; 3] = ["skydns", "kube2sky", "exec-healthz"];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// ELF: 64-bit, little-endian, machine AArch64 (183), and no program
/// header of type PT_INTERP (3): no dynamic loader, a static executable.
fn static_aarch64(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    if u16_at(18) != 183 {
        return Err(format!("machine {} is not AArch64 (183)", u16_at(18)));
    }
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54) as usize, u16_at(56));
    for i in 0..usize::from(phnum) {
        if u32_at(phoff + i * phentsize) == 3 {
            return Err("it names a dynamic loader (PT_INTERP): not static".into());
        }
    }
    Ok(())
}

#[test]
fn the_arm64_binaries_are_static_aarch64_and_print_their_version_under_qemu() {
    // A target directory of its own: the cargo that runs this test may
    // still hold the workspace's, and a build beside it must not wait.
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
        .join("cross");
    let mut build = Command::new("cargo");
    build
        .args(["zigbuild", "--locked", "--target", TARGET])
        .env("CARGO_TARGET_DIR", &target_dir)
        // No debug info: a third of the time and of the disk (3 GB with it).
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .current_dir(repo_root());
    for bin in BINARIES {
        build.args(["--bin", bin]);
    }
    let out = build
        .output()
        .expect("running cargo zigbuild (scripts/install-deps.sh installs it)");
    assert!(
        out.status.success(),
        "cargo zigbuild --target {TARGET}: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    for bin in BINARIES {
        let path = target_dir.join(TARGET).join("debug").join(bin);
        static_aarch64(&path).unwrap_or_else(|e| panic!("{bin}: {e}"));
        let flag = if bin == "kube2sky" {
            "--version"
        } else {
            "-version"
        };
        let out = Command::new("qemu-aarch64-static")
            .arg(&path)
            .arg(flag)
            .output()
            .expect("running qemu-aarch64-static (package qemu-user-static)");
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{bin} {flag} under qemu: {out:?}");
        assert_eq!(
            printed.trim(),
            format!("{bin} {}", env!("CARGO_PKG_VERSION")),
            "{bin} {flag}"
        );
    }
    // The host's own build is not AArch64: the check above can fail.
    let host = std::env::current_exe().expect("this test's own binary");
    assert!(
        static_aarch64(&host).is_err_and(|e| e.contains("not AArch64")),
        "this x86-64 test binary passed"
    );
}
