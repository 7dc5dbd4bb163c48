//! UD IDs over the loopback udp link: `rdma_connect` resolves the service
//! with SIDR, ESTABLISHED carries the server's QPN and Q_Key, datagrams go
//! both ways; refusals and a service nobody serves are UNREACHABLE with the
//! SIDR status; a lost SIDR_REP (the answer repeated) gives one request.

use std::net::SocketAddr;
use std::time::Duration;
use uroce_verbs::rdma_cm::*;
use uroce_verbs::*;

const T: Duration = Duration::from_secs(10);

fn expect(ch: &EventChannel, want: CmEventType) -> CmEvent {
    let ev = ch.get_cm_event(T).unwrap_or_else(|e| panic!("waiting for {want}: {e}"));
    assert_eq!(ev.event, want, "{ev}");
    ev
}

/// An ID's UD QP with a receive region of `slots` datagrams posted.
struct Ud {
    ctx: Context,
    pd: Pd,
    cq: Cq,
    qp: Qp,
    rx: Mr,
}

const SLOT: usize = GRH_LEN + 256;

fn ud_qp(id: &CmId, slots: u64) -> Ud {
    let ctx = id.context().unwrap();
    let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(64, None).unwrap());
    let qp = id.create_qp(&pd, &QpInit::ud(&cq, &cq)).unwrap();
    assert_eq!((qp.state(), qp.query().qkey), (QpState::Rts, RDMA_UDP_QKEY), "ready at once, rdma_cm's Q_Key");
    let rx = pd.reg_mr(SLOT * slots as usize, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..slots {
        qp.post_recv(&RecvWr { wr_id: i, sg_list: rx.sge(i as usize * SLOT, SLOT as u32).into() }).unwrap();
    }
    Ud { ctx, pd, cq, qp, rx }
}

impl Ud {
    fn send(&self, dgid: Gid, qpn: u32, qkey: u32, data: &[u8]) {
        let tx = self.pd.reg_mr_with(data.to_vec(), AccessFlags::LOCAL_WRITE).unwrap();
        let mut wr = SendWr::new(100, WrOp::Send, vec![tx.sge(0, data.len() as u32)]);
        wr.ud = Some(self.pd.create_ah(dgid).dest(qpn, qkey));
        self.qp.post_send(&wr).unwrap();
        assert_eq!(self.cq.wait_one(T).unwrap().status, WcStatus::Success);
    }

    fn receive(&self) -> (WorkCompletion, Vec<u8>) {
        let wc = self.cq.wait_one(T).unwrap();
        assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::Recv));
        let at = wc.wr_id as usize * SLOT + GRH_LEN;
        let mut data = vec![0; wc.byte_len as usize - GRH_LEN];
        self.rx.read(at, &mut data);
        (wc, data)
    }
}

fn listen(on: SocketAddr) -> (EventChannel, CmId) {
    let ch = EventChannel::new().unwrap();
    let l = ch.create_id(PortSpace::Udp).unwrap();
    l.bind_addr(on).unwrap();
    l.listen(4).unwrap();
    (ch, l)
}

fn client(src: SocketAddr, dst: SocketAddr) -> (EventChannel, CmId) {
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Udp).unwrap();
    id.resolve_addr(Some(src), dst, T).unwrap();
    expect(&ch, CmEventType::AddrResolved);
    id.resolve_route(T).unwrap();
    expect(&ch, CmEventType::RouteResolved);
    (ch, id)
}

#[test]
fn a_ud_connect_resolves_the_service_and_datagrams_flow_both_ways() {
    let net = TestNet::new();
    let (server_at, client_at) = (SocketAddr::from((net.ip(1), 7471)), SocketAddr::from((net.ip(2), 0)));
    let (sch, _listener) = listen(server_at);
    let (cch, cid) = client(client_at, server_at);
    let c = ud_qp(&cid, 4);
    cid.connect(&ConnParam { private_data: b"udp hello".to_vec(), ..ConnParam::default() }).unwrap();

    let req = expect(&sch, CmEventType::ConnectRequest);
    assert_eq!(&req.param.private_data[..9], b"udp hello");
    assert_eq!(req.param.private_data.len(), UD_CONNECT_PRIVATE_DATA_LEN);
    assert_eq!(req.id.port_space(), PortSpace::Udp);
    assert_eq!(req.id.peer_addr().map(|a| a.ip()), Some(net.ip(2).into()));
    let s = ud_qp(&req.id, 4);
    req.id.accept(Some(&ConnParam { private_data: b"welcome".to_vec(), ..ConnParam::default() })).unwrap();

    let est = expect(&cch, CmEventType::Established);
    assert_eq!((est.param.qp_num, est.param.qkey), (s.qp.qp_num(), RDMA_UDP_QKEY));
    assert_eq!(&est.param.private_data[..7], b"welcome");
    let av = cid.address_vector().unwrap();
    assert_eq!(av.dgid, Gid::from_ip(net.ip(1).into()));

    c.send(av.dgid, est.param.qp_num, est.param.qkey, b"ping over UD");
    let (wc, data) = s.receive();
    assert_eq!((wc.src_qp, &data[..]), (c.qp.qp_num(), &b"ping over UD"[..]));
    // The server answers the datagram's sender, whose address its ID has.
    let back = req.id.address_vector().unwrap().dgid;
    assert_eq!(back, Gid::from_ip(net.ip(2).into()));
    s.send(back, wc.src_qp, RDMA_UDP_QKEY, b"pong");
    assert_eq!(c.receive().1, b"pong");
    assert!(sch.try_get_cm_event().is_none(), "no ESTABLISHED on the passive side of UD");
    drop(s.ctx);
}

#[test]
fn a_refused_or_unserved_ud_connect_is_unreachable_with_the_sidr_status() {
    let net = TestNet::new();
    let (server_at, client_at) = (SocketAddr::from((net.ip(1), 7472)), SocketAddr::from((net.ip(2), 0)));
    let (sch, _listener) = listen(server_at);
    let (cch, cid) = client(client_at, server_at);
    let _c = ud_qp(&cid, 1);
    cid.connect(&ConnParam::default()).unwrap();
    let req = expect(&sch, CmEventType::ConnectRequest);
    req.id.reject(b"not now").unwrap();
    let ev = expect(&cch, CmEventType::Unreachable);
    assert_eq!((ev.status, &ev.param.private_data[..7]), (2, &b"not now"[..]), "SIDR status 2: rejected");

    // A port nobody listens on: status 1, service ID not supported.
    let (cch, cid) = client(SocketAddr::from((net.ip(2), 0)), SocketAddr::from((net.ip(1), 7999)));
    let _c = ud_qp(&cid, 1);
    cid.connect(&ConnParam::default()).unwrap();
    assert_eq!(expect(&cch, CmEventType::Unreachable).status, 1);
}

#[test]
fn nobody_answering_a_ud_connect_is_unreachable_after_the_retries() {
    let net = TestNet::new();
    let _silent = Device::open(&net.udp(1)).unwrap(); // a device, but no rdma_cm on it
    let (cch, cid) = client(SocketAddr::from((net.ip(2), 0)), SocketAddr::from((net.ip(1), 7473)));
    let _c = ud_qp(&cid, 1);
    // 2 tries of 2 ms each (4.096 us x 2^9).
    cid.connect(&ConnParam { cm_response_timeout: 9, max_cm_retries: 1, ..ConnParam::default() }).unwrap();
    let ev = expect(&cch, CmEventType::Unreachable);
    assert_eq!(ev.status, -libc_errno::ETIMEDOUT);
}

#[test]
fn ud_ids_take_ud_qps_only_and_report_their_attributes() {
    let net = TestNet::new();
    let (_cch, cid) = client(SocketAddr::from((net.ip(2), 0)), SocketAddr::from((net.ip(1), 7474)));
    let ctx = cid.context().unwrap();
    let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(4, None).unwrap());
    let Err(err) = cid.create_qp(&pd, &QpInit::rc(&cq, &cq)) else { panic!("an RC QP on a UD ID") };
    assert_eq!(err.errno(), libc_errno::EINVAL);
    let (attr, mask) = cid.init_qp_attr(QpState::Init).unwrap();
    assert_eq!((attr.qkey, attr.port_num), (RDMA_UDP_QKEY, 1));
    assert!(mask.contains(QpAttrMask::QKEY));
    assert_eq!(cid.init_qp_attr(QpState::Rts).unwrap().0.sq_psn, 0);
    let ch = EventChannel::new().unwrap();
    assert_eq!(ch.create_id(PortSpace::Ib).unwrap_err().errno(), libc_errno::EPROTONOSUPPORT);
}
