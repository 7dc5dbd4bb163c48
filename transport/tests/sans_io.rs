//! The engine is sans-IO: nothing under src/ reads a clock, sleeps, spawns a
//! thread or touches a socket or file. (The simulation's clock is virtual.)

use std::path::Path;

const FORBIDDEN: [&str; 10] = [
    "std::time::Instant",
    "SystemTime",
    "Instant::now",
    "thread::",
    "std::net",
    "UdpSocket",
    "std::fs",
    "std::io::",
    "sleep(",
    "tokio",
];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_clock_no_sleep_no_thread_no_socket() {
    let mut files = Vec::new();
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    assert!(files.len() > 30, "found the sources");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for word in FORBIDDEN {
            assert!(!text.contains(word), "{} mentions {word}", f.display());
        }
    }
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).unwrap().split("\n[").next().unwrap();
    let names: Vec<&str> =
        deps.lines().filter_map(|l| l.split(['.', ' ', '=']).next()).filter(|n| !n.is_empty()).collect();
    assert_eq!(names, ["crc32fast", "rand", "rand_chacha"], "no I/O crate among the dependencies");
}
