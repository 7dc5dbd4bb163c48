//! rdma_cm's agents (QP1 and its thread) live while IDs use their device,
//! whatever order the handles go in. Alone in its test binary, so that no
//! other test's threads come and go meanwhile.

use std::time::{Duration, Instant};
use uroce_verbs::rdma_cm::*;
use uroce_verbs::*;

const T: Duration = Duration::from_secs(10);

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Threads end shortly after their last handle: wait up to a second.
fn settle(before: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(1);
    while threads() > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    threads()
}

#[test]
fn agents_and_progress_threads_end_with_their_handles() {
    let net = TestNet::new();
    let before = threads();
    for order in 0..4u8 {
        let sch = EventChannel::new().unwrap();
        let listener = sch.create_id(PortSpace::Tcp).unwrap();
        listener.bind_addr((net.ip(2 * order + 1), 7174).into()).unwrap();
        listener.listen(1).unwrap();
        let cch = EventChannel::new().unwrap();
        let client = cch.create_id(PortSpace::Tcp).unwrap();
        let src = (net.ip(2 * order + 2), 0).into();
        client.resolve_addr(Some(src), listener.local_addr().unwrap(), T).unwrap();
        cch.get_cm_event(T).unwrap();
        client.resolve_route(T).unwrap();
        cch.get_cm_event(T).unwrap();
        let ctx = client.context().unwrap();
        let cq = ctx.create_cq(8, None).unwrap();
        client.create_qp(&ctx.alloc_pd(), &QpInit::rc(&cq, &cq)).unwrap();
        client.connect(&ConnParam::default()).unwrap();
        let req = sch.get_cm_event(T).unwrap();
        assert_eq!(req.event, CmEventType::ConnectRequest);
        match order {
            0 => drop((req, listener, sch, client, cch, cq, ctx)),
            1 => drop((cch, ctx, cq, client, sch, req, listener)),
            2 => drop((client, req, cq, ctx, listener, cch, sch)),
            _ => drop((ctx, listener, sch, cq, cch, client, req)),
        }
    }
    assert_eq!(settle(before), before, "an rdma_cm agent or progress thread outlived its handles");
}
