//! uroce-stack: what lies under the RoCEv2 transport: Ethernet/IP/UDP framing
//! ([`frame`]), pcap capture files ([`pcap`]) and the links that move frames.
//!
//! This crate knows nothing about queue pairs.

pub mod frame;
pub mod link;
pub mod live;

/// Memory the application owns, registered by pointer (`ibv_reg_mr`'s
/// contract): see [`memory::RawRegion`].
pub mod memory {
    pub use crate::sys::region::{AppBuffer, RawRegion};
}
/// A forked child and its parent's devices.
pub mod fork {
    pub use crate::sys::fork::{forked_within, let_go, on_fork_child};
}
pub mod pcap;
mod sys;
pub mod testnet;
