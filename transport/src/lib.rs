//! uroce-transport: the InfiniBand transport of RoCEv2, sans-IO.
//!
//! - [`wire`]: typed zero-copy views and `Repr`s of every RoCEv2 transport header
//!   and the opcode table.
//! - [`icrc`]: the invariant CRC over IPv4 and IPv6 RoCEv2 packets.
//! - [`Psn`]: the 24-bit packet sequence number.
//!
//! This crate never reads a clock, sleeps or touches a socket.

#![forbid(unsafe_code)]

pub mod icrc;
mod psn;
pub mod wire;

pub use psn::Psn;
pub mod engine;
pub mod sim;
