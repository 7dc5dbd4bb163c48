//! The InfiniBand Communication Manager as the kernel's rdma_cm speaks it on
//! RoCEv2, sans-IO.
//!
//! CM messages are MADs (class 0x07, version 2, method `Send()`) carried as
//! UD SEND ONLY packets to QP1 with Q_Key 0x80010000. The engine delivers
//! QP1's datagrams like any UD QP's; this module reads and writes the MADs
//! ([`mad`], [`msg`], and the IP addressing of rdma_cm in [`ip`]) and runs
//! the connections' state machine ([`Cm`]: timers, retries, duplicates).

mod api;
mod conn;
mod field;
pub mod ip;
mod machine;
pub mod mad;
pub mod msg;
mod recv;
mod sidr;
pub mod steer;
pub mod timing;

pub use api::{AcceptParams, CmError, CmEvent, CommId, ConnectParams, Outgoing, SidrAnswer, SidrParams, State};
pub use ip::{CmaHdr, PortSpace};
pub use machine::{Cm, CmConfig, CmStats, MAX_CONNS_PER_PEER};
pub use mad::{Mad, MadHeaderRepr, MAD_LEN};
pub use msg::{CmMessage, RejReason};
pub use sidr::SIDR_ANSWER_KEPT;
pub use steer::SteerKey;

/// The QP number of the General Services Interface QP, which carries CM MADs.
pub const GSI_QPN: u32 = 1;
/// The Q_Key of QP1 (`IB_QP1_QKEY`).
pub const GSI_QKEY: u32 = 0x8001_0000;
