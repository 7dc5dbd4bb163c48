//! rdma_cm over the loopback udp link: connections that carry SEND, RDMA
//! WRITE and READ with the QP attributes the REQ and REP decide; rejects,
//! unreachable peers and disconnects from either side, each within a
//! bounded time; API errors that name their verb.

use std::net::SocketAddr;
use std::time::Duration;
use uroce_verbs::rdma_cm::*;
use uroce_verbs::*;

const T: Duration = Duration::from_secs(10);

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Port `port` of address `host` of `net`.
fn at(net: &TestNet, host: u8, port: u16) -> SocketAddr {
    (net.ip(host), port).into()
}

fn expect(ch: &EventChannel, want: CmEventType) -> CmEvent {
    let ev = ch.get_cm_event(T).unwrap_or_else(|e| panic!("waiting for {want}: {e}"));
    assert_eq!(ev.event, want, "{ev}");
    ev
}

struct End {
    ch: EventChannel,
    id: CmId,
    cq: Cq,
    pd: Pd,
    qp: Qp,
}

fn params() -> ConnParam {
    ConnParam { responder_resources: 1, initiator_depth: 1, retry_count: 7, rnr_retry_count: 7, ..ConnParam::default() }
}

fn listen(on: SocketAddr) -> (EventChannel, CmId) {
    let ch = EventChannel::new().unwrap();
    let l = ch.create_id(PortSpace::Tcp).unwrap();
    l.bind_addr(on).unwrap();
    l.listen(4).unwrap();
    (ch, l)
}

/// A client ID with its QP, route resolved, not yet connected.
fn client(src: SocketAddr, dst: SocketAddr) -> End {
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(Some(src), dst, T).unwrap();
    expect(&ch, CmEventType::AddrResolved);
    id.resolve_route(T).unwrap();
    expect(&ch, CmEventType::RouteResolved);
    let ctx = id.context().unwrap();
    let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(64, None).unwrap());
    let qp = id.create_qp(&pd, &QpInit::rc(&cq, &cq)).unwrap();
    assert_eq!(qp.state(), QpState::Init);
    End { ch, id, cq, pd, qp }
}

/// The server's side of a CONNECT_REQUEST: a QP on the request's ID.
fn take_request(ch: &EventChannel) -> (End, CmEvent) {
    let ev = expect(ch, CmEventType::ConnectRequest);
    let ctx = ev.id.context().unwrap();
    let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(64, None).unwrap());
    let qp = ev.id.create_qp(&pd, &QpInit::rc(&cq, &cq)).unwrap();
    (End { ch: ch.clone(), id: ev.id.clone(), cq, pd, qp }, ev)
}

fn connect_pair(server_at: SocketAddr, client_at: SocketAddr) -> (End, End, CmId, EventChannel) {
    let (sch, listener) = listen(server_at);
    let c = client(client_at, server_at);
    c.id.connect(&ConnParam { private_data: b"from the client".to_vec(), ..params() }).unwrap();
    let (s, req) = take_request(&sch);
    assert_eq!(&req.param.private_data[..15], b"from the client");
    assert_eq!(req.param.private_data.len(), CONNECT_PRIVATE_DATA_LEN);
    assert_eq!(req.listen_id.as_ref(), Some(&listener));
    assert_eq!(req.param.qp_num, c.qp.qp_num());
    s.id.accept(Some(&ConnParam { private_data: b"from the server".to_vec(), ..params() })).unwrap();
    let est = expect(&c.ch, CmEventType::Established);
    assert_eq!(&est.param.private_data[..15], b"from the server");
    assert_eq!(est.param.qp_num, s.qp.qp_num());
    expect(&sch, CmEventType::Established);
    (c, s, listener, sch)
}

#[test]
fn a_connection_carries_send_write_and_read() {
    let net = TestNet::new();
    let (c, s, _l, _sch) = connect_pair(at(&net, 1, 7174), at(&net, 2, 0));
    // The QPs: each other's numbers, each other's PSNs, READ and WRITE allowed.
    let (ca, sa) = (c.qp.query(), s.qp.query());
    assert_eq!((ca.qp_state, sa.qp_state), (QpState::Rts, QpState::Rts));
    assert_eq!((ca.dest_qp_num, sa.dest_qp_num), (s.qp.qp_num(), c.qp.qp_num()));
    assert_eq!((ca.sq_psn, sa.sq_psn), (sa.rq_psn, ca.rq_psn));
    assert_eq!((ca.max_rd_atomic, ca.max_dest_rd_atomic, sa.max_rd_atomic), (1, 1, 1));
    assert_eq!((ca.retry_cnt, sa.retry_cnt, ca.rnr_retry, sa.rnr_retry), (7, 7, 7, 7));
    assert_eq!((ca.timeout, sa.timeout), (19, 19));
    assert_eq!(ca.path_mtu, sa.path_mtu);
    // The flow label both ends use is the kernel's hash of the two ports.
    let (src, dst) = (c.id.local_addr().unwrap(), c.id.peer_addr().unwrap());
    assert_eq!(dst.port(), 7174);
    let fl = (u32::from(src.port()) * 31 + 7174) & 0xf_ffff;
    assert_eq!((ca.ah_attr.flow_label, sa.ah_attr.flow_label), (fl, fl));
    assert_eq!(s.id.peer_addr(), Some(src));
    assert!(ca.qp_access_flags.contains(AccessFlags::REMOTE_READ));

    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let cbuf = c.pd.reg_mr(4096, rw).unwrap();
    let sbuf = s.pd.reg_mr(4096, rw).unwrap();
    s.qp.post_recv(&RecvWr { wr_id: 1, sg_list: sbuf.sge(0, 64).into() }).unwrap();
    cbuf.write(0, b"ping");
    c.qp.post_send(&SendWr::new(1, WrOp::Send, vec![cbuf.sge(0, 4)])).unwrap();
    assert_eq!(c.cq.wait_one(T).unwrap().status, WcStatus::Success);
    let wc = s.cq.wait_one(T).unwrap();
    assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, 4));
    // The server READs the client's buffer and WRITEs it back elsewhere, as rping does.
    cbuf.write(100, &[7u8; 1000]);
    let read = WrOp::RdmaRead { remote_addr: cbuf.addr() + 100, rkey: cbuf.rkey() };
    s.qp.post_send(&SendWr::new(2, read, vec![sbuf.sge(0, 1000)])).unwrap();
    assert_eq!(s.cq.wait_one(T).unwrap().status, WcStatus::Success);
    let write = WrOp::RdmaWrite { remote_addr: cbuf.addr() + 2000, rkey: cbuf.rkey() };
    s.qp.post_send(&SendWr::new(3, write, vec![sbuf.sge(0, 1000)])).unwrap();
    assert_eq!(s.cq.wait_one(T).unwrap().status, WcStatus::Success);
    let mut back = [0u8; 1000];
    cbuf.read(2000, &mut back);
    assert_eq!(back, [7u8; 1000]);
}

#[test]
fn disconnect_from_the_client_then_timewait_exit() {
    let net = TestNet::new();
    let (c, s, _l, sch) = connect_pair(at(&net, 1, 7174), at(&net, 2, 0));
    c.id.disconnect().unwrap();
    assert_eq!(c.qp.state(), QpState::Err);
    expect(&sch, CmEventType::Disconnected);
    s.id.disconnect().unwrap();
    expect(&c.ch, CmEventType::Disconnected);
    // Timewait: 4.096 us x 2^19, about 2 s; each end's exit comes (within T).
    expect(&c.ch, CmEventType::TimewaitExit);
    expect(&sch, CmEventType::TimewaitExit);
}

#[test]
fn disconnect_from_the_server() {
    let net = TestNet::new();
    let (c, s, _l, sch) = connect_pair(at(&net, 1, 7174), at(&net, 2, 0));
    s.id.disconnect().unwrap();
    expect(&c.ch, CmEventType::Disconnected);
    c.id.disconnect().unwrap();
    expect(&sch, CmEventType::Disconnected);
    // Posting on a disconnected QP flushes.
    c.qp.post_recv(&RecvWr { wr_id: 9, sg_list: vec![].into() }).unwrap();
    assert_eq!(c.cq.wait_one(T).unwrap().status, WcStatus::WrFlushErr);
}

#[test]
fn dropping_a_connected_id_disconnects_its_peer() {
    let net = TestNet::new();
    let (c, s, _l, sch) = connect_pair(at(&net, 1, 7174), at(&net, 2, 0));
    let End { ch, id, qp, .. } = c;
    drop(id);
    expect(&sch, CmEventType::Disconnected);
    // The server answers; nobody is left to hear it, and nothing hangs.
    s.id.disconnect().unwrap();
    drop((qp, ch));
}

#[test]
fn a_rejected_request_says_why_and_carries_private_data() {
    let net = TestNet::new();
    let (sch, _l) = listen(at(&net, 1, 7174));
    let c = client(at(&net, 2, 0), at(&net, 1, 7174));
    c.id.connect(&params()).unwrap();
    let req = expect(&sch, CmEventType::ConnectRequest);
    req.id.reject(b"not today").unwrap();
    let ev = expect(&c.ch, CmEventType::Rejected);
    assert_eq!(ev.status, 28, "consumer defined");
    assert_eq!(&ev.param.private_data[..9], b"not today");
    assert_eq!(ev.to_string(), "RDMA_CM_EVENT_REJECTED status 28 (consumer defined)");
    assert_eq!(c.qp.state(), QpState::Err);
}

#[test]
fn nobody_listening_is_rejected_at_once() {
    let net = TestNet::new();
    // A device answers on address 1, but nothing listens on port 9.
    let (_sch, _l) = listen(at(&net, 1, 7174));
    let c = client(at(&net, 2, 0), at(&net, 1, 9));
    c.id.connect(&params()).unwrap();
    let ev = expect(&c.ch, CmEventType::Rejected);
    assert_eq!(ev.status, 8, "invalid service ID");
    // At once: the one REQ was answered, none was sent again.
    assert_eq!(c.id.context().unwrap().link_stats().tx_packets, 1);
}

#[test]
fn nobody_there_is_unreachable_after_the_retries() {
    let net = TestNet::new();
    // No CM answers on address 9: one REQ, one retry, each waiting 2 x 1024 ms + 1 ms.
    let c = client(at(&net, 2, 0), at(&net, 9, 7174));
    c.id.connect(&ConnParam { cm_response_timeout: 8, max_cm_retries: 1, ..params() }).unwrap();
    let ev = c.ch.get_cm_event(T).unwrap();
    assert_eq!((ev.event, ev.status), (CmEventType::Unreachable, -110));
    // After the retries: the REQ and its one retry went out, nothing more.
    assert_eq!(c.id.context().unwrap().link_stats().tx_packets, 2);
}

#[test]
fn a_wildcard_listener_takes_two_connections() {
    let net = TestNet::new();
    // The listener's device is open before it listens on 0.0.0.0.
    let _dev = Device::open(&net.udp(1)).unwrap();
    let (sch, _l) = listen(addr("0.0.0.0:7175"));
    let mut ends = Vec::new();
    for h in 2..4 {
        let c = client(at(&net, h, 0), at(&net, 1, 7175));
        c.id.connect(&params()).unwrap();
        let (s, req) = take_request(&sch);
        assert_eq!(req.id.local_addr(), Some(at(&net, 1, 7175)));
        s.id.accept(None).unwrap();
        expect(&c.ch, CmEventType::Established);
        expect(&sch, CmEventType::Established);
        ends.push((c, s));
    }
    assert_ne!(ends[0].1.qp.qp_num(), ends[1].1.qp.qp_num());
}

#[test]
fn manual_progress_contexts_connect_while_the_caller_waits() {
    let net = TestNet::new();
    let opts = OpenOptions { progress: Progress::Manual, ..OpenOptions::default() };
    let _s = Device::open_with(&net.udp(1), &opts).unwrap();
    let _c = Device::open_with(&net.udp(2), &opts).unwrap();
    let (c, s, _l, _sch) = connect_pair(at(&net, 1, 7174), at(&net, 2, 0));
    assert_eq!(c.id.context().unwrap().progress_mode(), Progress::Manual);
    assert_eq!((c.qp.state(), s.qp.state()), (QpState::Rts, QpState::Rts));
}

#[test]
fn calls_out_of_order_are_errors_that_name_the_verb() {
    let net = TestNet::new();
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let e = id.connect(&params()).unwrap_err();
    assert!(e.to_string().starts_with("rdma_connect: the ID is in state Idle"), "{e}");
    assert!(id.resolve_route(T).unwrap_err().to_string().starts_with("rdma_resolve_route:"));
    assert!(id.accept(None).unwrap_err().to_string().starts_with("rdma_accept: not a connection request"));
    assert!(id.disconnect().unwrap_err().to_string().starts_with("rdma_disconnect: no connection"));
    assert!(ch.create_id(PortSpace::Ib).unwrap_err().to_string().starts_with("rdma_create_id:"));
    // A port in use.
    id.bind_addr(at(&net, 1, 7174)).unwrap();
    let other = ch.create_id(PortSpace::Tcp).unwrap();
    let e = other.bind_addr(at(&net, 1, 7174)).unwrap_err();
    assert!(matches!(e, Error::Cm { errno: 98, .. }), "{e}");
    // Too much private data.
    let c = client(at(&net, 2, 0), at(&net, 1, 7174));
    let e = c.id.connect(&ConnParam { private_data: vec![0; 57], ..params() }).unwrap_err();
    assert!(e.to_string().contains("57 bytes of private data, at most 56"), "{e}");
    assert!(ch.get_cm_event(Duration::from_millis(10)).is_err(), "no stray event");
}

/// An ID bound to the wildcard address with port 0 gets an ephemeral port
/// searched from a random start, as the kernel's: every new process began
/// at 32768, so of two processes sharing an address that each listened on
/// such a port, the second was refused (EADDRINUSE).
#[test]
fn ephemeral_ports_of_the_wildcard_start_at_random() {
    let ch = EventChannel::new().unwrap();
    let ports: Vec<u16> = (0..8)
        .map(|_| {
            let id = ch.create_id(PortSpace::Tcp).unwrap();
            id.bind_addr("0.0.0.0:0".parse().unwrap()).unwrap();
            id.local_addr().unwrap().port()
        })
        .collect();
    assert!(ports.iter().all(|p| (32768..=60999).contains(p)), "{ports:?}");
    assert!(!ports.iter().all(|p| *p < 32768 + 8), "from the range's start: {ports:?}");
}

/// More REQs than one receive batch, all waiting when the listener's
/// device next runs, reach its CM without a drop: QP1 posts its receives
/// again after each batch. (It had 64 and reposted once a round, which
/// drains many batches: cmtime's 200 connections at once lost most REQs
/// and waited 4 s, the CM's response timeout, for each retry.)
#[test]
fn a_burst_of_requests_reaches_the_listener_without_a_drop() {
    const N: usize = 300;
    let net = TestNet::new();
    let opts = OpenOptions { progress: Progress::Manual, ..OpenOptions::default() };
    let server = Device::open_with(&net.udp(1), &opts).unwrap();
    let client = Device::open_with(&net.udp(2), &opts).unwrap();
    let server_at = at(&net, 1, 7176);
    let sch = EventChannel::new().unwrap();
    let listener = sch.create_id(PortSpace::Tcp).unwrap();
    listener.bind_addr(server_at).unwrap();
    listener.listen(N as i32).unwrap();
    let cch = EventChannel::new().unwrap();
    let mut clients = Vec::new();
    for _ in 0..N {
        let id = cch.create_id(PortSpace::Tcp).unwrap();
        id.resolve_addr(Some(at(&net, 2, 0)), server_at, T).unwrap();
        expect(&cch, CmEventType::AddrResolved);
        id.resolve_route(T).unwrap();
        expect(&cch, CmEventType::RouteResolved);
        clients.push(id);
    }
    let ctx = clients[0].context().unwrap();
    let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(64, None).unwrap());
    let qps: Vec<Qp> = clients.iter().map(|id| id.create_qp(&pd, &QpInit::rc(&cq, &cq)).unwrap()).collect();
    for id in &clients {
        id.connect(&params()).unwrap();
    }
    // The client's device sends its REQs while it waits (no answer can
    // come: the listener's device has not run since).
    assert!(cch.get_cm_event(Duration::from_millis(500)).is_err(), "an event before the listener ran");
    let sctx = listener.context().unwrap();
    let (spd, scq) = (sctx.alloc_pd(), sctx.create_cq(64, None).unwrap());
    let mut accepted = Vec::new();
    for _ in 0..N {
        let ev = expect(&sch, CmEventType::ConnectRequest);
        let qp = ev.id.create_qp(&spd, &QpInit::rc(&scq, &scq)).unwrap();
        ev.id.accept(Some(&params())).unwrap();
        accepted.push((ev.id.clone(), qp));
    }
    let dropped = |c: &Context| c.counters().get(Counter::RcvdNoRecv);
    assert_eq!(dropped(&server), 0, "MADs dropped for want of a receive on the listener's QP1");
    // A manual device runs while its channel is waited on or its progress
    // called: the client's, until its last RTU has left.
    let server_done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            (0..N).for_each(|_| drop(expect(&sch, CmEventType::Established)));
            server_done.store(true, std::sync::atomic::Ordering::Release);
        });
        (0..N).for_each(|_| drop(expect(&cch, CmEventType::Established)));
        let until = std::time::Instant::now() + T;
        while !server_done.load(std::sync::atomic::Ordering::Acquire) && std::time::Instant::now() < until {
            client.progress();
        }
    });
    assert_eq!(dropped(&client), 0, "MADs dropped for want of a receive on the client's QP1");
    assert_eq!(qps.len(), N);
}
