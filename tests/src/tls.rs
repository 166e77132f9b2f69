//! A certificate authority made for one test, in-process with `rcgen` (aws-lc-rs): a CA
//! certificate, and a server certificate it signed for `localhost` and `127.0.0.1`, each as PEM
//! files in a temporary directory that lives as long as the value. Nothing outside Rust is run.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};

/// How long the certificates are valid, from the moment they are made.
const VALIDITY: Duration = Duration::from_secs(24 * 60 * 60);

/// A fresh CA and a server certificate signed by it.
#[derive(Debug)]
pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// Makes the CA (`ca.pem`, `ca.key`) and a server certificate (`server.pem`, `server.key`)
    /// for `localhost` and `127.0.0.1`, valid for a day. The keys are EC P-256, written as
    /// PKCS#8 PEM (`BEGIN PRIVATE KEY`). Panics if a step fails.
    pub fn generate() -> TestCa {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let now = SystemTime::now();
        let validity = |params: &mut CertificateParams| {
            params.not_before = now.into();
            params.not_after = (now + VALIDITY).into();
        };
        let name = |common_name: &str| {
            let mut name = DistinguishedName::new();
            name.push(DnType::CommonName, common_name);
            name
        };
        let p256 = || KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a P-256 key pair");

        let ca_key = p256();
        let mut ca = CertificateParams::default();
        ca.distinguished_name = name("cancelkit test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut ca);
        let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");

        let server_key = p256();
        let mut server = CertificateParams::default();
        server.distinguished_name = name("localhost");
        server.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().expect("a DNS name")),
            SanType::IpAddress([127, 0, 0, 1].into()),
        ];
        server.is_ca = IsCa::ExplicitNoCa;
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.use_authority_key_identifier_extension = true;
        validity(&mut server);
        let issuer = Issuer::new(ca, &ca_key);
        let server_cert = server
            .signed_by(&server_key, &issuer)
            .expect("the server certificate");

        let write = |file: &str, pem: String| {
            std::fs::write(dir.path().join(file), pem)
                .unwrap_or_else(|e| panic!("write {file}: {e}"));
        };
        write("ca.pem", ca_cert.pem());
        write("ca.key", ca_key.serialize_pem());
        write("server.pem", server_cert.pem());
        write("server.key", server_key.serialize_pem());
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
