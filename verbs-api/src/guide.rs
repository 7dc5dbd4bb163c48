//! Worked examples, each a test that runs (`cargo test -p uroce-verbs --doc`).
//! Each uses its own loopback addresses: RoCEv2 is always UDP port 4791, so two
//! endpoints need two IPs (any 127.x.y.z works, no configuration needed). A
//! program names them (`udp:127.0.20.1`); these examples, being tests, take
//! them from a [`TestNet`](crate::TestNet), a loopback net no other test
//! process uses while it lives.
//!
//! # Two RC QPs: SEND with immediate, RDMA WRITE, READ, CMP_SWAP, FETCH_ADD
//!
//! Two contexts, as two hosts would have; the target never calls anything for
//! the one-sided operations: its progress thread serves them.
//!
//! ```
//! use std::time::Duration;
//! use uroce_verbs::*;
//! let t = Duration::from_secs(10);
//!
//! let net = TestNet::new();
//! let (ctx_a, ctx_b) = (Device::open(&net.udp(1)).unwrap(), Device::open(&net.udp(2)).unwrap());
//! let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
//! let (cq_a, cq_b) = (ctx_a.create_cq(64, None).unwrap(), ctx_b.create_cq(64, None).unwrap());
//! let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
//! let b = pd_b.create_qp(&QpInit::rc(&cq_b, &cq_b)).unwrap();
//! // What ibv_rc_pingpong exchanges over TCP: QPN, PSN, GID (index 1: IPv4).
//! a.connect(&ConnectAttr::new(b.qp_num(), b.initial_psn(), ctx_b.query_gid(1).unwrap())).unwrap();
//! b.connect(&ConnectAttr::new(a.qp_num(), a.initial_psn(), ctx_a.query_gid(1).unwrap())).unwrap();
//!
//! let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
//! let local = pd_a.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
//! let remote = pd_b.reg_mr(4096, rw).unwrap();
//!
//! // SEND with immediate into a posted receive.
//! b.post_recv(&RecvWr { wr_id: 7, sg_list: remote.sge(0, 64).into() }).unwrap();
//! local.write(0, b"ping");
//! a.post_send(&SendWr::new(1, WrOp::SendWithImm { imm: 0x1234 }, local.sge(0, 4))).unwrap();
//! assert_eq!(cq_a.wait_one(t).unwrap().status, WcStatus::Success);
//! let wc = cq_b.wait_one(t).unwrap();
//! assert_eq!((wc.wr_id, wc.opcode, wc.byte_len, wc.imm_data), (7, WcOpcode::Recv, 4, 0x1234));
//! assert!(wc.wc_flags.contains(WcFlags::WITH_IMM));
//!
//! // RDMA WRITE, then READ it back.
//! local.write(100, b"written by A");
//! let write = WrOp::RdmaWrite { remote_addr: remote.addr() + 1000, rkey: remote.rkey() };
//! a.post_send(&SendWr::new(2, write, local.sge(100, 12))).unwrap();
//! assert_eq!(cq_a.wait_one(t).unwrap().status, WcStatus::Success);
//! let read = WrOp::RdmaRead { remote_addr: remote.addr() + 1000, rkey: remote.rkey() };
//! a.post_send(&SendWr::new(3, read, local.sge(2000, 12))).unwrap();
//! assert_eq!(cq_a.wait_one(t).unwrap().opcode, WcOpcode::RdmaRead);
//! let mut back = [0u8; 12];
//! local.read(2000, &mut back);
//! assert_eq!(&back, b"written by A");
//!
//! // FETCH_ADD and CMP_SWAP on an 8-byte counter at the target.
//! remote.write(8, &41u64.to_le_bytes());
//! let add = WrOp::AtomicFetchAdd { remote_addr: remote.addr() + 8, rkey: remote.rkey(), add: 1 };
//! a.post_send(&SendWr::new(4, add, local.sge(3000, 8))).unwrap();
//! assert_eq!(cq_a.wait_one(t).unwrap().status, WcStatus::Success);
//! let mut old = [0u8; 8];
//! local.read(3000, &mut old);
//! assert_eq!(u64::from_le_bytes(old), 41);
//! let cas = WrOp::AtomicCmpSwp { remote_addr: remote.addr() + 8, rkey: remote.rkey(), compare: 42, swap: 100 };
//! a.post_send(&SendWr::new(5, cas, local.sge(3008, 8))).unwrap();
//! assert_eq!(cq_a.wait_one(t).unwrap().status, WcStatus::Success);
//! let mut now = [0u8; 8];
//! remote.read(8, &mut now);
//! assert_eq!(u64::from_le_bytes(now), 100);
//! ```
//!
//! # UD: datagrams with an address handle
//!
//! A UD receive gets the 40-byte GRH in front of the data.
//!
//! ```
//! use std::time::Duration;
//! use uroce_verbs::*;
//! let t = Duration::from_secs(10);
//!
//! let net = TestNet::new();
//! let (ctx_a, ctx_b) = (Device::open(&net.udp(1)).unwrap(), Device::open(&net.udp(2)).unwrap());
//! let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
//! let (cq_a, cq_b) = (ctx_a.create_cq(16, None).unwrap(), ctx_b.create_cq(16, None).unwrap());
//! let a = pd_a.create_qp(&QpInit::ud(&cq_a, &cq_a)).unwrap();
//! let b = pd_b.create_qp(&QpInit::ud(&cq_b, &cq_b)).unwrap();
//! let qkey = 0x1111_1111;
//! for qp in [&a, &b] {
//!     let mut c = ConnectAttr::new(0, 0, Gid::default());
//!     c.qkey = qkey;
//!     qp.connect(&c).unwrap();
//! }
//! let rx = pd_b.reg_mr(GRH_LEN + 64, AccessFlags::LOCAL_WRITE).unwrap();
//! b.post_recv(&RecvWr { wr_id: 1, sg_list: rx.sge(0, (GRH_LEN + 64) as u32).into() }).unwrap();
//!
//! let tx = pd_a.reg_mr_with(b"datagram".to_vec(), AccessFlags::LOCAL_WRITE).unwrap();
//! let ah = pd_a.create_ah(ctx_b.query_gid(1).unwrap());
//! let mut wr = SendWr::new(9, WrOp::Send, tx.sge(0, 8));
//! wr.ud = Some(ah.dest(b.qp_num(), qkey));
//! a.post_send(&wr).unwrap();
//!
//! let wc = cq_b.wait_one(t).unwrap();
//! assert_eq!(wc.status, WcStatus::Success);
//! assert_eq!(wc.byte_len as usize, GRH_LEN + 8);
//! assert_eq!(wc.src_qp, a.qp_num());
//! assert_eq!(&rx.to_vec()[GRH_LEN..GRH_LEN + 8], b"datagram");
//! ```
//!
//! # Event-driven: a completion channel
//!
//! [`CompChannel`](crate::CompChannel) is a file descriptor (an eventfd): register it with epoll or
//! mio, or wait with [`get_cq_event`](crate::CompChannel::get_cq_event). Arm, wait, poll, re-arm.
//!
//! ```
//! use std::os::fd::AsRawFd;
//! use std::time::Duration;
//! use uroce_verbs::*;
//! let t = Duration::from_secs(10);
//!
//! let net = TestNet::new();
//! let (ctx_a, ctx_b) = (Device::open(&net.udp(1)).unwrap(), Device::open(&net.udp(2)).unwrap());
//! let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
//! let channel = ctx_b.create_comp_channel().unwrap();
//! assert!(channel.as_raw_fd() >= 0);
//! let cq_a = ctx_a.create_cq(16, None).unwrap();
//! let cq_b = ctx_b.create_cq(16, Some(&channel)).unwrap();
//! let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
//! let b = pd_b.create_qp(&QpInit::rc(&cq_b, &cq_b)).unwrap();
//! a.connect(&ConnectAttr::new(b.qp_num(), b.initial_psn(), ctx_b.query_gid(1).unwrap())).unwrap();
//! b.connect(&ConnectAttr::new(a.qp_num(), a.initial_psn(), ctx_a.query_gid(1).unwrap())).unwrap();
//!
//! let rx = pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
//! let tx = pd_a.reg_mr_with(vec![1; 64], AccessFlags::LOCAL_WRITE).unwrap();
//! for i in 0..3u64 {
//!     b.post_recv(&RecvWr { wr_id: i, sg_list: rx.sge(0, 64).into() }).unwrap();
//! }
//! let mut got = 0;
//! for i in 0..3u64 {
//!     cq_b.req_notify(false).unwrap();
//!     a.post_send(&SendWr::new(i, WrOp::Send, tx.sge(0, 64))).unwrap();
//!     let fired = channel.get_cq_event(t).unwrap();
//!     assert!(fired == cq_b);
//!     let mut wcs = [cq_a.wait_one(t).unwrap(); 4];
//!     got += fired.poll(&mut wcs);
//! }
//! assert_eq!(got, 3);
//! ```
//!
//! # Memory windows: handing a peer part of a region, and taking it back
//!
//! A region registered with `MW_BIND` can hold windows ([`Mw`](crate::Mw)).
//! A type 2 window is bound by a work request on the QP the peer uses, and
//! answers only that QP; LOCAL_INV (or the peer's SEND_WITH_INV) frees it,
//! and its key then reaches nothing. A type 1 window is bound by
//! [`Qp::bind_mw`](crate::Qp::bind_mw) and serves every QP of its PD.
//!
//! ```
//! use std::time::Duration;
//! use uroce_verbs::*;
//! let t = Duration::from_secs(10);
//!
//! let net = TestNet::new();
//! let (ctx_a, ctx_b) = (Device::open(&net.udp(1)).unwrap(), Device::open(&net.udp(2)).unwrap());
//! let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
//! let (cq_a, cq_b) = (ctx_a.create_cq(16, None).unwrap(), ctx_b.create_cq(16, None).unwrap());
//! let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
//! let b = pd_b.create_qp(&QpInit::rc(&cq_b, &cq_b)).unwrap();
//! a.connect(&ConnectAttr::new(b.qp_num(), b.initial_psn(), ctx_b.query_gid(1).unwrap())).unwrap();
//! b.connect(&ConnectAttr::new(a.qp_num(), a.initial_psn(), ctx_a.query_gid(1).unwrap())).unwrap();
//!
//! // B: a region without remote rights of its own, and a window on its
//! // second half that lets a peer write.
//! let region = pd_b.reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND).unwrap();
//! let mw = pd_b.alloc_mw(MwType::Type2).unwrap();
//! let (bind, rkey) = mw.bind_wr(1, &region, 2048, 2048, AccessFlags::REMOTE_WRITE);
//! b.post_send(&bind).unwrap();
//! assert_eq!(cq_b.wait_one(t).unwrap().opcode, WcOpcode::BindMw);
//!
//! // A writes through the window's key (B would send it the key and address).
//! let src = pd_a.reg_mr_with(b"through a window".to_vec(), AccessFlags::LOCAL_WRITE).unwrap();
//! let write = WrOp::RdmaWrite { remote_addr: region.addr() + 2048, rkey };
//! a.post_send(&SendWr::new(2, write, src.sge(0, 16))).unwrap();
//! assert_eq!(cq_a.wait_one(t).unwrap().status, WcStatus::Success);
//! let mut got = [0u8; 16];
//! region.read(2048, &mut got);
//! assert_eq!(&got, b"through a window");
//!
//! // B takes it back; the same WRITE is now a remote access error.
//! b.post_send(&mw.local_inv_wr(3)).unwrap();
//! assert_eq!(cq_b.wait_one(t).unwrap().opcode, WcOpcode::LocalInv);
//! a.post_send(&SendWr::new(4, write, src.sge(0, 16))).unwrap();
//! assert_eq!(cq_a.wait_one(t).unwrap().status, WcStatus::RemAccessErr);
//! ```
//!
//! # UD over rdma_cm: resolving a service with SIDR
//!
//! A UD ID (`PortSpace::Udp`) connects by asking the server's port for the
//! QP number and Q_Key of its service; ESTABLISHED says them, and the route
//! says where to send.
//!
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use uroce_verbs::rdma_cm::*;
//! use uroce_verbs::*;
//! let t = Duration::from_secs(10);
//!
//! let net = TestNet::new();
//! let server_at = SocketAddr::from((net.ip(1), 7500));
//! let server_ch = EventChannel::new().unwrap();
//! let listener = server_ch.create_id(PortSpace::Udp).unwrap();
//! listener.bind_addr(server_at).unwrap();
//! listener.listen(1).unwrap();
//!
//! let client_ch = EventChannel::new().unwrap();
//! let client = client_ch.create_id(PortSpace::Udp).unwrap();
//! client.resolve_addr(Some(SocketAddr::from((net.ip(2), 0))), server_at, t).unwrap();
//! assert_eq!(client_ch.get_cm_event(t).unwrap().event, CmEventType::AddrResolved);
//! client.resolve_route(t).unwrap();
//! assert_eq!(client_ch.get_cm_event(t).unwrap().event, CmEventType::RouteResolved);
//! let ctx = client.context().unwrap();
//! let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(16, None).unwrap());
//! let qp = client.create_qp(&pd, &QpInit::ud(&cq, &cq)).unwrap(); // ready to send at once
//! client.connect(&ConnParam::default()).unwrap();
//!
//! // The server answers with its own UD QP.
//! let req = server_ch.get_cm_event(t).unwrap();
//! assert_eq!(req.event, CmEventType::ConnectRequest);
//! let sctx = req.id.context().unwrap();
//! let (spd, scq) = (sctx.alloc_pd(), sctx.create_cq(16, None).unwrap());
//! let sqp = req.id.create_qp(&spd, &QpInit::ud(&scq, &scq)).unwrap();
//! let rx = spd.reg_mr(GRH_LEN + 64, AccessFlags::LOCAL_WRITE).unwrap();
//! sqp.post_recv(&RecvWr { wr_id: 1, sg_list: rx.sge(0, (GRH_LEN + 64) as u32).into() }).unwrap();
//! req.id.accept(None).unwrap();
//!
//! let est = client_ch.get_cm_event(t).unwrap();
//! assert_eq!(est.event, CmEventType::Established);
//! assert_eq!((est.param.qp_num, est.param.qkey), (sqp.qp_num(), RDMA_UDP_QKEY));
//! let tx = pd.reg_mr_with(b"resolved".to_vec(), AccessFlags::LOCAL_WRITE).unwrap();
//! let mut wr = SendWr::new(2, WrOp::Send, tx.sge(0, 8));
//! let to = pd.create_ah(client.address_vector().unwrap().dgid);
//! wr.ud = Some(to.dest(est.param.qp_num, est.param.qkey));
//! qp.post_send(&wr).unwrap();
//! assert_eq!(scq.wait_one(t).unwrap().byte_len as usize, GRH_LEN + 8);
//! ```
//!
//! # Multicast: one datagram, every attached QP
//!
//! UD QPs attach to a multicast GID (an IPv4 group is its IPv4-mapped
//! GID); a datagram sent to that GID with QPN [`MULTICAST_QPN`](crate::MULTICAST_QPN)
//! reaches each of them, on every device that joined.
//!
//! ```
//! use std::time::Duration;
//! use uroce_verbs::*;
//! let t = Duration::from_secs(10);
//!
//! let net = TestNet::new();
//! let o = net.ip(1).octets();
//! let group = Gid::from_ipv4([239, o[1], o[2], o[3]]);
//! let mut members = Vec::new();
//! for host in [1, 2] {
//!     let ctx = Device::open(&net.udp(host)).unwrap();
//!     let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(16, None).unwrap());
//!     let qp = pd.create_qp(&QpInit::ud(&cq, &cq)).unwrap();
//!     let mut c = ConnectAttr::new(0, 0, Gid::default());
//!     c.qkey = 0x2222_2222;
//!     qp.connect(&c).unwrap();
//!     let rx = pd.reg_mr(GRH_LEN + 64, AccessFlags::LOCAL_WRITE).unwrap();
//!     qp.post_recv(&RecvWr { wr_id: 1, sg_list: rx.sge(0, (GRH_LEN + 64) as u32).into() }).unwrap();
//!     qp.attach_mcast(group).unwrap();
//!     members.push((ctx, pd, cq, qp, rx));
//! }
//! // The first member sends to the group; both get the datagram.
//! let (_, pd, cq, qp, _) = &members[0];
//! let tx = pd.reg_mr_with(b"to all".to_vec(), AccessFlags::LOCAL_WRITE).unwrap();
//! let mut wr = SendWr::new(7, WrOp::Send, tx.sge(0, 6));
//! wr.ud = Some(pd.create_ah(group).dest(MULTICAST_QPN, 0x2222_2222));
//! qp.post_send(&wr).unwrap();
//! assert_eq!(cq.wait_one(t).unwrap().opcode, WcOpcode::Send);
//! for (_, _, cq, _, rx) in &members {
//!     assert_eq!(cq.wait_one(t).unwrap().byte_len as usize, GRH_LEN + 6);
//!     assert_eq!(&rx.to_vec()[GRH_LEN..GRH_LEN + 6], b"to all");
//! }
//! ```
