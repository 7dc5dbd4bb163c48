//! The driver under the contexts: posts leave from the posting thread, and
//! contexts opened on one device share its driver.

use crate::*;
use std::time::{Duration, Instant};

fn manual(seed: u64) -> OpenOptions {
    OpenOptions { progress: Progress::Manual, seed: Some(seed), ..OpenOptions::default() }
}

/// Connects `a` and `b` to each other over GID 1 of their contexts (as the
/// integration tests' `common::connect_pair`, which unit tests cannot reach).
fn connect(a: &Qp, b: &Qp) {
    let gid = |q: &Qp| q.pd().context().query_gid(1).unwrap();
    a.connect(&ConnectAttr::new(b.qp_num(), b.initial_psn(), gid(b))).unwrap();
    b.connect(&ConnectAttr::new(a.qp_num(), a.initial_psn(), gid(a))).unwrap();
}

/// Two manual contexts on addresses 1 and 2 of a net of their own, each with
/// a PD, a CQ and an RC QP, the QPs connected to each other.
struct Pair {
    _net: TestNet,
    ctx_a: Context,
    ctx_b: Context,
    pd_a: Pd,
    pd_b: Pd,
    cq_a: Cq,
    a: Qp,
    /// The peer's QP and CQ, kept alive with the pair.
    peer: (Qp, Cq),
}

fn pair(seed: u64) -> Pair {
    let net = TestNet::new();
    let ctx_a = Device::open_with(&net.udp(1), &manual(seed)).unwrap();
    let ctx_b = Device::open_with(&net.udp(2), &manual(seed)).unwrap();
    let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
    let (cq_a, cq_b) = (ctx_a.create_cq(16, None).unwrap(), ctx_b.create_cq(16, None).unwrap());
    let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
    let b = pd_b.create_qp(&QpInit::rc(&cq_b, &cq_b)).unwrap();
    connect(&a, &b);
    Pair { _net: net, ctx_a, ctx_b, pd_a, pd_b, cq_a, a, peer: (b, cq_b) }
}

/// Progresses both contexts until `done` or 5 s pass.
fn progress_until(ctxs: &[&Context], mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() && Instant::now() < deadline {
        for c in ctxs {
            c.progress();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// On a manual context nobody else sends: a post's packet is on the wire
/// when the post returns, with no `progress` on the sender.
#[test]
fn a_post_leaves_from_the_posting_thread() {
    let Pair { _net, ctx_a, ctx_b, pd_a, pd_b, a, peer: _peer, .. } = pair(38);
    let remote = pd_b.reg_mr(8, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = pd_a.reg_mr_with(vec![7; 8], AccessFlags::LOCAL_WRITE).unwrap();

    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    a.post_send(&SendWr::new(1, write, vec![local.sge(0, 8)])).unwrap();
    assert_eq!(ctx_a.link_stats().tx_packets, 1, "the post sent its packet");
    progress_until(&[&ctx_b], || remote.to_vec() == vec![7; 8]);
    assert_eq!(remote.to_vec(), vec![7; 8]);
}

/// Two contexts on one device share its driver: one QPN space, and QPs of
/// the two connect to each other (rdma-core's tests do this); each
/// context's objects stay its own.
#[test]
fn contexts_on_one_device_share_its_driver() {
    let net = TestNet::new();
    let one = Device::open_with(&net.udp(1), &manual(39)).unwrap();
    let two = Device::open_with(&net.udp(1), &manual(39)).unwrap();
    let (pd1, pd2) = (one.alloc_pd(), two.alloc_pd());
    let (cq1, cq2) = (one.create_cq(16, None).unwrap(), two.create_cq(16, None).unwrap());
    let a = pd1.create_qp(&QpInit::rc(&cq1, &cq1)).unwrap();
    let b = pd2.create_qp(&QpInit::rc(&cq2, &cq2)).unwrap();
    assert_ne!(a.qp_num(), b.qp_num(), "one QPN space");
    let wrong = pd2.create_qp(&QpInit::rc(&cq1, &cq1)).err().expect("a CQ of the other context");
    assert!(wrong.to_string().contains("CQ of another context"), "{wrong}");
    connect(&a, &b);

    let remote = pd2.reg_mr(16, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = pd1.reg_mr_with(vec![5; 16], AccessFlags::LOCAL_WRITE).unwrap();
    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    a.post_send(&SendWr::new(9, write, vec![local.sge(0, 16)])).unwrap();
    let mut wc = [WorkCompletion::default()];
    progress_until(&[&one], || remote.to_vec() == vec![5; 16] && cq1.poll(&mut wc) == 1);
    assert_eq!(remote.to_vec(), vec![5; 16]);
    assert_eq!((wc[0].wr_id, wc[0].status), (9, WcStatus::Success));
    assert_eq!(one.link_stats(), two.link_stats(), "one link");
}

/// A second open of a device asks for its driver as the first open made it.
#[test]
fn a_second_open_with_other_options_is_refused() {
    let net = TestNet::new();
    let _first = Device::open_with(&net.udp(1), &manual(40)).unwrap();
    let err = Device::open(&net.udp(1)).err().expect("another progress mode");
    let text = err.to_string();
    let want = format!("{} is open already in this process (Manual progress)", net.udp(1));
    assert!(text.contains(&want), "{text}");
    assert!(text.contains("open it with the same options"), "{text}");
}

/// Completions are taken from the CQ's ring without the driver's lock: a
/// poller gets them while another thread holds the lock.
#[test]
fn a_cq_is_polled_without_the_drivers_lock() {
    let Pair { _net, ctx_a, ctx_b, pd_a, pd_b, cq_a, a, peer: _peer } = pair(41);
    let remote = pd_b.reg_mr(8, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = pd_a.reg_mr_with(vec![3; 8], AccessFlags::LOCAL_WRITE).unwrap();
    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    a.post_send(&SendWr::new(4, write, vec![local.sge(0, 8)])).unwrap();
    let waiting = || ctx_a.driver().lock().engine.cq_len(cq_a.handle());
    progress_until(&[&ctx_a, &ctx_b], || waiting() == 1);
    assert_eq!(waiting(), 1, "the WRITE completed");

    let held = ctx_a.driver().lock();
    let (tx, rx) = std::sync::mpsc::channel();
    let poller = cq_a.clone();
    let t = std::thread::spawn(move || {
        let mut wc = [WorkCompletion::default()];
        let _ = tx.send((poller.poll(&mut wc), wc[0].wr_id));
    });
    let got = rx.recv_timeout(Duration::from_secs(10));
    drop(held);
    t.join().unwrap();
    assert_eq!(got.expect("the poll returned while the lock was held"), (1, 4));
}
