//! rdma-core's own test suite (Debian's python3-pyverbs ships it) against
//! the drop-in built with these tests: every test of the vendor-neutral
//! modules passes or skips for a feature uroce lacks; none fails, errors,
//! crashes or hangs (scripts/pyverbs-suite runs them and says which).

mod common;
use common::install_dir;
use std::process::Command;
use uroce_stack::testnet::TestNet;

#[test]
fn rdma_cores_own_tests_pass_or_skip_over_the_drop_in() {
    let dir = install_dir();
    let net = TestNet::new();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pyverbs-suite");
    let out = Command::new("bash")
        .arg(script)
        .env("UROCE_DROPIN_DIR", dir.path())
        .env("UROCE_PYVERBS_IP", net.ip(1).to_string())
        .output()
        .expect("run the suite");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SKIP:") || text.contains(" passed, "), "{text}");
    // The rdmacm module finds the device's network interface (the script
    // gives it one in namespaces of its own) and skips nothing, unless
    // this machine has no user namespaces (then the script says so).
    if let Some(line) = text.lines().find(|l| l.starts_with("pyverbs: test_rdmacm ")) {
        if !text.contains("unshare -Urmn failed") {
            assert!(line.contains("   0 skipped") && !line.contains(" 0 passed"), "{line}");
        }
    }
    // The CQ module skips nothing either: its resize test runs, as on rxe.
    if let Some(line) = text.lines().find(|l| l.starts_with("pyverbs: test_cq ")) {
        assert!(line.contains("   0 skipped") && !line.contains(" 0 passed"), "{line}");
    }
}
