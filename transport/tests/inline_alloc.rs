//! A stream of inline posts allocates nothing per message: the engine copies
//! each one's bytes into a buffer a completed inline WR gave back.

use core::time::Duration;
use uroce_transport::engine::{Mtu, QpType, SendFlags, SendWr, Sge, WcStatus, WrOp};
use uroce_transport::sim::probe::poll_all;
use uroce_transport::sim::{Pair, QpOptions};

const LEN: u32 = 32;

fn inline_write(p: &Pair, id: u64) -> SendWr {
    let sge = Sge { addr: Pair::SRC_ADDR, length: LEN, lkey: p.src };
    let mut wr = SendWr::new(id, WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR, rkey: p.dst }, vec![sge]);
    wr.flags = SendFlags::SIGNALED | SendFlags::INLINE;
    wr
}

/// Posts one inline WRITE (counting only the post's allocations) and runs
/// the pair until it completes.
fn post_and_complete(p: &mut Pair, id: u64, via_caller: bool) -> u64 {
    let wr = inline_write(p, id);
    let data = [id as u8; LEN as usize];
    let qpn = p.a.qpn;
    let engine = &mut p.sim.engines[0];
    let counted = allocation_counter::measure(|| {
        // The drop-in library's path (the caller read the bytes) or the
        // engine's own gather from the SGE's region.
        let r = if via_caller { engine.post_send_inline(qpn, wr, Some(&data)) } else { engine.post_send(qpn, wr) };
        r.expect("post");
    });
    p.sim.run_until(1_000_000, Duration::from_millis(50), |_| false);
    let wcs = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert!(wcs.len() == 1 && wcs[0].status == WcStatus::Success, "{wcs:?}");
    counted.count_total
}

#[test]
fn inline_posts_allocate_nothing_once_warm() {
    let mut p = Pair::new(31, &QpOptions::new(QpType::Rc, Mtu::Mtu1024)).with_regions(vec![7; 4096], vec![0; 4096]);
    for id in 0..8 {
        post_and_complete(&mut p, id, id % 2 == 0);
    }
    let allocs: Vec<u64> = (8..72).map(|id| post_and_complete(&mut p, id, id % 2 == 0)).collect();
    assert!(allocs.iter().all(|&n| n == 0), "allocations per inline post: {allocs:?}");
}
