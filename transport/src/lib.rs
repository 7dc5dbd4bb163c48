//! uroce-transport: the InfiniBand transport of RoCEv2, sans-IO.
//!
//! - [`wire`]: typed zero-copy views and `Repr`s of every RoCEv2 transport header
//!   and the opcode table.
//! - [`icrc`]: the invariant CRC over IPv4 and IPv6 RoCEv2 packets.
//! - [`Psn`]: the 24-bit packet sequence number.
//! - [`engine`]: the queue-pair engine (RC, UC, UD), sans-IO.
//! - `sim` (with the feature `sim`): two engines over a simulated, impaired
//!   link with a virtual clock, the QP pair most tests start from, and the
//!   workloads the tests, the goodput table and the retry statistics run.
//!
//! This crate never reads a clock, sleeps or touches a socket
//! (`tests/sans_io.rs` keeps it so).

#![forbid(unsafe_code)]

pub mod icrc;
mod psn;
pub mod wire;

pub use psn::Psn;
mod seed;
pub use seed::Seed;
pub mod engine;
#[cfg(feature = "sim")]
pub mod sim;

pub mod cm;
