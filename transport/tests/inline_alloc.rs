//! A stream of inline posts allocates nothing per message: the engine copies
//! each one's bytes into a buffer a completed inline WR gave back, and what
//! arrives is each post's own bytes, at its own length.

use core::time::Duration;
use uroce_transport::engine::{Mtu, QpType, SendFlags, SendWr, Sge, WcStatus, WrOp};
use uroce_transport::sim::probe::{poll_all, read_mr};
use uroce_transport::sim::{Pair, QpOptions};

/// Each WRITE lands in a slot of its own in the destination.
const SLOT: u64 = 64;
const POSTS: u64 = 72;
const WARM: u64 = 8;

/// Posts inline WRITE `id` (32 bytes, or 8 every other time: a shorter one
/// after a longer one reuses the longer one's buffer), counting only the
/// post's allocations, runs the pair until it completes and checks what
/// landed. The even ones lend their bytes (the drop-in library's path), the
/// odd ones have the engine gather them from the source region.
fn post_and_check(p: &mut Pair, id: u64) -> u64 {
    let len: u32 = if id % 4 < 2 { 32 } else { 8 };
    let fill = [(id + 1) as u8; 32];
    let sge = Sge { addr: Pair::SRC_ADDR, length: len, lkey: p.src };
    let op = WrOp::RdmaWrite { remote_addr: Pair::DST_ADDR + id * SLOT, rkey: p.dst };
    let mut wr = SendWr::new(id, op, vec![sge]);
    wr.flags = SendFlags::SIGNALED | SendFlags::INLINE;
    let lent = id.is_multiple_of(2);
    if !lent {
        p.sim.engines[0].mr_mut(p.src).unwrap().write(0, &fill[..len as usize]);
    }
    let qpn = p.a.qpn;
    let engine = &mut p.sim.engines[0];
    let counted = allocation_counter::measure(|| {
        let r = if lent {
            engine.post_send_inline(qpn, wr, Some(&fill[..len as usize]))
        } else {
            engine.post_send(qpn, wr)
        };
        r.expect("post");
    });
    p.sim.run_until(1_000_000, Duration::from_millis(50), |_| false);
    let wcs = poll_all(&mut p.sim.engines[0], p.a.send_cq);
    assert!(wcs.len() == 1 && wcs[0].status == WcStatus::Success, "{wcs:?}");
    let landed = read_mr(&p.sim.engines[1], p.dst, (id * SLOT) as usize, 32);
    let mut want = vec![0u8; 32];
    want[..len as usize].copy_from_slice(&fill[..len as usize]);
    assert_eq!(landed, want, "WRITE {id}: its own {len} bytes, nothing after them");
    counted.count_total
}

#[test]
fn inline_posts_allocate_nothing_once_warm() {
    let dst = vec![0; (POSTS * SLOT) as usize];
    let mut p = Pair::new(31, &QpOptions::new(QpType::Rc, Mtu::Mtu1024)).with_regions(vec![0; 64], dst);
    for id in 0..WARM {
        post_and_check(&mut p, id);
    }
    let allocs: Vec<u64> = (WARM..POSTS).map(|id| post_and_check(&mut p, id)).collect();
    assert!(allocs.iter().all(|&n| n == 0), "allocations per inline post: {allocs:?}");
}
