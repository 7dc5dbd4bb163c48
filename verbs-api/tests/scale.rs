//! Many QPs on one context, an SRQ shared by several QPs, CQ overflow as an
//! async error.

use std::time::Duration;
use uroce_verbs::testing::connect_pair;
use uroce_verbs::*;

const T: Duration = Duration::from_secs(20);
const RW: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0
        | AccessFlags::REMOTE_WRITE.0
        | AccessFlags::REMOTE_READ.0
        | AccessFlags::REMOTE_ATOMIC.0,
);

/// Two contexts on addresses 1 and 2 of `net`.
fn contexts(net: &TestNet) -> (Context, Context) {
    (Device::open(&net.udp(1)).unwrap(), Device::open(&net.udp(2)).unwrap())
}

#[test]
fn sixty_four_qps_on_one_context_transfer_at_once() {
    const QPS: usize = 64;
    const LEN: usize = 64 * 1024;
    let net = TestNet::new();
    let (ctx_a, ctx_b) = contexts(&net);
    let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
    let cq_a = ctx_a.create_cq(4 * QPS, None).unwrap();
    let cq_b = ctx_b.create_cq(4 * QPS, None).unwrap();
    let src =
        pd_a.reg_mr_with((0..QPS * LEN).map(|i| (i * 7 + i / LEN) as u8).collect(), AccessFlags::LOCAL_WRITE).unwrap();
    let dst = pd_b.reg_mr(QPS * LEN, RW).unwrap();
    let rx = pd_b.reg_mr(QPS * 8, AccessFlags::LOCAL_WRITE).unwrap();
    let pairs: Vec<(Qp, Qp)> = (0..QPS)
        .map(|_| {
            let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
            let b = pd_b.create_qp(&QpInit::rc(&cq_b, &cq_b)).unwrap();
            connect_pair(&a, &b);
            (a, b)
        })
        .collect();
    // Every QP: a 64 KiB WRITE, then a SEND that tells the target it is there.
    for (i, (a, b)) in pairs.iter().enumerate() {
        b.post_recv(&RecvWr { wr_id: i as u64, sg_list: rx.sge(i * 8, 8).into() }).unwrap();
        let write = WrOp::RdmaWrite { remote_addr: dst.addr() + (i * LEN) as u64, rkey: dst.rkey() };
        a.post_send(&SendWr::new(i as u64, write, vec![src.sge(i * LEN, LEN as u32)])).unwrap();
        a.post_send(&SendWr::new(1000 + i as u64, WrOp::Send, vec![src.sge(i * LEN, 8)])).unwrap();
    }
    let mut sender_done = 0;
    while sender_done < 2 * QPS {
        assert_eq!(cq_a.wait_one(T).unwrap().status, WcStatus::Success);
        sender_done += 1;
    }
    let mut qps_seen = std::collections::BTreeSet::new();
    for _ in 0..QPS {
        let wc = cq_b.wait_one(T).unwrap();
        assert_eq!(wc.status, WcStatus::Success);
        qps_seen.insert(wc.qp_num);
    }
    assert_eq!(qps_seen.len(), QPS, "every QP delivered");
    assert!(src.to_vec() == dst.to_vec(), "64 x 64 KiB arrived byte-exact");
}

#[test]
fn an_srq_feeds_several_qps_and_raises_its_limit_event() {
    let net = TestNet::new();
    let (ctx_a, ctx_b) = contexts(&net);
    let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
    let cq_a = ctx_a.create_cq(64, None).unwrap();
    let cq_b = ctx_b.create_cq(64, None).unwrap();
    let srq = pd_b.create_srq(SrqAttr { max_wr: 64, max_sge: 1, srq_limit: 0 }).unwrap();
    let rx = pd_b.reg_mr(32 * 16, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..32u64 {
        srq.post_recv(&RecvWr { wr_id: i, sg_list: rx.sge(i as usize * 16, 16).into() }).unwrap();
    }
    srq.modify_limit(8).unwrap();
    let tx = pd_a.reg_mr_with(vec![3; 16], AccessFlags::LOCAL_WRITE).unwrap();
    let mut pairs = Vec::new();
    for _ in 0..4 {
        let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
        let mut init = QpInit::rc(&cq_b, &cq_b);
        init.srq = Some(srq.clone());
        let b = pd_b.create_qp(&init).unwrap();
        connect_pair(&a, &b);
        pairs.push((a, b));
    }
    for (a, _) in &pairs {
        for i in 0..7u64 {
            a.post_send(&SendWr::new(i, WrOp::Send, vec![tx.sge(0, 16)])).unwrap();
        }
    }
    let mut by_qp = std::collections::BTreeMap::new();
    for _ in 0..28 {
        let wc = cq_b.wait_one(T).unwrap();
        assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, 16));
        *by_qp.entry(wc.qp_num).or_insert(0) += 1;
    }
    assert_eq!(by_qp.values().collect::<Vec<_>>(), vec![&7, &7, &7, &7]);
    assert_eq!(srq.len(), 4);
    let event = ctx_b.get_async_event(T).unwrap();
    assert!(matches!(event, Event::SrqLimitReached { .. }), "{event:?}");
}

#[test]
fn cq_overflow_is_an_async_error_not_a_panic() {
    let net = TestNet::new();
    let (ctx_a, ctx_b) = contexts(&net);
    let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
    let cq_a = ctx_a.create_cq(64, None).unwrap();
    let small = ctx_b.create_cq(4, None).unwrap();
    let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
    let b = pd_b.create_qp(&QpInit::rc(&small, &small)).unwrap();
    connect_pair(&a, &b);
    let rx = pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..10 {
        b.post_recv(&RecvWr { wr_id: i, sg_list: rx.sge(0, 64).into() }).unwrap();
    }
    let tx = pd_a.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..10 {
        a.post_send(&SendWr::new(i, WrOp::Send, vec![tx.sge(0, 8)])).unwrap();
    }
    let mut event = ctx_b.get_async_event(T).unwrap();
    while !matches!(event, Event::CqError { .. }) {
        event = ctx_b.get_async_event(T).unwrap();
    }
    assert!(small.overflowed());
}
