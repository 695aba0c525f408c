//! Throw-away certificates made with the real `openssl`: a CA, a server
//! certificate for `127.0.0.1` and a client certificate, valid two days,
//! for servers that require TLS client authentication (etcd started by
//! [`crate::etcd::Etcd::start_tls`]).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// The files `ca.crt`, `server.{crt,key}` and `client.{crt,key}` in a
/// temporary directory (removed on drop).
pub struct Certificates {
    dir: TempDir,
}

impl Certificates {
    /// Makes a CA and the server and client certificates it signs.
    pub fn make() -> Result<Certificates> {
        let dir = tempfile::tempdir()?;
        let days = ["-days", "2"];
        let rsa = ["-newkey", "rsa:2048", "-nodes"];
        openssl(dir.path(), &[&["req", "-x509"][..], &rsa, &days])?;
        for (name, ext) in [
            (
                "server",
                "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
            ),
            ("client", "extendedKeyUsage=clientAuth\n"),
        ] {
            std::fs::write(dir.path().join(format!("{name}.ext")), ext)?;
            let (key, csr, crt) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.crt"),
            );
            let subject = format!("/CN={name}");
            let request = ["req", "-keyout", &key, "-out", &csr, "-subj", &subject];
            openssl(dir.path(), &[&request[..], &rsa])?;
            let ext = format!("{name}.ext");
            let sign = [
                "x509", "-req", "-in", &csr, "-CA", "ca.crt", "-CAkey", "ca.key",
            ];
            let out = ["-CAcreateserial", "-out", &crt, "-extfile", &ext];
            openssl(dir.path(), &[&sign[..], &out, &days])?;
        }
        Ok(Certificates { dir })
    }

    /// The CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The certificate of `who` (`server` or `client`).
    pub fn cert(&self, who: &str) -> PathBuf {
        self.dir.path().join(format!("{who}.crt"))
    }

    /// The private key of `who` (`server` or `client`).
    pub fn key(&self, who: &str) -> PathBuf {
        self.dir.path().join(format!("{who}.key"))
    }
}

/// Runs `openssl` with `parts` joined, in `dir`; the CA request gets its
/// key and subject here.
fn openssl(dir: &Path, parts: &[&[&str]]) -> Result<()> {
    let mut args: Vec<&str> = parts.concat();
    if args[..2] == ["req", "-x509"] {
        args.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=test-ca",
        ]);
    }
    run_openssl(dir, &args)
}

/// `NAME.key` and `NAME.pub` in `dir`: an RSA key pair (the control plane's
/// service-account token signing keys).
pub(crate) fn key_pair(dir: &Path, name: &str) -> Result<()> {
    let (key, public) = (format!("{name}.key"), format!("{name}.pub"));
    run_openssl(dir, &["genrsa", "-out", &key, "2048"])?;
    run_openssl(dir, &["rsa", "-in", &key, "-pubout", "-out", &public])
}

/// Runs `openssl args` in `dir`; a failure carries openssl's words.
fn run_openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let out = crate::tools::command("openssl", "openssl")?
        .args(args)
        .current_dir(dir)
        .output()
        .context("running openssl")?;
    crate::tools::stdout_of(out, &format!("openssl {args:?}")).map(drop)
}
