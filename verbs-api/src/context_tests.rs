//! The driver under the contexts: posts leave from the posting thread, and
//! contexts opened on one device share its driver.

use crate::testing::{connect_pair, PairSpec, RcPair};
use crate::*;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

fn manual(seed: u64) -> OpenOptions {
    OpenOptions { progress: Progress::Manual, seed: Some(seed), ..OpenOptions::default() }
}

fn pair(seed: u64) -> RcPair {
    RcPair::open(&PairSpec::new(seed, Progress::Manual))
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
    let RcPair { ctx_a, ctx_b, pd_a, pd_b, a, b: _b, cq_b: _cq_b, net: _net, .. } = pair(38);
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
    connect_pair(&a, &b);

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

/// Each context of a device reads the asynchronous events of its own
/// objects on its own descriptor, as each `ibv_context` does on the kernel.
#[test]
fn each_context_of_a_device_gets_its_own_objects_async_events() {
    let net = TestNet::new();
    let one = Device::open_with(&net.udp(1), &manual(41)).unwrap();
    let two = Device::open_with(&net.udp(1), &manual(41)).unwrap();
    assert_ne!(one.async_fd().as_raw_fd(), two.async_fd().as_raw_fd());
    let (pd1, pd2) = (one.alloc_pd(), two.alloc_pd());
    let (cq1, cq2) = (one.create_cq(1, None).unwrap(), two.create_cq(16, None).unwrap());
    let a = pd1.create_qp(&QpInit::rc(&cq1, &cq1)).unwrap();
    let b = pd2.create_qp(&QpInit::rc(&cq2, &cq2)).unwrap();
    connect_pair(&a, &b);
    // A WRITE past the end of b's region: b (of `two`) raises an access
    // error; a's two failed completions overflow its CQ of one (of `one`).
    let remote = pd2.reg_mr(16, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = pd1.reg_mr_with(vec![5; 16], AccessFlags::LOCAL_WRITE).unwrap();
    let past_end = WrOp::RdmaWrite { remote_addr: remote.addr() + 12, rkey: remote.rkey() };
    a.post_send(&SendWr::new(1, past_end, vec![local.sge(0, 8)])).unwrap();
    a.post_send(&SendWr::new(2, past_end, vec![local.sge(0, 8)])).unwrap();
    progress_until(&[&one, &two], || cq1.overflowed());
    let events = |ctx: &Context| std::iter::from_fn(|| ctx.poll_async_event()).collect::<Vec<_>>();
    let (to_one, to_two) = (events(&one), events(&two));
    assert_eq!(to_two, [Event::QpAccessError { qpn: b.qp_num() }], "{to_one:?}");
    assert!(to_one.contains(&Event::CqError { cq: cq1.handle() }), "{to_one:?}");
    assert!(to_one.iter().all(|e| !matches!(e, Event::QpAccessError { .. })), "{to_one:?}");
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
    let RcPair { ctx_a, ctx_b, pd_a, pd_b, cq_a, a, b: _b, cq_b: _cq_b, net: _net } = pair(41);
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

/// A QP destroyed between a round's receive and its send (by a program that
/// saw its completion in between, as ibv_rc_pingpong's last message) sends
/// the ACKs it owes first: the peer's request completes instead of
/// retrying into RETRY_EXC_ERR.
#[test]
fn a_destroyed_qp_sends_the_acks_it_owes_first() {
    let RcPair { ctx_a, ctx_b, pd_a, pd_b, cq_a, a, b, cq_b: _cq_b, net: _net } = pair(43);
    let remote = pd_b.reg_mr(8, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = pd_a.reg_mr_with(vec![9; 8], AccessFlags::LOCAL_WRITE).unwrap();
    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    a.post_send(&SendWr::new(6, write, vec![local.sge(0, 8)])).unwrap();

    // b's half of a round: the WRITE taken in, its ACK queued, not sent.
    let driver = ctx_b.driver();
    let taken = driver.lock().receive(|| driver.now(), Duration::from_secs(5));
    assert_eq!(taken, 1, "the WRITE arrived");
    assert_eq!(remote.to_vec(), vec![9; 8]);
    drop(b);

    let mut wc = [WorkCompletion::default()];
    progress_until(&[&ctx_a], || cq_a.poll(&mut wc) == 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (6, WcStatus::Success), "the ACK came before b went");
}

/// Posts on a QP with a stream of request packets unacknowledged leave in
/// full batches, the rest with the next round; posts before it (a
/// ping-pong's) and posts on another QP leave at once.
#[test]
fn posts_behind_a_stream_leave_in_full_batches() {
    const BATCH: u64 = 32; // the driver's transmit batch
    let mut spec = PairSpec::new(44, Progress::Manual);
    (spec.cq_depth, spec.max_wr) = (128, Some(64));
    let RcPair { ctx_a, ctx_b, pd_a, pd_b, cq_a, a, b: _b, cq_b: _cq_b, net: _net } = RcPair::open(&spec);
    let remote = pd_b.reg_mr(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let local = pd_a.reg_mr_with(vec![1; 64], AccessFlags::LOCAL_WRITE).unwrap();
    let sent = || ctx_a.link_stats().tx_packets;
    let post = |id: u64| {
        let write = WrOp::RdmaWrite { remote_addr: remote.addr() + id % 64, rkey: remote.rkey() };
        a.post_send(&SendWr::new(id, write, vec![local.sge(0, 1)])).unwrap();
    };
    // b takes nothing in, so nothing is acknowledged: the stream builds up.
    for id in 0..8 {
        post(id);
        assert_eq!(sent(), id + 1, "post {id} left at once");
    }
    for id in 8..8 + BATCH - 1 {
        post(id);
    }
    assert_eq!(sent(), 8, "posts behind 8 packets in flight wait for a full batch");
    post(8 + BATCH - 1);
    assert_eq!(sent(), 8 + BATCH, "a full batch left");
    post(8 + BATCH);
    assert_eq!(sent(), 8 + BATCH);
    ctx_a.progress();
    assert_eq!(sent(), 8 + BATCH + 1, "the round sent the rest");
    post(8 + BATCH + 1);
    assert_eq!(sent(), 8 + BATCH + 1);

    // Another QP's post, with nothing of its own in flight, leaves at once
    // (and what waited in the batch with it).
    let (cq_a2, cq_b2) = (ctx_a.create_cq(4, None).unwrap(), ctx_b.create_cq(4, None).unwrap());
    let a2 = pd_a.create_qp(&QpInit::rc(&cq_a2, &cq_a2)).unwrap();
    let b2 = pd_b.create_qp(&QpInit::rc(&cq_b2, &cq_b2)).unwrap();
    connect_pair(&a2, &b2);
    let write = WrOp::RdmaWrite { remote_addr: remote.addr(), rkey: remote.rkey() };
    a2.post_send(&SendWr::new(99, write, vec![local.sge(0, 1)])).unwrap();
    assert_eq!(sent(), 8 + BATCH + 3, "a post on a QP with nothing in flight");

    let mut done = 0;
    let mut wc = [WorkCompletion::default(); 16];
    progress_until(&[&ctx_a, &ctx_b], || {
        let n = cq_a.poll(&mut wc);
        assert!(wc[..n].iter().all(|w| w.status == WcStatus::Success), "{:?}", &wc[..n]);
        done += n;
        done == (8 + BATCH + 2) as usize
    });
    assert_eq!(done, (8 + BATCH + 2) as usize, "every WRITE completed");
}

/// A program that polls and then arms a CQ waits for an event that only the
/// progress thread delivers: on a busy-poll device the arm ends what keeps
/// the progress thread dozing (`app_is_helping`: an application thread
/// polled within 200 us), so that it watches the link again instead of
/// dozing on for 1 ms turns. (That the arm also rings the doorbell of a
/// thread already dozing is `Driver::arm`'s, shared with blocking mode.)
#[test]
fn an_arm_ends_what_keeps_a_busy_poll_thread_dozing() {
    let pair = RcPair::open(&PairSpec::new(41, Progress::BusyPoll));
    let driver = pair.ctx_a.driver();
    // A polling round counts for a while (200 us); a thread descheduled
    // between the round and the look tries again.
    let polling = (0..1000).any(|_| {
        driver.help();
        driver.app_is_helping()
    });
    assert!(polling, "a polling round starts the doze");
    let channel = pair.ctx_a.create_comp_channel().unwrap();
    let cq = pair.ctx_a.create_cq(4, Some(&channel)).unwrap();
    driver.help();
    cq.req_notify(false).unwrap();
    assert!(!driver.app_is_helping(), "an arm ends it");
}

/// A blocking progress thread that just moved packets spins a moment
/// instead of sleeping, so that a responder whose application does not poll
/// (read_lat's) answers the next request without a wake-up; not while an
/// application thread polls, which takes the packets itself.
#[test]
fn a_blocking_thread_spins_after_moving_packets_only_when_serving_alone() {
    let pair = RcPair::open(&PairSpec::new(43, Progress::Blocking));
    let driver = pair.ctx_a.driver();
    // Packets moved "now" whatever the clock reads when it looks (a moment
    // later than `u64::MAX` ns is still within the spin).
    let moved_now = u64::MAX;
    // No application round or post in the last 200 us (the pair's setup
    // posted its modifies): it spins.
    std::thread::sleep(Duration::from_millis(1));
    assert!(driver.serves_alone(moved_now), "packets moved a moment ago, nobody else polls");
    assert!(!driver.serves_alone(0), "nothing moved: it sleeps");
    // A round or a post counts for 200 us: a thread descheduled for longer
    // between the act and the look tries again.
    let polled = (0..1000).any(|_| {
        driver.help();
        !driver.serves_alone(moved_now)
    });
    assert!(polled, "an application thread polls: it sleeps");
    // The same for a thread that posts (its polls may all find completions).
    std::thread::sleep(Duration::from_millis(1));
    let rx = pair.pd_a.reg_mr(8, AccessFlags::LOCAL_WRITE).unwrap();
    let post_recv = |wr_id| pair.a.post_recv(&RecvWr { wr_id, sg_list: rx.sge(0, 8).into() }).unwrap();
    let posted = (0..32).any(|i| {
        post_recv(i);
        !driver.serves_alone(moved_now)
    });
    assert!(posted, "an application thread posts: it sleeps");

    // A thread waiting for the lock to post (held here, as the spinning
    // thread holds it round after round) stops it before it has the lock.
    std::thread::sleep(Duration::from_millis(1));
    assert!(driver.serves_alone(moved_now));
    let held = driver.lock();
    std::thread::scope(|scope| {
        scope.spawn(|| post_recv(99));
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut poster_seen = false;
        while !poster_seen && Instant::now() < deadline {
            poster_seen = !driver.serves_alone(moved_now);
        }
        drop(held);
        assert!(poster_seen, "a poster waiting for the lock: it sleeps");
    });
}

/// A manual pair with a second pair of QPs, side b's reporting to a CQ
/// with a completion channel.
struct EventPair {
    pair: RcPair,
    channel: CompChannel,
    cq: Cq,
    a: Qp,
    b: Qp,
}

impl EventPair {
    fn open(seed: u64) -> EventPair {
        let pair = pair(seed);
        let channel = pair.ctx_b.create_comp_channel().unwrap();
        let cq = pair.ctx_b.create_cq(4, Some(&channel)).unwrap();
        let a = pair.pd_a.create_qp(&QpInit::rc(&pair.cq_a, &pair.cq_a)).unwrap();
        let b = pair.pd_b.create_qp(&QpInit::rc(&cq, &cq)).unwrap();
        connect_pair(&a, &b);
        EventPair { pair, channel, cq, a, b }
    }
}

/// A thread waiting for a completion event takes in the packet that
/// completes it itself (`Driver::wait_taking_packets`) instead of waiting
/// for the progress thread to take it in and fire the channel: one wake-up
/// on the event's path instead of two. On a manual device nothing else
/// moves packets, so only the wait's own rounds can complete this one.
#[test]
fn a_thread_waiting_for_an_event_takes_its_packet_in() {
    let EventPair { pair: RcPair { pd_a, pd_b, net: _net, .. }, channel, cq, a, b } = EventPair::open(45);
    let rx = pd_b.reg_mr(8, AccessFlags::LOCAL_WRITE).unwrap();
    b.post_recv(&RecvWr { wr_id: 5, sg_list: rx.sge(0, 8).into() }).unwrap();
    cq.req_notify(false).unwrap();
    let tx = pd_a.reg_mr_with(vec![9; 8], AccessFlags::LOCAL_WRITE).unwrap();
    a.post_send(&SendWr::new(1, WrOp::Send, tx.sge(0, 8))).unwrap();

    let fired = channel.get_cq_event(Duration::from_secs(10)).expect("the waiting thread took the SEND in");
    let mut wc = [WorkCompletion::default()];
    assert_eq!(fired.poll(&mut wc), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (5, WcStatus::Success));
    assert_eq!(rx.to_vec(), vec![9; 8]);
}

/// An arm (`ibv_req_notify_cq`) asks for an event at the next completion,
/// not for one already waiting in the CQ: perftest arms before it polls the
/// completion its last event announced, and an event fired for that one
/// (by any round in between) woke it with nothing new to poll.
#[test]
fn an_arm_fires_for_the_next_completion_not_for_one_waiting() {
    let EventPair { pair: RcPair { ctx_a, ctx_b, pd_a, pd_b, net: _net, .. }, channel, cq, a, b } = EventPair::open(46);
    let rx = pd_b.reg_mr(16, AccessFlags::LOCAL_WRITE).unwrap();
    for wr_id in [1, 2] {
        b.post_recv(&RecvWr { wr_id, sg_list: rx.sge(8 * (wr_id as usize - 1), 8).into() }).unwrap();
    }
    let tx = pd_a.reg_mr_with(vec![3; 8], AccessFlags::LOCAL_WRITE).unwrap();
    let send = |wr_id| a.post_send(&SendWr::new(wr_id, WrOp::Send, tx.sge(0, 8))).unwrap();

    send(1);
    progress_until(&[&ctx_a, &ctx_b], || ctx_b.driver().lock().engine.cq_pushed(cq.handle()) == 1);
    cq.req_notify(false).unwrap();
    for _ in 0..10 {
        ctx_b.progress();
    }
    assert!(channel.try_get_cq_event().is_none(), "an event for the completion waiting at the arm");
    send(2);
    let mut fired = false;
    progress_until(&[&ctx_a, &ctx_b], || {
        fired |= channel.try_get_cq_event().is_some();
        fired
    });
    assert!(fired, "the next completion fires the armed CQ");
    let mut wc = [WorkCompletion::default(); 2];
    assert_eq!(cq.poll(&mut wc), 2, "both completions wait in the CQ");
}
