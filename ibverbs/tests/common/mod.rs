//! What the drop-in's test binaries share.

use std::path::PathBuf;

/// The cdylib cargo built beside the running test (in `deps/`), or beside that.
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("deps/");
    [deps, deps.parent().unwrap_or(deps)]
        .iter()
        .map(|d| d.join("liburoce_ibverbs.so"))
        .find(|p| p.exists())
        .expect("cargo builds liburoce_ibverbs.so with the tests")
}
