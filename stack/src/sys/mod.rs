//! The only place with `unsafe`: thin wrappers over the Linux calls the links need.

pub mod packet;
