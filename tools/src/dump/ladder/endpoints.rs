//! Who sent each packet. A BTH names only the destination QP, so the
//! sender's QPN is found from the traffic coming back: between two hosts
//! with one QP pair, the QPNs each side is sent to; with several pairs,
//! the UDP source port, which rxe and uroce derive from both QPNs (the
//! same both ways). A UD datagram names its sender (DETH).

use super::Packet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// One end: an address and, when known, a QPN.
pub type End = (IpAddr, Option<u32>);

/// The columns, in the order their connections first appear, each
/// connection's two ends side by side, and every packet's two ends.
pub struct Endpoints {
    columns: Vec<End>,
    /// Per packet: (sender column, receiver column).
    pub of_packet: Vec<(usize, usize)>,
}

impl Endpoints {
    pub fn of(packets: &[Packet]) -> Endpoints {
        let peers = peer_qpns(packets);
        let mut columns: Vec<End> = Vec::new();
        let mut of_packet = Vec::with_capacity(packets.len());
        for p in packets {
            let from: End = (p.src, p.src_qp.or_else(|| peers.get(&(p.dst, p.src, p.dest_qp, p.sport)).copied()));
            let to: End = (p.dst, Some(p.dest_qp));
            let mut column = |e: End| match columns.iter().position(|c| *c == e) {
                Some(i) => i,
                None => {
                    columns.push(e);
                    columns.len() - 1
                }
            };
            of_packet.push((column(from), column(to)));
        }
        Endpoints { columns, of_packet }
    }

    /// `198.18.0.11 QP 0x000027` per column.
    pub fn titles(&self) -> Vec<String> {
        self.columns
            .iter()
            .map(|(ip, qp)| match qp {
                Some(q) => format!("{ip} QP 0x{q:06x}"),
                None => format!("{ip} QP ?"),
            })
            .collect()
    }
}

/// For a packet to (host, QPN) from `peer` with UDP source port `sport`:
/// the QPN at `peer` that sent it, keyed by (host, peer, QPN, sport).
/// Connected traffic only (QP1's datagrams carry their source). Found, in
/// this order, from a response and the request it answers (an ACK, a READ
/// response or an atomic ACK carries its request's PSN, so the request's
/// destination QP is the response's sender); from the only QP each side
/// has for the other; from the UDP source port when it names one QP
/// (rxe's are the same both ways; uroce's udp link sends from 4791).
fn peer_qpns(packets: &[Packet]) -> BTreeMap<(IpAddr, IpAddr, u32, u16), u32> {
    let connected = || packets.iter().filter(|p| p.src_qp.is_none());
    // Each endpoint's peer, from requests and their responses.
    let mut last_request: BTreeMap<(IpAddr, IpAddr, u32), u32> = BTreeMap::new();
    let mut paired: BTreeMap<(IpAddr, u32), u32> = BTreeMap::new();
    for p in connected() {
        if p.opcode.is_response() {
            if let Some(&q) = last_request.get(&(p.dst, p.src, p.psn)) {
                // p goes to the requester (p.dst, p.dest_qp) from (p.src, q).
                paired.insert((p.dst, p.dest_qp), q);
                paired.insert((p.src, q), p.dest_qp);
            }
        } else {
            last_request.insert((p.src, p.dst, p.psn), p.dest_qp);
        }
    }
    // The QPNs each host is sent to by each peer, with the source ports.
    let mut sent_to: BTreeMap<(IpAddr, IpAddr), BTreeSet<(u32, u16)>> = BTreeMap::new();
    for p in connected() {
        sent_to.entry((p.dst, p.src)).or_default().insert((p.dest_qp, p.sport));
    }
    let mut peers = BTreeMap::new();
    for (&(host, peer), here) in &sent_to {
        let there = sent_to.get(&(peer, host));
        let qpns = |s: &BTreeSet<(u32, u16)>| s.iter().map(|&(q, _)| q).collect::<BTreeSet<u32>>();
        let here_qpns = qpns(here);
        let there_qpns = there.map(qpns).unwrap_or_default();
        for &(qpn, sport) in here {
            let by_pairing = paired.get(&(host, qpn)).copied();
            let only = || match (here_qpns.len(), there_qpns.first()) {
                (1, Some(&q)) if there_qpns.len() == 1 => Some(q),
                _ => None,
            };
            let by_port = || {
                let mut at_port = there?.iter().filter(|&&(_, s)| s == sport).map(|&(q, _)| q);
                let q = at_port.next()?;
                at_port.all(|other| other == q).then_some(q)
            };
            if let Some(q) = by_pairing.or_else(only).or_else(by_port) {
                peers.insert((host, peer, qpn, sport), q);
            }
        }
    }
    peers
}
