//! `rediss://` against TLS-only `redis-server` instances: a private CA,
//! client certificates, and clear errors on a wrong CA or host name.

use crate::harness::tls::Certs;
use crate::harness::{RedisServer, Redlock, lock_key, unique_key};

fn tls_server(certs: &Certs, cert: &str, client_certs: bool) -> RedisServer {
    let args = certs.server_args(cert, client_certs);
    RedisServer::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn a_private_ca_from_the_flag_or_the_environment() {
    let certs = Certs::make();
    let server = tls_server(&certs, "server", false);
    let key = unique_key("tls");
    let ca = certs.path("ca.pem").display().to_string();
    let out = Redlock::new(&server.url()).args(["--tls-ca", &ca, "acquire", "--key", &key]).run();
    out.expect(0);
    assert_eq!(server.get(&lock_key(&key)).as_deref(), Some(out.line()));
    Redlock::new(&server.url())
        .env("REDLOCK_TLS_CA", &ca)
        .args(["release", "--key", &key, "--token", out.line()])
        .run()
        .expect(0);
    assert_eq!(server.get(&lock_key(&key)), None);
}

#[test]
fn client_certificates_when_the_server_asks() {
    let certs = Certs::make();
    let server = tls_server(&certs, "server", true);
    let key = unique_key("mtls");
    let ca = certs.path("ca.pem").display().to_string();
    Redlock::new(&server.url())
        .args(["--tls-ca", &ca, "acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .stderr_has(&format!("acquire {key}: 1 of 1 server failed (quorum 1): "))
        .stderr_has(&format!("{}: ", server.name().replace("127", "rediss://127")));
    let (cert, tls_key) = (certs.path("client.pem"), certs.path("client.key"));
    Redlock::new(&server.url())
        .args(["--tls-ca", &ca, "--tls-cert"])
        .args([&cert])
        .args(["--tls-key"])
        .args([&tls_key])
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(0);
}

#[test]
fn an_unknown_ca_or_a_wrong_host_name_is_a_clear_tls_error() {
    let certs = Certs::make();
    let server = tls_server(&certs, "server", false);
    let key = unique_key("badtls");
    let other = certs.path("other-ca.pem").display().to_string();
    Redlock::new(&server.url())
        .args(["--tls-ca", &other, "acquire", "--wait", "10s", "--key", &key])
        .run()
        .expect(69)
        .stderr_has("TLS error")
        .stderr_has("certificate");
    // The public roots do not know the test CA either.
    Redlock::new(&server.url())
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .stderr_has("TLS error");

    let wrong = tls_server(&certs, "wrong-name", false);
    let ca = certs.path("ca.pem").display().to_string();
    let out =
        Redlock::new(&wrong.url()).args(["--tls-ca", &ca, "acquire", "-n", "--key", &key]).run();
    out.expect(69).stderr_has("TLS error");
    if !out.stderr.to_lowercase().contains("name") {
        out.fail("should say the certificate is not valid for the name");
    }
    assert_eq!(server.get(&lock_key(&key)), None);
}
