//! The only place with `unsafe`: thin wrappers over the Linux calls the links
//! need, raw access to memory the application registers (`region`), and the
//! scheduling of the threads that move packets (`thread`).

pub mod fd;
pub mod iface;
pub mod mmsg;
pub mod netns;
pub mod packet;
pub mod region;
pub mod tap;
pub mod thread;
pub mod udp;
