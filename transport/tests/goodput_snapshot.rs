//! The goodput table is deterministic and matches the committed snapshot.
//! After an intended change: `UPDATE_SNAPSHOTS=1 cargo test -p uroce-transport --test goodput_snapshot`.

// A test from outside the sans-IO crate: it reads and writes its snapshot file.
#![allow(clippy::disallowed_methods)]

use uroce_transport::sim::goodput::table;

const SNAPSHOT: &str = "tests/snapshots/goodput.txt";

#[test]
fn goodput_table_matches_snapshot() {
    let t = table(1);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &t).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(t, want, "goodput table changed; see {SNAPSHOT}");
    assert!(!t.contains("failed"), "{t}");
}
