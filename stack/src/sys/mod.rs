//! The only place with `unsafe`: thin wrappers over the Linux calls the links
//! need, and raw access to memory the application registers (`region`).

pub mod epoll;
pub mod fd;
pub mod fork;
pub mod iface;
pub mod mmsg;
pub mod netns;
pub mod packet;
pub mod region;
pub mod shm;
pub mod tap;
pub mod udp;
pub mod unix;
