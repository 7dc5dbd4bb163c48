//! Multicast on the udp link: UD QPs of three devices (loopback addresses
//! of their own) attached to an IPv4 group; a datagram to the group reaches
//! every attached QP, the sender's device's included, and none detached.

use std::net::Ipv4Addr;
use std::time::Duration;
use uroce_verbs::*;

const T: Duration = Duration::from_secs(10);
const QKEY: u32 = 0x1234_5678;

/// A group no other test uses: 239 and the last three bytes of `net`'s first address.
fn group_of(net: &TestNet) -> Gid {
    let o = net.ip(1).octets();
    Gid::from_ipv4([239, o[1], o[2], o[3]])
}

struct Member {
    _ctx: Context,
    pd: Pd,
    cq: Cq,
    qp: Qp,
    rx: Mr,
}

fn member(dev: &str) -> Member {
    let ctx = Device::open(dev).unwrap();
    let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(64, None).unwrap());
    let qp = pd.create_qp(&QpInit::ud(&cq, &cq)).unwrap();
    let mut c = ConnectAttr::new(0, 0, Gid::default());
    c.qkey = QKEY;
    qp.connect(&c).unwrap();
    let rx = pd.reg_mr(8 * 512, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..8u64 {
        qp.post_recv(&RecvWr { wr_id: i, sg_list: rx.sge(i as usize * 512, 512).into() }).unwrap();
    }
    Member { _ctx: ctx, pd, cq, qp, rx }
}

impl Member {
    fn send(&self, to: Gid, data: &[u8]) {
        let tx = self.pd.reg_mr_with(data.to_vec(), AccessFlags::LOCAL_WRITE).unwrap();
        let mut wr = SendWr::new(99, WrOp::Send, vec![tx.sge(0, data.len() as u32)]);
        wr.ud = Some(UdDest { dgid: to, remote_qpn: MULTICAST_QPN, remote_qkey: QKEY });
        self.qp.post_send(&wr).unwrap();
        assert_eq!(self.cq.wait_one(T).unwrap().status, WcStatus::Success);
    }

    /// The next datagram's bytes (after the GRH), or None within `wait`.
    fn receive(&self, wait: Duration) -> Option<Vec<u8>> {
        let wc = self.cq.wait_one(wait).ok()?;
        assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::Recv));
        let mut data = vec![0; wc.byte_len as usize - GRH_LEN];
        self.rx.read(wc.wr_id as usize * 512 + GRH_LEN, &mut data);
        Some(data)
    }
}

#[test]
fn a_datagram_to_a_group_reaches_every_attached_qp() {
    let net = TestNet::new();
    let group = group_of(&net);
    let (a, b, c) = (member(&net.udp(1)), member(&net.udp(2)), member(&net.udp(3)));
    for m in [&a, &b, &c] {
        m.qp.attach_mcast(group).unwrap();
    }
    a.send(group, b"to the group");
    for (who, m) in [("a (the sender's own QP)", &a), ("b", &b), ("c", &c)] {
        assert_eq!(m.receive(T).as_deref(), Some(&b"to the group"[..]), "{who}");
    }
    c.qp.detach_mcast(group).unwrap();
    a.send(group, b"again");
    assert_eq!(b.receive(T).as_deref(), Some(&b"again"[..]));
    assert_eq!(a.receive(T).as_deref(), Some(&b"again"[..]));
    assert_eq!(c.receive(Duration::from_millis(300)), None, "c left the group");
}

#[test]
fn attach_refuses_what_rdma_core_refuses() {
    let net = TestNet::new();
    let m = member(&net.udp(1));
    let unicast = Gid::from_ip(Ipv4Addr::new(10, 0, 0, 1).into());
    assert_eq!(m.qp.attach_mcast(unicast).unwrap_err().errno(), 22);
    assert_eq!(m.qp.detach_mcast(group_of(&net)).unwrap_err().errno(), 22, "not attached");
    let rc = m.pd.create_qp(&QpInit::rc(&m.cq, &m.cq)).unwrap();
    assert_eq!(rc.attach_mcast(group_of(&net)).unwrap_err().errno(), 22, "not UD");
    let dev = m._ctx.query_device();
    assert_eq!((dev.max_mcast_grp, dev.max_mcast_qp_attach), (8192, 56));
}
