//! Service ID Resolution between two CMs over a virtual wire and clock:
//! answers, refusals, retries, lost and repeated messages, forgeries.

mod common;
use common::cm_wire::{ga, gb, Wire, SERVICE};
use std::time::Duration;
use uroce_transport::cm::msg::{attr, SidrStatus};
use uroce_transport::cm::timing::{cm_time, CMA_CM_RESPONSE_TIMEOUT};
use uroce_transport::cm::*;
use uroce_transport::engine::Gid;

fn request(w: &mut Wire, service_id: u64, retries: u8) -> CommId {
    let p = SidrParams {
        dgid: gb(),
        service_id,
        timeout: cm_time(CMA_CM_RESPONSE_TIMEOUT),
        max_cm_retries: retries,
        private_data: b"ip cm header and more".to_vec(),
    };
    w.a.sidr_request(w.now, &p).unwrap()
}

fn success(qpn: u32) -> SidrAnswer {
    SidrAnswer { status: SidrStatus::SUCCESS, qpn, qkey: 0x0123_4567, private_data: b"welcome".to_vec() }
}

/// The one request B's consumer heard of.
fn heard(w: &mut Wire) -> CommId {
    let ev = w.events_b();
    let [CmEvent::SidrReqReceived { id, src_gid, req }] = &ev[..] else { panic!("{ev:?}") };
    assert_eq!((*src_gid, req.service_id, &req.private_data[..21]), (ga(), SERVICE, &b"ip cm header and more"[..]));
    *id
}

fn sent(w: &Wire, who: char, attr_id: u16) -> usize {
    w.log.iter().filter(|e| **e == (who, attr_id)).count()
}

#[test]
fn a_sidr_req_is_answered_with_the_services_qpn_and_qkey() {
    let mut w = Wire::new();
    let a = request(&mut w, SERVICE, 15);
    assert_eq!(w.a.state(a), Some(State::SidrReqSent));
    w.deliver();
    let b = heard(&mut w);
    w.b.sidr_reply(w.now, b, &success(0x42)).unwrap();
    w.deliver();
    let ev = w.events_a();
    let [CmEvent::SidrRepReceived { id, rep }] = &ev[..] else { panic!("{ev:?}") };
    assert_eq!(
        (*id, rep.status, rep.qpn, rep.qkey, rep.service_id),
        (a, SidrStatus::SUCCESS, 0x42, 0x0123_4567, SERVICE)
    );
    assert_eq!(&rep.private_data[..7], b"welcome");
    assert_eq!(w.a.state(a), Some(State::Idle));
    // Nothing is retransmitted after the answer.
    w.advance(Duration::from_secs(60));
    w.deliver();
    assert_eq!((sent(&w, 'a', attr::SIDR_REQ), sent(&w, 'b', attr::SIDR_REP)), (1, 1));
    assert!(w.events_a().is_empty());
}

#[test]
fn a_service_nobody_serves_is_unsupported_at_once() {
    let mut w = Wire::new();
    let a = request(&mut w, SERVICE + 1, 15);
    w.deliver();
    assert!(w.events_b().is_empty(), "the consumer hears nothing");
    assert_eq!(w.b.len(), 0, "and B remembers nothing");
    let ev = w.events_a();
    assert!(
        matches!(&ev[..], [CmEvent::SidrRepReceived { id, rep }] if *id == a && rep.status == SidrStatus::UNSUPPORTED)
    );
}

#[test]
fn a_refusal_carries_reject_and_private_data() {
    let mut w = Wire::new();
    request(&mut w, SERVICE, 15);
    w.deliver();
    let b = heard(&mut w);
    let no = SidrAnswer { status: SidrStatus::REJECT, qpn: 0, qkey: 0, private_data: b"busy".to_vec() };
    w.b.sidr_reply(w.now, b, &no).unwrap();
    w.deliver();
    let ev = w.events_a();
    assert!(
        matches!(&ev[..], [CmEvent::SidrRepReceived { rep, .. }] if rep.status == SidrStatus::REJECT && &rep.private_data[..4] == b"busy")
    );
    // Destroying a request's ID refuses it too.
    request(&mut w, SERVICE, 15);
    w.deliver();
    let b = heard(&mut w);
    w.b.destroy(w.now, b);
    w.deliver();
    let ev = w.events_a();
    assert!(matches!(&ev[..], [CmEvent::SidrRepReceived { rep, .. }] if rep.status == SidrStatus::REJECT));
}

#[test]
fn a_lost_sidr_req_is_sent_again() {
    let mut w = Wire::new();
    let a = request(&mut w, SERVICE, 15);
    w.run(&mut |who, at| who == 'a' && at == attr::SIDR_REQ);
    assert!(w.events_b().is_empty());
    w.advance(cm_time(CMA_CM_RESPONSE_TIMEOUT));
    w.deliver();
    let b = heard(&mut w);
    w.b.sidr_reply(w.now, b, &success(7)).unwrap();
    w.deliver();
    assert!(matches!(&w.events_a()[..], [CmEvent::SidrRepReceived { id, .. }] if *id == a));
    assert_eq!(sent(&w, 'a', attr::SIDR_REQ), 2);
}

/// The SIDR_REP is lost: the requester asks again and gets the same answer,
/// and B's consumer hears of the request once (the kernel would make it a
/// second request).
#[test]
fn a_lost_sidr_rep_is_answered_again_from_memory() {
    let mut w = Wire::new();
    let a = request(&mut w, SERVICE, 15);
    w.deliver();
    let b = heard(&mut w);
    w.b.sidr_reply(w.now, b, &success(9)).unwrap();
    w.run(&mut |who, at| who == 'b' && at == attr::SIDR_REP);
    assert!(w.events_a().is_empty());
    w.advance(cm_time(CMA_CM_RESPONSE_TIMEOUT));
    w.deliver();
    assert!(w.events_b().is_empty(), "no second request for the consumer");
    let ev = w.events_a();
    assert!(matches!(&ev[..], [CmEvent::SidrRepReceived { id, rep }] if *id == a && rep.qpn == 9));
    assert_eq!(sent(&w, 'b', attr::SIDR_REP), 2);
    // The answer is forgotten after SIDR_ANSWER_KEPT.
    assert_eq!(w.b.len(), 1);
    w.advance(SIDR_ANSWER_KEPT);
    assert_eq!(w.b.len(), 0);
}

#[test]
fn a_repeated_sidr_req_while_the_consumer_decides_is_dropped() {
    let mut w = Wire::new();
    request(&mut w, SERVICE, 15);
    w.deliver();
    let b = heard(&mut w);
    w.advance(cm_time(CMA_CM_RESPONSE_TIMEOUT));
    w.deliver();
    assert!(w.events_b().is_empty());
    assert_eq!((sent(&w, 'a', attr::SIDR_REQ), sent(&w, 'b', attr::SIDR_REP)), (2, 0));
    w.b.sidr_reply(w.now, b, &success(3)).unwrap();
    w.deliver();
    assert_eq!(w.events_a().len(), 1);
}

#[test]
fn silence_gives_up_after_the_retries() {
    let mut w = Wire::new();
    let a = request(&mut w, SERVICE, 3);
    for _ in 0..4 {
        w.run(&mut |_, _| true);
        assert!(w.events_a().is_empty());
        w.advance(cm_time(CMA_CM_RESPONSE_TIMEOUT));
    }
    assert_eq!(w.events_a(), [CmEvent::SidrReqError { id: a }]);
    assert_eq!(sent(&w, 'a', attr::SIDR_REQ), 4, "the first try and three retries");
    assert_eq!(w.a.state(a), Some(State::Idle));
}

/// A SIDR_REP from a port the request did not go to is dropped and counted;
/// the real answer still counts.
#[test]
fn a_forged_sidr_rep_from_another_port_is_dropped() {
    let mut w = Wire::new();
    let a = request(&mut w, SERVICE, 15);
    w.deliver();
    let b = heard(&mut w);
    w.b.sidr_reply(w.now, b, &success(5)).unwrap();
    let real = w.b.poll_transmit().unwrap();
    let mut forged = real.mad;
    forged[24 + 8..24 + 11].copy_from_slice(&[0xee, 0xee, 0xee]); // another QPN
    w.a.handle_mad(w.now, Gid::from_ipv4([10, 0, 0, 66]), &forged);
    assert!(w.events_a().is_empty());
    assert_eq!(w.a.stats().rcvd_bad_src, 1);
    w.a.handle_mad(w.now, gb(), &real.mad);
    assert!(matches!(&w.events_a()[..], [CmEvent::SidrRepReceived { id, rep }] if *id == a && rep.qpn == 5));
}

/// One peer cannot make a port hold more than `max_conns_per_peer` SIDR
/// requests, pending or remembered: the next is refused and counted.
#[test]
fn one_peer_cannot_pile_up_sidr_requests() {
    let mut w = Wire::with_max_conns_per_peer(3);
    for _ in 0..3 {
        request(&mut w, SERVICE, 15);
        w.deliver();
        heard(&mut w);
    }
    let a = request(&mut w, SERVICE, 15);
    w.deliver();
    assert!(w.events_b().is_empty());
    assert!(
        matches!(&w.events_a()[..], [CmEvent::SidrRepReceived { id, rep }] if *id == a && rep.status == SidrStatus::REJECT)
    );
    assert_eq!(w.b.stats().req_refused, 1);
}
