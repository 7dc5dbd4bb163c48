//! The `uroce` command's building blocks, as a library so tests drive them directly.

// The doc comments of the flags are the tools' --help texts, written as
// rdma-core and perftest print theirs (`<port>`, `[,mac=MAC]`), not Markdown.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

pub mod common;
pub mod devinfo;
pub mod dump;
pub mod exec;
pub mod ladder_run;
pub mod loopback;
pub mod perf;
pub mod pingpong;
pub mod rping;
