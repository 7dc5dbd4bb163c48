//! The transmit handoff between a poster and a thread holding the path.

use crate::*;
use std::time::{Duration, Instant};

/// On a manual context, a packet posted while another thread runs a round
/// (holds the transmit buffers) leaves when that thread lets go, with no
/// further `progress` on the sender: the peer alone, progressing, gets it.
#[test]
fn a_post_during_a_round_leaves_when_the_round_ends() {
    let opts = OpenOptions { progress: Progress::Manual, seed: Some(37), ..OpenOptions::default() };
    let ctx_a = Device::open_with("udp:127.0.37.1", &opts).unwrap();
    let ctx_b = Device::open_with("udp:127.0.37.2", &opts).unwrap();
    let (pd_a, pd_b) = (ctx_a.alloc_pd(), ctx_b.alloc_pd());
    let (cq_a, cq_b) = (ctx_a.create_cq(16, None).unwrap(), ctx_b.create_cq(16, None).unwrap());
    let a = pd_a.create_qp(&QpInit::rc(&cq_a, &cq_a)).unwrap();
    let b = pd_b.create_qp(&QpInit::rc(&cq_b, &cq_b)).unwrap();
    a.connect(&ConnectAttr::new(b.qp_num(), b.initial_psn(), ctx_b.query_gid(1).unwrap())).unwrap();
    b.connect(&ConnectAttr::new(a.qp_num(), a.initial_psn(), ctx_a.query_gid(1).unwrap())).unwrap();
    let remote = pd_b.reg_mr(8, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = pd_a.reg_mr_with(vec![7; 8], AccessFlags::LOCAL_WRITE).unwrap();

    let round = ctx_a.shared().tx.lock().unwrap();
    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    a.post_send(&SendWr::new(1, write, vec![local.sge(0, 8)])).unwrap();
    assert_eq!(ctx_a.link_stats().tx_packets, 0, "the round holds the path: the post could not send");
    drop(round);
    ctx_a.shared().send_kicked();
    assert_eq!(ctx_a.link_stats().tx_packets, 1, "the round's end sent it");

    let deadline = Instant::now() + Duration::from_secs(5);
    while remote.to_vec() != vec![7; 8] && Instant::now() < deadline {
        ctx_b.progress();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(remote.to_vec(), vec![7; 8]);
}
