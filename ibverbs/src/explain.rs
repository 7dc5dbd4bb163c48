//! What no RDMA stack gives: with `UROCE_EXPLAIN` set (to anything but `0`),
//! one line on stderr per failed call, saying what happened and what to do.
//! Without it the library is as quiet as rdma-core.

use std::sync::OnceLock;

/// The environment variable that turns the explanations on.
pub const EXPLAIN_ENV: &str = "UROCE_EXPLAIN";

/// Whether explanations are on (`UROCE_EXPLAIN`).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(EXPLAIN_ENV).is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Says on stderr why `verb` failed, if explanations are on.
pub fn explain(verb: &str, why: &str) {
    if enabled() {
        eprintln!("uroce: {verb}: {why}");
    }
}
