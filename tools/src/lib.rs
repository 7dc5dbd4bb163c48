//! The `uroce` command's building blocks, as a library so tests drive them directly.

pub mod dump;
