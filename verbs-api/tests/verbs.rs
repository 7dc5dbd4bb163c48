//! The verbs API as programs use it: error statuses as on a NIC, list posts that
//! name the failing WR, several threads, ownership, manual progress, bad devices.
//! Each test uses loopback addresses of its own, from a [`TestNet`] (RoCEv2
//! is always port 4791).

use std::time::Duration;
use uroce_verbs::testing::{PairSpec, RcPair};
use uroce_verbs::*;

const T: Duration = Duration::from_secs(10);

/// Two connected RC QPs with deep queues on two devices of a net of their
/// own; `seed` gives their QPNs and PSNs.
fn pair(seed: u64, progress: Progress) -> RcPair {
    RcPair::open(&PairSpec { cq_depth: 1024, max_wr: Some(1024), ..PairSpec::new(seed, progress) })
}

#[test]
fn bad_keys_and_ranges_complete_with_the_nic_statuses() {
    let p = pair(30, Progress::Blocking);
    let local = p.pd_a.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let remote = p.pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    remote.write(0, &[0xee; 64]);

    let mut bad_lkey = local.sge(0, 8);
    bad_lkey.lkey ^= 0xff00;
    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    p.a.post_send(&SendWr::new(1, write, vec![bad_lkey])).unwrap();
    assert_eq!(p.cq_a.wait_one(T).unwrap().status, WcStatus::LocProtErr);

    // The QP is in error now: a fresh pair for the remote checks.
    let p = pair(31, Progress::Blocking);
    let local = p.pd_a.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let remote = p.pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    remote.write(0, &[0xee; 64]);
    let past_end = WrOp::RdmaWrite { remote_addr: remote.addr() + 60, rkey: remote.rkey() };
    p.a.post_send(&SendWr::new(2, past_end, vec![local.sge(0, 8)])).unwrap();
    let wc = p.cq_a.wait_one(T).unwrap();
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::RemAccessErr));
    assert_eq!(wc.status.to_string(), "remote access error");
    assert_eq!(remote.to_vec(), vec![0xee; 64], "the target's memory was touched");
}

#[test]
fn a_resized_cq_holds_the_new_number_and_keeps_what_waits() {
    const EINVAL: i32 = nix::errno::Errno::EINVAL as i32;
    let p = RcPair::open(&PairSpec { cq_depth: 2, ..PairSpec::new(37, Progress::Blocking) });
    let src = p.pd_a.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let dst = p.pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let write = |id| {
        let op = WrOp::RdmaWrite { remote_addr: dst.addr(), rkey: dst.rkey() };
        p.a.post_send(&SendWr::new(id, op, vec![src.sge(0, 8)])).unwrap();
    };
    write(0);
    write(1);
    let deadline = std::time::Instant::now() + T;
    while p.cq_a.pending() < 2 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    // Two wait: a CQ of one would lose one, so the resize is refused.
    let err = p.cq_a.resize(1).unwrap_err();
    assert_eq!(err.errno(), EINVAL, "{err}");
    assert!(err.to_string().contains("ibv_resize_cq") && err.to_string().contains("2 waiting"), "{err}");
    assert_eq!((p.cq_a.cqe(), p.cq_a.pending()), (2, 2));
    let max = p.ctx_a.query_device().max_cqe as usize;
    assert_eq!(p.cq_a.resize(max + 1).unwrap_err().errno(), EINVAL);
    assert_eq!(p.cq_a.resize(0).unwrap_err().errno(), EINVAL);
    p.cq_a.resize(6).unwrap();
    assert_eq!(p.cq_a.cqe(), 6);
    for id in 2..6 {
        write(id);
    }
    let ids: Vec<_> = (0..6).map(|_| p.cq_a.wait_one(T).unwrap()).map(|wc| (wc.wr_id, wc.status)).collect();
    assert_eq!(ids, (0..6).map(|id| (id, WcStatus::Success)).collect::<Vec<_>>());
    assert!(!p.cq_a.overflowed());
}

/// An SRQ's sizes and limit follow rxe's rules in the Rust API as in the
/// drop-in: sizes under 4 grow to 4, nothing past the device, and a limit
/// never past the size, whichever of the two changes; a refused change
/// changes nothing.
#[test]
fn an_srq_is_sized_and_resized_as_on_rxe() {
    const EINVAL: i32 = nix::errno::Errno::EINVAL as i32;
    let p = pair(38, Progress::Blocking);
    let max = p.ctx_a.query_device().max_srq_wr;
    let attr = |max_wr, max_sge| SrqAttr { max_wr, max_sge, srq_limit: 0 };
    assert_eq!(p.pd_a.create_srq(attr(0, 1)).err().map(|e| e.errno()), Some(EINVAL));
    assert_eq!(p.pd_a.create_srq(attr(max + 1, 1)).err().map(|e| e.errno()), Some(EINVAL));
    let srq = p.pd_a.create_srq(attr(1, 0)).unwrap();
    let sizes = |s: &Srq| s.attr().map(|a| (a.max_wr, a.max_sge, a.srq_limit)).unwrap();
    assert_eq!(sizes(&srq), (MIN_SRQ_WR, 1, 0));
    let mr = p.pd_a.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    for id in 0..3 {
        srq.post_recv(&RecvWr { wr_id: id, sg_list: mr.sge(0, 8).into() }).unwrap();
    }
    let err = srq.modify_limit(5).unwrap_err();
    assert!(err.errno() == EINVAL && err.to_string().contains("past the queue's 4"), "{err}");
    assert_eq!(srq.resize(0).unwrap_err().errno(), EINVAL);
    assert_eq!(srq.resize(max + 1).unwrap_err().errno(), EINVAL);
    srq.modify(Some(16), Some(6)).unwrap();
    assert_eq!(sizes(&srq), (16, 1, 6));
    // The armed limit (6) does not fit 4: refused, nothing changed.
    assert_eq!(srq.resize(4).unwrap_err().errno(), EINVAL);
    assert_eq!(sizes(&srq), (16, 1, 6));
    srq.modify(Some(2), Some(0)).unwrap();
    assert_eq!((sizes(&srq), srq.len()), ((MIN_SRQ_WR, 1, 0), 3));
}

/// A QP's sizes past the device's are refused (EINVAL) in the Rust API as
/// in the drop-in, rxe's limits: WRs, SGEs, and 512 bytes inline; with an
/// SRQ the receive queue's sizes are the SRQ's, not checked.
#[test]
fn a_qp_past_the_devices_sizes_is_refused() {
    const EINVAL: i32 = nix::errno::Errno::EINVAL as i32;
    let p = pair(39, Progress::Blocking);
    let dev = p.ctx_a.query_device();
    let with = |cap: QpCap, srq: Option<Srq>| {
        let mut init = QpInit::new(QpType::Rc, &p.cq_a, &p.cq_a);
        (init.cap, init.srq) = (cap, srq);
        p.pd_a.create_qp(&init).map(drop).map_err(|e| e.errno())
    };
    let small = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    assert_eq!(with(QpCap { max_inline_data: MAX_INLINE_DATA + 1, ..small }, None), Err(EINVAL));
    assert_eq!(with(QpCap { max_inline_data: MAX_INLINE_DATA, ..small }, None), Ok(()));
    assert_eq!(with(QpCap { max_send_wr: dev.max_qp_wr + 1, ..small }, None), Err(EINVAL));
    assert_eq!(with(QpCap { max_send_sge: dev.max_sge + 1, ..small }, None), Err(EINVAL));
    let past_the_rq = QpCap { max_recv_wr: dev.max_qp_wr + 1, ..small };
    assert_eq!(with(past_the_rq, None), Err(EINVAL));
    let srq = p.pd_a.create_srq(SrqAttr { max_wr: 4, max_sge: 1, srq_limit: 0 }).unwrap();
    assert_eq!(with(past_the_rq, Some(srq)), Ok(()));
}

#[test]
fn list_posts_name_the_failing_request() {
    let p = pair(32, Progress::Blocking);
    let mr = p.pd_a.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let ok = RecvWr { wr_id: 1, sg_list: mr.sge(0, 8).into() };
    let too_many = RecvWr { wr_id: 2, sg_list: vec![mr.sge(0, 1); 100].into() };
    let err = p.a.post_recv_list(&[ok.clone(), ok, too_many]).unwrap_err();
    assert_eq!(err.index, 2);
    assert!(err.to_string().contains("ibv_post_recv"), "{err}");
}

#[test]
fn modify_errors_say_which_state_and_attribute() {
    let net = TestNet::new();
    let ctx = Device::open(&net.udp(1)).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(4, None).unwrap();
    let qp = pd.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
    let rtr = QpAttr { qp_state: QpState::Rtr, ..QpAttr::default() };
    let err = qp.modify(&rtr, QpAttrMask::STATE).unwrap_err().to_string();
    assert!(err.starts_with("ibv_modify_qp: "), "{err}");
    assert!(err.contains("RESET") && err.contains("RTR"), "{err}");
    let err = qp.to_rtr(&ConnectAttr::new(1, 1, ctx.query_gid(1).unwrap())).unwrap_err().to_string();
    assert!(err.contains("RESET"), "{err}");
    assert_eq!(qp.state(), QpState::Reset);
}

#[test]
fn several_threads_post_and_poll_one_context() {
    let p = pair(34, Progress::Blocking);
    let threads = 4;
    let per_thread = 200u64;
    let rx = p.pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..threads * per_thread {
        p.b.post_recv(&RecvWr { wr_id: i, sg_list: rx.sge(0, 64).into() }).unwrap();
    }
    let tx = p.pd_a.reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let seen = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (qp, tx) = (&p.a, &tx);
            s.spawn(move || {
                for i in 0..per_thread {
                    let wr = SendWr::new(t * per_thread + i, WrOp::Send, vec![tx.sge(0, 16)]);
                    qp.post_send(&wr).unwrap();
                }
            });
        }
        // Two threads poll the receiver's CQ; every WR must show up exactly once.
        let total = (threads * per_thread) as usize;
        let pollers: Vec<_> = (0..2)
            .map(|_| {
                let (cq, seen) = (&p.cq_b, &seen);
                s.spawn(move || {
                    let mut ids = Vec::new();
                    let deadline = std::time::Instant::now() + T;
                    let mut wcs = [WorkCompletion::default(); 16];
                    while seen.load(std::sync::atomic::Ordering::Relaxed) < total
                        && std::time::Instant::now() < deadline
                    {
                        let n = cq.poll(&mut wcs);
                        seen.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                        ids.extend(wcs[..n].iter().map(|w| (w.wr_id, w.status)));
                    }
                    ids
                })
            })
            .collect();
        let mut all: Vec<(u64, WcStatus)> = pollers.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort_by_key(|(id, _)| *id);
        assert!(all.iter().all(|(_, s)| *s == WcStatus::Success));
        let ids: Vec<u64> = all.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, (0..threads * per_thread).collect::<Vec<_>>());
    });
}

#[test]
fn children_keep_their_parents_alive() {
    let p = pair(35, Progress::Blocking);
    let RcPair { ctx_a, ctx_b, pd_a, pd_b, cq_a, a, b, cq_b: _cq_b, net: _net } = p;
    let remote = pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = pd_a.reg_mr_with(vec![5; 64], AccessFlags::LOCAL_WRITE).unwrap();
    // Drop every parent handle the user holds: the QPs and MRs keep them alive.
    drop((ctx_a, ctx_b, pd_a, pd_b));
    let _keep_b = b;
    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    a.post_send(&SendWr::new(1, write, vec![local.sge(0, 64)])).unwrap();
    assert_eq!(cq_a.wait_one(T).unwrap().status, WcStatus::Success);
    assert_eq!(remote.to_vec(), vec![5; 64]);
}

#[test]
fn manual_progress_moves_only_when_asked() {
    let p = pair(36, Progress::Manual);
    let remote = p.pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = p.pd_a.reg_mr_with(vec![9; 64], AccessFlags::LOCAL_WRITE).unwrap();
    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    p.a.post_send(&SendWr::new(1, write, vec![local.sge(0, 64)])).unwrap();
    // The packet left at post time (the poster sends), but nobody receives it
    // at B until B's context progresses.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(remote.to_vec(), vec![0; 64]);
    let mut done = None;
    for _ in 0..10_000 {
        p.ctx_b.progress();
        p.ctx_a.progress();
        let mut wc = [WorkCompletion::default()];
        if p.cq_a.poll(&mut wc) == 1 {
            done = Some(wc[0]);
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    assert_eq!(done.expect("completion with manual progress").status, WcStatus::Success);
    assert_eq!(remote.to_vec(), vec![9; 64]);
}

#[test]
fn bad_devices_say_what_to_do() {
    let err = |spec: &str| Device::open(spec).err().expect("must fail").to_string();
    assert!(err("eth0").contains("expected udp:IP"), "{}", err("eth0"));
    assert!(err("udp:192.0.2.77").contains("not an address of this host"), "{}", err("udp:192.0.2.77"));
    assert!(err("packet:uroce-nope0").contains("no interface named"), "{}", err("packet:uroce-nope0"));
    // A port another socket holds (another process's, say) is in use.
    let net = TestNet::new();
    let holder = std::net::UdpSocket::bind((net.ip(9), 4791)).unwrap();
    assert!(Device::open(&net.udp(9)).err().unwrap().to_string().contains("in use"));
    drop(holder);
    let ctx = Device::open(&net.udp(1)).unwrap();
    assert!(ctx.query_gid(9).unwrap_err().to_string().contains("no GID index 9"));
    assert!(devices().iter().any(|d| d.name == "udp:127.0.0.1"));
}
