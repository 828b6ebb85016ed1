//! The real binary refuses to start, with one clear line on stderr, when Redis can never
//! work as configured: refused credentials, a refused TLS handshake, unreachable sentinels.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::topology::{free_port, RedisNode, TestCa, TestCluster};

/// Runs the binary with `args` until it exits (at most 30 s) and returns its output.
fn run_binary(args: &[String]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flagpole"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flagpole");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the binary did not stop within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// Asserts a failed start with one stderr line containing one of `needles`.
fn assert_refused(output: &Output, needles: &[&str]) -> String {
    assert!(!output.status.success(), "the binary started");
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    assert!(
        needles.iter().any(|n| stderr.contains(n)),
        "{stderr:?} names none of {needles:?}"
    );
    stderr
}

#[test]
fn a_wrong_password_stops_the_binary() {
    let server = RedisNode::start(&["--requirepass", "right-pw"]);
    let output = run_binary(&[
        "--redis-url".into(),
        format!("redis://:not-the-pw@127.0.0.1:{}", server.port),
    ]);
    let line = assert_refused(&output, &["WRONGPASS", "uthentication"]);
    assert!(
        !line.contains("not-the-pw"),
        "the password is shown: {line}"
    );
}

#[test]
fn a_wrong_password_for_a_cluster_stops_the_binary() {
    let cluster = TestCluster::start_with_password("right-pw");
    let seeds = cluster
        .url()
        .replacen("redis://", "redis://:not-the-pw@", 1);
    let output = run_binary(&[
        "--redis-mode".into(),
        "cluster".into(),
        "--redis-url".into(),
        seeds,
    ]);
    let line = assert_refused(&output, &["uthentication"]);
    assert!(
        !line.contains("not-the-pw"),
        "the password is shown: {line}"
    );
}

#[test]
fn a_refused_tls_handshake_stops_the_binary() {
    let ca = TestCa::new();
    let server = ca.tls_server(&[]);
    // Another CA: the server's certificate does not chain to it.
    let other = TestCa::new();
    let output = run_binary(&[
        "--redis-url".into(),
        format!("rediss://127.0.0.1:{}", server.port),
        "--redis-tls-ca".into(),
        other.path("ca.crt").display().to_string(),
    ]);
    assert_refused(&output, &["certificate", "TLS", "tls"]);
}

#[test]
fn unreachable_sentinels_stop_the_binary() {
    let output = run_binary(&[
        "--redis-mode".into(),
        "sentinel".into(),
        "--redis-sentinel-service".into(),
        "mymaster".into(),
        "--redis-url".into(),
        format!(
            "redis://127.0.0.1:{},127.0.0.1:{}",
            free_port(),
            free_port()
        ),
    ]);
    assert_refused(&output, &["sentinel"]);
}

#[test]
fn sentinel_mode_without_a_service_name_is_refused() {
    let output = run_binary(&[
        "--redis-mode".into(),
        "sentinel".into(),
        "--redis-url".into(),
        "redis://127.0.0.1:1".into(),
    ]);
    assert_refused(&output, &["--redis-sentinel-service"]);
}
