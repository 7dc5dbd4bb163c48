//! uroce-stack: what lies under the RoCEv2 transport: Ethernet/IP/UDP framing
//! ([`frame`]), pcap capture files ([`pcap`]) and the links that move frames.
//!
//! This crate knows nothing about queue pairs.

pub mod frame;
pub mod link;
pub mod live;
pub mod pcap;
mod sys;
