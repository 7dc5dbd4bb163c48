//! What the transport tests share.

#![allow(dead_code)]

pub mod cm_wire;
