//! rdma_cm: connecting RC QPs by IP address and port, as librdmacm does,
//! with the IB Communication Manager's MADs on QP1 (what the kernel's
//! rdma_cm speaks on RoCEv2, so either end may be the kernel's).
//!
//! The calls are librdmacm's: an [`EventChannel`] (`rdma_create_event_channel`)
//! gives [`CmId`]s (`rdma_create_id`); a server binds, listens and accepts
//! the IDs its CONNECT_REQUEST events carry; a client resolves the address
//! and route, connects, and waits for ESTABLISHED. Either side disconnects.
//! Connecting to a port nobody listens on is REJECTED (status 8, invalid
//! service ID) at once; to a host nobody answers on, UNREACHABLE after the
//! REQ's retries (the kernel's timing, or [`ConnParam::cm_response_timeout`]
//! and [`ConnParam::max_cm_retries`]).
//!
//! Addresses name devices: an ID bound to an IP uses the open [`Context`](crate::Context)
//! whose link has it (or opens `udp:IP`). A device that rdma_cm uses gets
//! QP1, which its driver serves with the CM in its progress rounds, and
//! keeps it while the device is open.
//!
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use uroce_verbs::rdma_cm::*;
//! use uroce_verbs::*;
//! let t = Duration::from_secs(10);
//! // Two loopback addresses (as 127.0.24.1 and 127.0.24.2 would be) no other test uses.
//! let net = TestNet::new();
//! let (server_ip, client_ip) = (net.ip(1), net.ip(2));
//!
//! // The server: listen on port 7471 of its address.
//! let server_ch = EventChannel::new().unwrap();
//! let listener = server_ch.create_id(PortSpace::Tcp).unwrap();
//! let server_at = SocketAddr::from((server_ip, 7471));
//! listener.bind_addr(server_at).unwrap();
//! listener.listen(1).unwrap();
//!
//! // The client: resolve, create the QP, connect.
//! let client_ch = EventChannel::new().unwrap();
//! let client = client_ch.create_id(PortSpace::Tcp).unwrap();
//! client.resolve_addr(Some(SocketAddr::from((client_ip, 0))), server_at, t).unwrap();
//! assert_eq!(client_ch.get_cm_event(t).unwrap().event, CmEventType::AddrResolved);
//! client.resolve_route(t).unwrap();
//! assert_eq!(client_ch.get_cm_event(t).unwrap().event, CmEventType::RouteResolved);
//! let ctx = client.context().unwrap();
//! let cq = ctx.create_cq(16, None).unwrap();
//! client.create_qp(&ctx.alloc_pd(), &QpInit::rc(&cq, &cq)).unwrap();
//! let param = ConnParam { responder_resources: 1, initiator_depth: 1, retry_count: 7, rnr_retry_count: 7,
//!     private_data: b"hi".to_vec(), ..ConnParam::default() };
//! client.connect(&param).unwrap();
//!
//! // The server accepts the request's ID with a QP of its own.
//! let req = server_ch.get_cm_event(t).unwrap();
//! assert_eq!(req.event, CmEventType::ConnectRequest);
//! assert_eq!(&req.param.private_data[..2], b"hi");
//! let sctx = req.id.context().unwrap();
//! let scq = sctx.create_cq(16, None).unwrap();
//! req.id.create_qp(&sctx.alloc_pd(), &QpInit::rc(&scq, &scq)).unwrap();
//! req.id.accept(None).unwrap();
//!
//! assert_eq!(client_ch.get_cm_event(t).unwrap().event, CmEventType::Established);
//! assert_eq!(server_ch.get_cm_event(t).unwrap().event, CmEventType::Established);
//! assert_eq!(client.qp().unwrap().state(), QpState::Rts);
//!
//! // Disconnect from the client; each side hears DISCONNECTED.
//! client.disconnect().unwrap();
//! assert_eq!(server_ch.get_cm_event(t).unwrap().event, CmEventType::Disconnected);
//! req.id.disconnect().unwrap();
//! assert_eq!(client_ch.get_cm_event(t).unwrap().event, CmEventType::Disconnected);
//! ```

mod addr;
mod conn;
mod dispatch;
mod event;
mod id;
mod mcast;
mod qp1;
mod qp_attr;
mod registry;
mod ud;

pub use conn::CONNECT_PRIVATE_DATA_LEN;
pub use event::{libc_errno, CmEvent, CmEventType, ConnParam, EventChannel, RDMA_MAX_INIT_DEPTH, RDMA_MAX_RESP_RES};
pub use id::CmId;
pub use ud::{RDMA_UDP_QKEY, UD_CONNECT_PRIVATE_DATA_LEN};
pub use uroce_transport::cm::{PortSpace, RejReason};

pub(crate) use dispatch::on_event;
pub(crate) use qp1::{Qp1, QP1_REFILL_EVERY};
pub(crate) use registry::{has_ip, note_context};
