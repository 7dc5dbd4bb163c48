//! The verbs API of uroce: the nouns of libibverbs, the ownership of Rust, and
//! no `unsafe` for the user.
//!
//! [`Device::open`] gives a [`Context`], which owns a link (how packets reach a
//! wire) and the transport engine, and drives them on a background thread
//! (busy-polling or blocking, [`Progress`]), so RDMA READ, WRITE and atomics
//! aimed at this process complete without it calling anything. Handles
//! ([`Context`], [`Pd`], [`Mr`], [`Cq`], [`Qp`], [`Srq`], [`Ah`],
//! [`CompChannel`]) are cheap clones over `Arc`; a child keeps its parents
//! alive; dropping the last handle destroys the object.
//!
//! A failed work request is a [`WorkCompletion`] with an error [`WcStatus`], as
//! on a NIC, never undefined behaviour; a refused call is an error naming the
//! verb and the cause.
//!
//! ```
//! use uroce_verbs::*;
//!
//! // Two RC QPs in one process over the loopback udp link. A program names
//! // its address ("udp:127.0.10.1"); a test takes a free one from a TestNet.
//! let net = TestNet::new();
//! let ctx = Device::open(&net.udp(1)).unwrap();
//! let pd = ctx.alloc_pd();
//! let cq = ctx.create_cq(16, None).unwrap();
//! let a = pd.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
//! let b = pd.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
//! let gid = ctx.query_gid(1).unwrap();
//! a.connect(&ConnectAttr::new(b.qp_num(), b.initial_psn(), gid)).unwrap();
//! b.connect(&ConnectAttr::new(a.qp_num(), a.initial_psn(), gid)).unwrap();
//!
//! let src = pd.reg_mr_with(b"hello, RDMA".to_vec(), AccessFlags::LOCAL_WRITE).unwrap();
//! let dst = pd.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
//! a.post_send(&SendWr::new(1, WrOp::RdmaWrite { remote_addr: dst.addr(), rkey: dst.rkey() }, src.sge(0, 11)))
//!     .unwrap();
//! let wc = cq.wait_one(std::time::Duration::from_secs(5)).unwrap();
//! assert_eq!(wc.status, WcStatus::Success);
//! assert_eq!(&dst.to_vec()[..11], b"hello, RDMA");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod channel;
mod context;
mod cq;
mod device;
mod diag;
pub use diag::advice as completion_advice;
mod driver;
mod error;
mod event_fd;
pub mod guide;
mod memory;
mod qp;
pub mod rdma_cm;
mod srq;
#[cfg(feature = "testing")]
pub mod testing;
mod window;

pub use channel::{CompChannel, PacketWatch};
pub use context::{Context, OpenOptions, Progress};
pub use cq::Cq;
pub use device::{devices, node_guid_of, Device, DeviceAttr, PortAttr, PortState};
pub use driver::{device_counters, Stat};
pub use error::{Error, PostError};
pub use memory::{Ah, Mr, Pd};
pub use qp::{ConnectAttr, Qp, QpInit, MAX_INLINE_DATA};
pub use srq::{Srq, MIN_SRQ_WR};
pub use uroce_stack::memory::{AppBuffer, RawRegion};
pub use uroce_stack::testnet::TestNet;
pub use window::{next_key, Mw};

pub use uroce_transport::engine::{
    AccessFlags, AddressVector, Counter, Event, Gid, Mtu, NetworkHdr, QpAttr, QpAttrMask, QpCap, QpState, QpType,
    RecvWr, SendFlags, SendWr, SgList, Sge, SrqAttr, UdDest, WcFlags, WcOpcode, WcStatus, WorkCompletion, WrOp,
    GRH_LEN,
};
pub use uroce_transport::engine::{MwBind, MwType, MULTICAST_QPN};
