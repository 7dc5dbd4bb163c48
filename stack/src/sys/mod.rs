//! The only place with `unsafe`: thin wrappers over the Linux calls the links need.

pub mod fd;
pub mod iface;
pub mod mmsg;
pub mod netns;
pub mod packet;
pub mod tap;
pub mod udp;
