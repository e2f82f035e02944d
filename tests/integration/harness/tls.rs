//! Test certificates made with `openssl`: a CA, a server certificate for
//! 127.0.0.1/localhost, a client certificate, a server certificate for the
//! wrong name, and a second, unrelated CA.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory of PEM files.
pub struct Certs {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl must be installed (apt-get install -y openssl)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Certs {
    /// Makes every file.
    pub fn make() -> Certs {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        for ca_name in ["ca", "other-ca"] {
            openssl(
                d,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-days",
                    "2",
                    "-keyout",
                    &format!("{ca_name}.key"),
                    "-out",
                    &format!("{ca_name}.pem"),
                    "-subj",
                    &format!("/CN=redlock test {ca_name}"),
                ],
            );
        }
        for (name, san) in [
            ("server", "IP:127.0.0.1,DNS:localhost"),
            ("wrong-name", "DNS:wrong.example"),
            ("client", "DNS:redlock-client"),
        ] {
            openssl(
                d,
                &[
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                    "-subj",
                    &format!("/CN={name}"),
                ],
            );
            std::fs::write(d.join(format!("{name}.ext")), format!("subjectAltName={san}\n"))
                .expect("write ext");
            openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{name}.csr"),
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-out",
                    &format!("{name}.pem"),
                    "-extfile",
                    &format!("{name}.ext"),
                ],
            );
        }
        Certs { dir }
    }

    /// A file of the set, e.g. `ca.pem`.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// `redis-server` arguments for a TLS-only server presenting `cert`
    /// (`server` or `wrong-name`), asking clients for certificates or not.
    pub fn server_args(&self, cert: &str, client_certs: bool) -> Vec<String> {
        let p = |f: &str| self.path(f).display().to_string();
        vec![
            "--tls-cert-file".into(),
            p(&format!("{cert}.pem")),
            "--tls-key-file".into(),
            p(&format!("{cert}.key")),
            "--tls-ca-cert-file".into(),
            p("ca.pem"),
            "--tls-auth-clients".into(),
            if client_certs { "yes" } else { "no" }.into(),
        ]
    }
}
