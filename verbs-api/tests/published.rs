//! A device's counters published for `uroce devinfo -v`: a running program's
//! within seconds, and a closed one's kept. Its own test binary, as it points
//! the runtime directory (process-wide) at a directory of its own.

use std::time::{Duration, Instant};
use uroce_verbs::*;

const T: Duration = Duration::from_secs(20);

fn sent_pkts(sums: &[(String, u64)]) -> u64 {
    sums.iter().find(|(n, _)| n == "sent_pkts").map_or(0, |(_, v)| *v)
}

#[test]
fn a_running_programs_counters_are_published_and_a_closed_ones_kept() {
    let dir = std::env::temp_dir().join(format!("uroce-published-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("UROCE_RUNTIME_DIR", &dir);
    let net = TestNet::new();
    let (a, b) = (Device::open(&net.udp(1)).unwrap(), Device::open(&net.udp(2)).unwrap());
    let name = a.link_info().name.clone();
    let (a_cq, b_cq) = (a.create_cq(8, None).unwrap(), b.create_cq(8, None).unwrap());
    let a_qp = a.alloc_pd().create_qp(&QpInit::rc(&a_cq, &a_cq)).unwrap();
    let b_pd = b.alloc_pd();
    let b_qp = b_pd.create_qp(&QpInit::rc(&b_cq, &b_cq)).unwrap();
    let target = b_pd.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    a_qp.connect(&ConnectAttr::new(b_qp.qp_num(), b_qp.initial_psn(), Gid::from_ipv4(net.ip(2).octets()))).unwrap();
    b_qp.connect(&ConnectAttr::new(a_qp.qp_num(), a_qp.initial_psn(), Gid::from_ipv4(net.ip(1).octets()))).unwrap();
    let src = a_qp.pd().reg_mr(64, AccessFlags::LOCAL_WRITE).unwrap();
    let wr = SendWr::new(1, WrOp::RdmaWrite { remote_addr: target.addr(), rkey: target.rkey() }, vec![src.sge(0, 64)]);
    a_qp.post_send(&wr).unwrap();
    assert_eq!(a_cq.wait_one(T).unwrap().status, WcStatus::Success);

    // While it runs: its own file, rewritten within a second or so.
    let end = Instant::now() + T;
    let live = loop {
        let (sums, open) = device_counters(&name).unwrap();
        if open == 1 && sent_pkts(&sums) > 0 {
            break sums;
        }
        assert!(Instant::now() < end, "not published: {sums:?}, {open} open");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(sent_pkts(&live) <= a.counters().get(Counter::SentPkts));

    // Closed: what it counted stays, added into the device's file.
    let sent = a.counters().get(Counter::SentPkts);
    drop((a_qp, src, a_cq, a));
    let (sums, open) = device_counters(&name).unwrap();
    assert_eq!((sent_pkts(&sums), open), (sent, 0));
    let _ = std::fs::remove_dir_all(&dir);
}
