//! The engine is sans-IO: nothing under src/ reads a clock, sleeps, spawns a
//! thread or touches a socket or file. Clippy refuses each of those in this
//! crate (transport/clippy.toml: disallowed-methods and disallowed-types, run
//! by CI with -D warnings); this test checks the other way in: no I/O crate
//! among the dependencies.

// It reads the manifest: a test from outside the sans-IO code.
#![allow(clippy::disallowed_methods)]

use std::path::Path;

#[test]
fn no_io_crate_among_the_dependencies() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).unwrap().split("\n[").next().unwrap();
    let names: Vec<&str> = deps
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .filter(|n| !n.is_empty())
        .collect();
    // The authenticated mode's crypto: aws-lc-rs (AES-GMAC; its
    // random-number generator, the one part that reads the OS, is not
    // used) and blake3 built without "std" (no files, mmap or threads);
    // smallvec holds a work request's SGEs in place.
    assert_eq!(
        names,
        ["crc32fast", "smallvec", "crossbeam-queue", "rand", "rand_chacha", "aws-lc-rs", "blake3"],
        "no I/O crate among the dependencies"
    );
    assert!(deps.contains("blake3 = { version = \"1\", default-features = false }"), "blake3 without std");
}

#[test]
fn clippy_refuses_clocks_sleeps_threads_sockets_and_files_here() {
    let conf = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("clippy.toml")).unwrap();
    for path in [
        "std::time::Instant::now",
        "std::time::SystemTime::now",
        "std::thread::sleep",
        "std::thread::spawn",
        "std::fs::File",
        "std::net::UdpSocket",
        "std::net::TcpStream",
    ] {
        assert!(conf.contains(&format!("path = \"{path}\"")), "clippy.toml no longer refuses {path}");
    }
}
