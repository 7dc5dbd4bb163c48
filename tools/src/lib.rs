//! The `uroce` command's building blocks, as a library so tests drive them directly.

pub mod common;
pub mod devinfo;
pub mod dump;
pub mod loopback;
pub mod perf;
pub mod pingpong;
pub mod rping;
