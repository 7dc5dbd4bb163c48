//! Issue 8's benchmark harness, the Rust half (`bash bench/run` is the
//! driver): the engine's per-packet cost under callgrind ([`packet_cost`]),
//! the ICRC rate ([`rate`]), small built-in kernel baselines
//! ([`baseline`]) and the results table ([`table`]).

pub mod baseline;
pub mod packet_cost;
pub mod rate;
pub mod table;
