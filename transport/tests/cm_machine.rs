//! Two CMs over a virtual wire and clock: connection setup, rejects,
//! retransmission, duplicates, MRAs, disconnects and timewait, as the
//! kernel's cm.c behaves.

mod common;
use common::cm_wire::{ga, gb, params, Wire, SERVICE};
use std::time::Duration;
use uroce_transport::cm::msg::attr;
use uroce_transport::cm::timing::*;
use uroce_transport::cm::*;
use uroce_transport::engine::{Gid, Instant};
use uroce_transport::Seed;

/// The REQ's TIMEOUT: 2 x 1024 ms + 4096 ms.
const REQ_TIMEOUT: Duration = Duration::from_millis(6144);

#[test]
fn req_rep_rtu_then_dreq_drep_from_the_active_side() {
    let mut w = Wire::new();
    let (a, b) = w.establish();
    w.a.send_dreq(w.now, a, &[]).unwrap();
    w.deliver();
    assert_eq!(w.events_b(), [CmEvent::DreqReceived { id: b }]);
    w.b.send_drep(w.now, b, &[]).unwrap();
    w.deliver();
    assert_eq!(w.events_a(), [CmEvent::DrepReceived { id: a }]);
    assert_eq!((w.a.state(a), w.b.state(b)), (Some(State::Timewait), Some(State::Timewait)));
    assert_eq!(w.attrs(), [('a', attr::REQ), ('b', attr::REP), ('a', attr::RTU), ('a', attr::DREQ), ('b', attr::DREP)]);
    // Timewait lasts 4.096 us x 2^19 (the ACK timeout): about 2 s.
    w.advance(Duration::from_millis(2047));
    assert!(w.events_a().is_empty());
    w.advance(Duration::from_millis(1));
    assert_eq!(w.events_a(), [CmEvent::TimewaitExit { id: a }]);
    assert_eq!(w.events_b(), [CmEvent::TimewaitExit { id: b }]);
    assert_eq!(w.a.state(a), Some(State::Idle));
}

#[test]
fn disconnect_from_the_passive_side_and_dreqs_that_cross() {
    let mut w = Wire::new();
    let (a, b) = w.establish();
    w.b.send_dreq(w.now, b, &[]).unwrap();
    w.deliver();
    assert_eq!(w.events_a(), [CmEvent::DreqReceived { id: a }]);
    w.a.send_drep(w.now, a, &[]).unwrap();
    w.deliver();
    assert_eq!(w.events_b(), [CmEvent::DrepReceived { id: b }]);

    // Both sides start a disconnect at once: each takes the other's DREQ.
    let mut w = Wire::new();
    let (a, b) = w.establish();
    w.a.send_dreq(w.now, a, &[]).unwrap();
    w.b.send_dreq(w.now, b, &[]).unwrap();
    w.deliver();
    assert_eq!(w.events_a(), [CmEvent::DreqReceived { id: a }]);
    assert_eq!(w.events_b(), [CmEvent::DreqReceived { id: b }]);
    w.a.send_drep(w.now, a, &[]).unwrap();
    w.b.send_drep(w.now, b, &[]).unwrap();
    w.deliver();
    assert_eq!((w.a.state(a), w.b.state(b)), (Some(State::Timewait), Some(State::Timewait)));
}

#[test]
fn a_req_for_a_service_nobody_listens_on_is_rejected_at_once() {
    let mut w = Wire::new();
    let mut p = params(&[]);
    p.service_id = 0x0106_0001;
    let a = w.a.connect(w.now, &p).unwrap();
    w.deliver();
    let ev = w.events_a();
    let [CmEvent::RejReceived { id, rej }] = &ev[..] else { panic!("{ev:?}") };
    assert_eq!((*id, rej.reason), (a, RejReason::INVALID_SERVICE_ID));
    assert_eq!(rej.reason.text(), "invalid service ID");
    assert_eq!(w.a.state(a), Some(State::Idle));
    assert!(w.b.is_empty() && w.events_b().is_empty());
}

#[test]
fn a_consumer_reject_carries_private_data() {
    let mut w = Wire::new();
    let a = w.connect(&[]);
    w.deliver();
    let ev = w.events_b();
    let [CmEvent::ReqReceived { id, .. }] = &ev[..] else { panic!("{ev:?}") };
    w.b.reject(w.now, *id, RejReason::CONSUMER_DEFINED, &[], b"go away").unwrap();
    w.deliver();
    let ev = w.events_a();
    let [CmEvent::RejReceived { id, rej }] = &ev[..] else { panic!("{ev:?}") };
    assert_eq!((*id, rej.reason), (a, RejReason::CONSUMER_DEFINED));
    assert_eq!(&rej.private_data[..7], b"go away");
    assert!(w.b.reject(w.now, *id, RejReason::CONSUMER_DEFINED, &[], &[]).is_err(), "already idle");
}

#[test]
fn a_lost_req_is_sent_again_and_an_unanswered_one_gives_up() {
    let mut w = Wire::new();
    let a = w.connect(&[]);
    w.run(&mut |from, _| from == 'a');
    w.advance(REQ_TIMEOUT - Duration::from_millis(1));
    w.deliver();
    assert_eq!(w.attrs().len(), 1, "not yet");
    w.advance(Duration::from_millis(1));
    w.deliver();
    assert_eq!(w.attrs(), [('a', attr::REQ), ('a', attr::REQ)]);
    assert!(matches!(w.events_b()[..], [CmEvent::ReqReceived { .. }]));
    assert_eq!(w.a.state(a), Some(State::ReqSent));

    // Nobody there: 1 + 15 REQs, then REQ_ERROR after 16 timeouts (98 s).
    let mut w = Wire::new();
    let a2 = w.connect(&[]);
    let mut sent = 0;
    for _ in 0..16 {
        w.run(&mut |_, _| {
            sent += 1;
            true
        });
        assert!(w.events_a().is_empty());
        w.advance(REQ_TIMEOUT);
    }
    assert_eq!(sent, 16);
    assert_eq!(w.events_a(), [CmEvent::ReqError { id: a2 }]);
    assert_eq!(w.a.state(a2), Some(State::Idle));
    assert_eq!(w.a.poll_timeout(), None);
    let _ = a;
}

#[test]
fn a_lost_rtu_is_answered_by_the_repeated_rep() {
    let mut w = Wire::new();
    let a = w.connect(&[]);
    w.deliver();
    let b = w.accept_on_b();
    w.deliver();
    w.events_a();
    w.a.ready_to_use(a, b"rtu").unwrap();
    w.run(&mut |_, attr_id| attr_id == attr::RTU);
    assert_eq!(w.b.state(b), Some(State::RepSent));
    // The REP goes again after the active side's response time (4096 ms); the
    // active side, established, answers with its RTU again.
    w.advance(Duration::from_millis(4096));
    w.deliver();
    assert_eq!(w.events_b(), [CmEvent::RtuReceived { id: b }]);
    assert!(w.events_a().is_empty(), "the duplicate REP raises no event");
    assert_eq!(&w.attrs()[3..], [('b', attr::REP), ('a', attr::RTU)]);
}

#[test]
fn a_slow_consumer_answers_a_repeated_req_with_an_mra() {
    let mut w = Wire::new();
    let a = w.connect(&[]);
    w.deliver();
    let ev = w.events_b();
    let [CmEvent::ReqReceived { id: b, .. }] = ev[..] else { panic!() };
    // rdma_cm promises an MRA (service timeout 24) but sends it only if asked twice.
    w.b.mra(b, CMA_CM_MRA_SERVICE_TIMEOUT, true, &[]).unwrap();
    w.deliver();
    assert_eq!(w.attrs().len(), 1);
    w.advance(REQ_TIMEOUT);
    w.deliver();
    assert_eq!(&w.attrs()[1..], [('a', attr::REQ), ('b', attr::MRA)]);
    assert_eq!(w.events_a(), [CmEvent::MraReceived { id: a, service_timeout: 24 }]);
    assert_eq!(w.a.state(a), Some(State::MraReqRcvd));
    // Now the active side waits 2^24 x 4.096 us + the ACK timeout before trying again.
    let wait = cm_time(24) + cm_time(19);
    assert_eq!(w.a.poll_timeout(), Some(w.now + wait));
    let p = AcceptParams { local_qpn: 0x22, ..Default::default() };
    w.b.accept(w.now, b, &p).unwrap();
    w.deliver();
    assert!(matches!(w.events_a()[..], [CmEvent::RepReceived { .. }]));
}

#[test]
fn a_dreq_for_a_forgotten_connection_gets_a_drep() {
    let mut w = Wire::new();
    let (a, b) = w.establish();
    // B is gone and forgotten (destroyed in timewait, timewait over).
    w.b.destroy(w.now, b);
    w.run(&mut |from, _| from == 'b');
    w.advance(Duration::from_secs(3));
    assert!(w.b.is_empty());
    w.a.send_dreq(w.now, a, &[]).unwrap();
    w.deliver();
    assert_eq!(w.events_a(), [CmEvent::DrepReceived { id: a }]);
}

#[test]
fn destroying_a_connected_id_disconnects_and_the_peer_answers() {
    let mut w = Wire::new();
    let (a, b) = w.establish();
    w.a.destroy(w.now, a);
    w.deliver();
    assert_eq!(w.events_b(), [CmEvent::DreqReceived { id: b }]);
    // A consumer that never answers: destroying it sends the DREP.
    w.b.destroy(w.now, b);
    w.deliver();
    assert_eq!(w.attrs().last(), Some(&('b', attr::DREP)));
    assert!(w.events_a().is_empty(), "A was destroyed: no events");
    w.advance(Duration::from_secs(3));
    assert!(w.a.is_empty() && w.b.is_empty(), "both forgotten after timewait");
}

#[test]
fn a_dreq_nobody_answers_ends_in_timewait_anyway() {
    let mut w = Wire::new();
    let (a, _b) = w.establish();
    w.a.send_dreq(w.now, a, &[]).unwrap();
    // The active side's DREQ waits as long as its REQ did.
    for _ in 0..16 {
        w.run(&mut |_, _| true);
        w.advance(REQ_TIMEOUT);
    }
    assert_eq!(w.events_a(), [CmEvent::DreqError { id: a }]);
    assert_eq!(w.a.state(a), Some(State::Timewait));
}

#[test]
fn destroying_a_pending_connect_rejects_with_timeout_and_our_guid() {
    let mut w = Wire::new();
    let a = w.connect(&[]);
    w.deliver();
    let ev = w.events_b();
    let [CmEvent::ReqReceived { id: b, .. }] = ev[..] else { panic!() };
    w.a.destroy(w.now, a);
    w.deliver();
    let ev = w.events_b();
    let [CmEvent::RejReceived { id, rej }] = &ev[..] else { panic!("{ev:?}") };
    assert_eq!((*id, rej.reason), (b, RejReason::TIMEOUT));
    assert_eq!(rej.ari(), 0xau64.to_be_bytes());
    assert!(w.a.is_empty());
}

#[test]
fn private_data_limits_and_states_are_errors() {
    let mut w = Wire::new();
    assert_eq!(w.a.connect(w.now, &params(&[0; 93])), Err(CmError::PrivateDataTooLong { given: 93, max: 92 }));
    let (a, _) = w.establish();
    assert!(matches!(w.a.accept(w.now, a, &AcceptParams::default()), Err(CmError::InvalidState { .. })));
    assert_eq!(w.a.send_drep(w.now, 7, &[]), Err(CmError::NoSuchConnection(7)));
    assert_eq!(w.b.listen(SERVICE), Err(CmError::ServiceIdInUse(SERVICE)));
}

#[test]
fn hostile_mads_never_panic_nor_break_a_connection() {
    let mut w = Wire::new();
    let (a, b) = w.establish();
    let mut seed = 0x1234_5678u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..20_000 {
        let mut mad = [0u8; 256];
        mad.iter_mut().for_each(|b| *b = next() as u8);
        // Mostly well-formed CM headers, so the handlers run.
        if i % 4 != 0 {
            mad[..4].copy_from_slice(&[1, 7, 2, 3]);
            mad[16..18].copy_from_slice(&(0x10 + (next() % 8) as u16).to_be_bytes());
        }
        let len = if i % 10 == 0 { (next() % 300) as usize } else { 256 };
        w.a.handle_mad(w.now, gb(), &mad[..len.min(256)]);
        let _ = std::iter::from_fn(|| w.a.poll_transmit()).count();
    }
    assert_eq!(w.a.state(a), Some(State::Established));
    let _ = w.events_a();
    w.a.send_dreq(w.now, a, &[]).unwrap();
    w.deliver();
    assert_eq!(w.events_b(), [CmEvent::DreqReceived { id: b }]);
}

/// A host that is neither end of the connection.
fn gx() -> Gid {
    Gid::from_ipv4([127, 0, 30, 66])
}

/// SECURITY-NOTES test 9: the very DREQ, REJ, DREP and REQ an end would
/// send, but from a third port, end nothing: only the peer's port may tear
/// a connection down. Each is dropped and counted; the real one then works.
#[test]
fn teardown_messages_from_a_third_port_are_ignored() {
    let mut w = Wire::new();
    let (a, b) = w.establish();
    // A DREQ with the right comm IDs, from elsewhere.
    w.a.send_dreq(w.now, a, &[]).unwrap();
    let dreq = w.a.poll_transmit().unwrap();
    w.b.handle_mad(w.now, gx(), &dreq.mad);
    assert_eq!((w.b.state(b), w.b.stats().rcvd_bad_src), (Some(State::Established), 1));
    assert!(w.events_b().is_empty() && w.b.poll_transmit().is_none(), "b answered the forger");
    // A DREP for a's DREQ, from elsewhere, leaves a waiting for b's.
    w.b.handle_mad(w.now, ga(), &dreq.mad);
    assert_eq!(w.events_b(), [CmEvent::DreqReceived { id: b }]);
    w.b.send_drep(w.now, b, &[]).unwrap();
    let drep = w.b.poll_transmit().unwrap();
    w.a.handle_mad(w.now, gx(), &drep.mad);
    assert_eq!((w.a.state(a), w.a.stats().rcvd_bad_src), (Some(State::DreqSent), 1));
    w.a.handle_mad(w.now, gb(), &drep.mad);
    assert_eq!(w.events_a(), [CmEvent::DrepReceived { id: a }]);

    // A REJ of a pending connection, from elsewhere.
    let mut w = Wire::new();
    let a = w.connect(b"");
    w.deliver();
    let ev = w.events_b();
    let [CmEvent::ReqReceived { id: b, .. }] = &ev[..] else { panic!("{ev:?}") };
    w.b.reject(w.now, *b, RejReason::CONSUMER_DEFINED, &[], &[]).unwrap();
    let rej = w.b.poll_transmit().unwrap();
    w.a.handle_mad(w.now, gx(), &rej.mad);
    assert_eq!((w.a.state(a), w.a.stats().rcvd_bad_src), (Some(State::ReqSent), 1));
    w.a.handle_mad(w.now, gb(), &rej.mad);
    assert!(matches!(&w.events_a()[..], [CmEvent::RejReceived { id, .. }] if *id == a));
}

/// A REQ from another port that names an established connection's QP and
/// CA GUID is a new request, not a sign that the old connection is stale:
/// the old one is not disconnected.
#[test]
fn a_req_from_a_third_port_does_not_make_a_connection_stale() {
    let mut w = Wire::new();
    let (_, b) = w.establish();
    let _ = w.a.connect(w.now, &params(b"")).unwrap();
    let req = w.a.poll_transmit().unwrap();
    w.b.handle_mad(w.now, gx(), &req.mad);
    assert_eq!(w.b.state(b), Some(State::Established));
    let ev = w.events_b();
    assert!(matches!(&ev[..], [CmEvent::ReqReceived { src_gid, .. }] if *src_gid == gx()), "{ev:?}");
    assert!(std::iter::from_fn(|| w.b.poll_transmit()).all(|o| o.dgid != ga()), "b disconnected a");
}

/// SECURITY-NOTES test 9, the IDs: from a secret seed, 10^5 comm IDs with
/// every bit balanced and no repeated step; the same fixed seed repeats them.
#[test]
fn comm_ids_from_a_secret_seed_are_patternless() {
    let ids = |seed: Seed, n: usize| {
        let mut cm = Cm::new(CmConfig {
            ca_guid: 1,
            ack_delay: RXE_LOCAL_CA_ACK_DELAY,
            seed,
            max_conns_per_peer: MAX_CONNS_PER_PEER,
        });
        let now = Instant::from_nanos(1);
        let v: Vec<u32> = (0..n).map(|_| cm.connect(now, &params(b"")).unwrap()).collect();
        v
    };
    let mut engine = uroce_transport::engine::Engine::new(uroce_transport::engine::EngineConfig {
        seed: Seed::Secret([7; 32]),
        ..Default::default()
    });
    let derived = engine.derive_seed();
    assert_eq!(format!("{derived:?}"), "Seed::Secret(..)", "a secret engine gives its CM a secret seed");
    let v = ids(derived, 100_000);
    for bit in 0..32 {
        let share = v.iter().filter(|x| *x >> bit & 1 == 1).count() as f64 / v.len() as f64;
        assert!((share - 0.5).abs() < 0.01, "bit {bit} set in {share:.4} of the IDs");
    }
    let mut steps = std::collections::HashMap::<u32, usize>::new();
    for p in v.windows(2) {
        *steps.entry(p[1].wrapping_sub(p[0])).or_default() += 1;
    }
    assert!(*steps.values().max().unwrap() < 100, "a step between comm IDs repeats");
    assert_eq!(ids(Seed::Fixed(5), 10), ids(Seed::Fixed(5), 10));
    assert_ne!(ids(Seed::Secret([1; 32]), 10), ids(Seed::Secret([2; 32]), 10));
}

/// A listener takes at most `max_conns_per_peer` connections from one port:
/// the next REQ from it is rejected (no resources) and counted, while
/// another port still connects.
#[test]
fn a_listener_caps_the_connections_of_one_peer() {
    let mut w = Wire::new();
    w.b = Cm::new(CmConfig { max_conns_per_peer: 3, ..*w.b.config() });
    w.b.listen(SERVICE).unwrap();
    // Each from another QP (one QP connecting twice would be a stale connection).
    let from_qp = |w: &mut Wire, qpn: u32| {
        let id = w.a.connect(w.now, &ConnectParams { local_qpn: qpn, ..params(b"") }).unwrap();
        w.deliver();
        id
    };
    for qpn in 0..3 {
        from_qp(&mut w, 0x100 + qpn);
        let ev = w.events_b();
        let [CmEvent::ReqReceived { id, .. }] = &ev[..] else { panic!("{ev:?}") };
        w.b.accept(w.now, *id, &AcceptParams { local_qpn: 0x200 + qpn, ..Default::default() }).unwrap();
        w.deliver();
    }
    let _ = w.events_a();
    let a = from_qp(&mut w, 0x300);
    assert!(w.events_b().is_empty());
    assert_eq!(w.b.stats().req_refused, 1);
    let ev = w.events_a();
    assert!(
        matches!(&ev[..], [.., CmEvent::RejReceived { id, rej }] if *id == a && rej.reason == RejReason::NO_RESOURCES),
        "{ev:?}"
    );
    // Another port is not affected.
    let _ = w.a.connect(w.now, &params(b"")).unwrap();
    let req = w.a.poll_transmit().unwrap();
    w.b.handle_mad(w.now, gx(), &req.mad);
    assert!(matches!(&w.events_b()[..], [CmEvent::ReqReceived { .. }]));
}
