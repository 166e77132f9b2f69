//! A certificate authority made for one test with the `openssl` command (installed with
//! `apt-get` when missing): a CA certificate, and a server certificate it signed for
//! `localhost` and `127.0.0.1`, each as PEM files in a temporary directory that lives as long
//! as the value.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A fresh CA and a server certificate signed by it.
#[derive(Debug)]
pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// Makes the CA (`ca.pem`, `ca.key`) and a server certificate (`server.pem`, `server.key`)
    /// for `localhost` and `127.0.0.1`, valid for a day. Panics with openssl's output if a step
    /// fails.
    pub fn generate() -> TestCa {
        let openssl = crate::apt::find_or_install("openssl", &["openssl"]);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let run = |args: &[&str]| {
            let output = Command::new(&openssl)
                .args(args)
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("cannot run openssl: {e}"));
            assert!(
                output.status.success(),
                "openssl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=cancelkit test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        run(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ]);
        std::fs::write(
            dir.path().join("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write server.ext");
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "1",
            "-extfile",
            "server.ext",
        ]);
        TestCa { dir }
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA's certificate (what a client trusts).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server's certificate.
    pub fn cert_file(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The server's private key.
    pub fn key_file(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }
}
