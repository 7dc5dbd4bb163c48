//! Handles dropped in any order: no panic, and every progress thread ends.
//! Alone in its test binary, so no other test's threads come and go meanwhile.

use uroce_verbs::*;

const RW: AccessFlags = AccessFlags(AccessFlags::LOCAL_WRITE.0 | AccessFlags::REMOTE_WRITE.0);

/// Threads of this process (the test harness runs others; count ours).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn handles_dropped_in_any_order_leak_no_thread() {
    let net = TestNet::new();
    let before = threads();
    for order in 0..6u8 {
        let ctx = Device::open(&net.udp(order + 1)).unwrap();
        let pd = ctx.alloc_pd();
        let channel = ctx.create_comp_channel().unwrap();
        let cq = ctx.create_cq(8, Some(&channel)).unwrap();
        cq.req_notify(false).unwrap();
        let mr = pd.reg_mr(64, RW).unwrap();
        let qp = pd.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
        let srq = pd.create_srq(SrqAttr { max_wr: 4, max_sge: 1, srq_limit: 0 }).unwrap();
        let ah = pd.create_ah(ctx.query_gid(1).unwrap());
        match order {
            0 => drop((ctx, pd, channel, cq, mr, qp, srq, ah)),
            1 => drop((ah, srq, qp, mr, cq, channel, pd, ctx)),
            2 => drop((pd, qp, ctx, ah, mr, channel, cq, srq)),
            3 => drop((cq, ctx, mr, channel, srq, pd, ah, qp)),
            4 => drop((channel, srq, ah, ctx, qp, pd, cq, mr)),
            _ => drop((mr, ah, cq, qp, pd, srq, ctx, channel)),
        }
    }
    assert_eq!(threads(), before, "a progress thread outlived its handles");
}
