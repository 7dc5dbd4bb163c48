//! The authenticated mode between two uroce peers (uroce's own, off by
//! default): every packet of a QP carries a MAC, so that neither a third
//! host nor an on-path attacker can forge, change or replay one.
//!
//! The ICRC is a CRC anybody can recompute. A QP given a key
//! ([`super::Engine::set_qp_auth_key`], the same 32 bytes at both ends)
//! appends to every packet it sends, between the pad and the ICRC, a
//! 24-byte trailer: an 8-byte nonce counter and a 16-byte AES-256-GMAC tag
//! over everything from the BTH to the pad. The receiving QP checks the tag
//! before anything else reads the packet and drops it, counted
//! (`auth_bad_mac`), when it does not match. This is sRDMA's proposal
//! (Taranov et al., USENIX ATC 2020) in software; the payload is not
//! encrypted.
//!
//! Keys: each direction of each connection has its own GMAC key, derived
//! (BLAKE3 `derive_key`) from the shared key and the sender's and
//! receiver's GIDs and QPNs, so the tag also binds the packet to its two
//! ends. GMAC needs a nonce never used twice under one key: the sender
//! counts its packets from a random 64-bit start drawn when the key is
//! set, and carries the count. (A PSN would not do: a retransmitted READ
//! re-reads memory that may have changed, an RNR NAK and the later ACK
//! share a PSN.) GMAC, not BLAKE3, because with AES-NI and carry-less
//! multiplication it hashes a 4 KiB packet about 4x faster on one core
//! (docs/SECURITY.md has the measurements).
//!
//! Replays: a PSN is 24 bits and wraps, so the nonce also holds the wrap
//! count of the packet's 64-bit extended PSN (inferred from the nearest PSN
//! of the same sequence, as QUIC infers packet numbers): a packet recorded
//! one wrap ago no longer matches its tag. Within a wrap, an RC request
//! already seen is a duplicate, which RC never executes twice (SEND and
//! WRITE are acknowledged again, a READ is answered again to the peer, an
//! atomic's saved result is sent); UC, which has no duplicates, takes only
//! PSNs beyond the last it took (`auth_replay` counts the others).
//!
//! Only between two uroce peers that both have the key: rxe and RNICs would
//! take the trailer for payload. RC and UC only (a UD QP takes datagrams
//! from anyone, so it has no peer to share a key with).

use super::attr::QpType;
use super::Gid;
use crate::wire::Bth;
use crate::Psn;
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

/// The bit of the BTH's reserved `Resv7` field (byte 8, below AckReq) that
/// marks a packet as sealed by the authenticated mode. The tag covers it,
/// so it cannot be set or cleared on the way. The ICRC of a marked packet
/// is neither computed (a sending link leaves the zero the engine puts
/// there) nor checked: the engine takes the packet only if its QP holds a
/// key and the tag matches ([`marked_authenticated`]).
pub const AUTH_MARK: u8 = 0x01;

/// Whether the RoCE packet `roce` (BTH first) carries [`AUTH_MARK`]; false
/// for anything shorter than a BTH.
pub fn marked_authenticated(roce: &[u8]) -> bool {
    Bth::new_checked(roce).is_ok_and(|bth| bth.resv7() & AUTH_MARK != 0)
}

/// A sealed packet taken apart: BTH .. pad, then the trailer (nonce counter,
/// tag), then the ICRC slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sealed<'a> {
    /// The packet as the parser reads it: BTH .. pad and four more bytes
    /// where the parser expects the ICRC (the trailer's first four, unread).
    pub packet: &'a [u8],
    /// The body the tag covers: BTH .. pad.
    pub body: &'a [u8],
    /// The nonce counter (big-endian) and the GMAC tag.
    pub nonce: &'a [u8],
    pub tag: &'a [u8],
}

/// `data` (BTH .. trailer, ICRC) taken apart as a sealed packet; `None` when
/// it is too short to hold a BTH, a trailer and an ICRC.
pub fn sealed_parts(data: &[u8]) -> Option<Sealed<'_>> {
    let body = data.len().checked_sub(AUTH_TRAILER_LEN + 4).filter(|&b| b >= 12)?;
    let trailer = &data[body..body + AUTH_TRAILER_LEN];
    let (nonce, tag) = trailer.split_at(NONCE_COUNTER_LEN);
    Some(Sealed { packet: &data[..body + 4], body: &data[..body], nonce, tag })
}

/// The bytes the trailer adds to every packet of an authenticated QP: the
/// nonce counter, then the tag.
pub const AUTH_TRAILER_LEN: usize = NONCE_COUNTER_LEN + TAG_LEN;
const NONCE_COUNTER_LEN: usize = 8;
const TAG_LEN: usize = 16;

/// One end of a connection: its GID and QPN.
pub(crate) type End = (Gid, u32);

/// The key and the two sequences of one QP.
#[derive(Debug)]
pub(crate) struct Auth {
    key: [u8; 32],
    /// The GMAC keys of the two directions, each with the ends it was
    /// derived for (the peer is known from RTR on, and may change with a
    /// new connection).
    send: Option<(Direction, LessSafeKey)>,
    recv: Option<(Direction, LessSafeKey)>,
    /// The nonce counter of the next packet sent.
    next_nonce: u64,
    /// The extended PSN this QP's requester last used (its requests, the
    /// responses to them): the reference for PSNs of that sequence.
    req_ext: u64,
    /// The extended PSN last seen of the peer's requests (their responses
    /// are ours): the reference for PSNs of the peer's sequence.
    resp_ext: u64,
    /// UC: the extended PSN of the last request taken.
    uc_last: Option<u64>,
}

/// The sender and the receiver of a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Direction {
    from: End,
    to: End,
}

/// Where a packet's PSN comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sequence {
    /// This QP's requests, or the peer's responses to them.
    Ours,
    /// The peer's requests, or our responses to them.
    Peers,
}

/// Why a packet failed the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    BadMac,
    Replay,
}

impl Auth {
    /// `nonce_start`: where this QP's nonce counter starts, random so that
    /// a connection made again with the same key and QPNs uses other nonces.
    pub fn new(key: [u8; 32], nonce_start: u64, sq_psn: Psn, rq_psn: Psn) -> Auth {
        Auth {
            key,
            send: None,
            recv: None,
            next_nonce: nonce_start,
            req_ext: sq_psn.value().into(),
            resp_ext: rq_psn.value().into(),
            uc_last: None,
        }
    }

    /// The sequences start again from the QP's PSNs (a modify that set them).
    pub fn restart(&mut self, sq_psn: Option<Psn>, rq_psn: Option<Psn>) {
        if let Some(p) = sq_psn {
            self.req_ext = p.value().into();
        }
        if let Some(p) = rq_psn {
            self.resp_ext = p.value().into();
            self.uc_last = None;
        }
    }

    /// Seals the packet of `len` bytes in `buf` (its ICRC slot last) that
    /// this QP (`from`) sends to `to`: the trailer goes where the ICRC slot
    /// was, the slot after it. The new length.
    pub fn seal(&mut self, buf: &mut [u8], len: usize, from: End, to: End) -> usize {
        let body = len - 4;
        let mut bth = Bth::new_unchecked(&mut buf[..body]);
        bth.set_resv7(bth.resv7() | AUTH_MARK);
        let (seq, psn) = sequence_of(&buf[..body], true);
        let ext = self.extend(seq, psn);
        let counter = self.next_nonce;
        self.next_nonce = counter.wrapping_add(1);
        let key = key_for(&mut self.send, &self.key, Direction { from, to });
        let tag = tag(key, counter, ext, &buf[..body]);
        let (trailer, icrc) = buf[body..].split_at_mut(AUTH_TRAILER_LEN);
        trailer[..NONCE_COUNTER_LEN].copy_from_slice(&counter.to_be_bytes());
        trailer[NONCE_COUNTER_LEN..].copy_from_slice(&tag);
        icrc[..4].fill(0);
        len + AUTH_TRAILER_LEN
    }

    /// Checks the tag of `data` (BTH .. trailer, ICRC) that `from` sent to
    /// this QP (`to`), a QP of `qp_type`; the packet without its trailer
    /// (the parser's four ICRC bytes are the trailer's first four, unread)
    /// when it is good.
    pub fn open<'a>(&mut self, data: &'a [u8], from: End, to: End, qp_type: QpType) -> Result<&'a [u8], Refused> {
        let Some(sealed) = sealed_parts(data) else { return Err(Refused::BadMac) };
        let (seq, psn) = sequence_of(sealed.body, false);
        let ext = decode(self.reference(seq), psn);
        let counter = u64::from_be_bytes(sealed.nonce.try_into().map_err(|_| Refused::BadMac)?);
        let key = key_for(&mut self.recv, &self.key, Direction { from, to });
        if !constant_time_eq(&tag(key, counter, ext, sealed.body), sealed.tag) {
            return Err(Refused::BadMac);
        }
        if qp_type == QpType::Uc && seq == Sequence::Peers {
            if self.uc_last.is_some_and(|last| ext <= last) {
                return Err(Refused::Replay);
            }
            self.uc_last = Some(ext);
        }
        self.advance(seq, ext);
        Ok(sealed.packet)
    }

    fn reference(&self, seq: Sequence) -> u64 {
        match seq {
            Sequence::Ours => self.req_ext,
            Sequence::Peers => self.resp_ext,
        }
    }

    /// The extended PSN of `psn` in `seq`, which now reaches at least it.
    fn extend(&mut self, seq: Sequence, psn: Psn) -> u64 {
        let ext = decode(self.reference(seq), psn);
        self.advance(seq, ext);
        ext
    }

    fn advance(&mut self, seq: Sequence, ext: u64) {
        let r = match seq {
            Sequence::Ours => &mut self.req_ext,
            Sequence::Peers => &mut self.resp_ext,
        };
        *r = (*r).max(ext);
    }
}

/// The GMAC key of `dir`, derived once and kept in `slot` until the ends
/// change.
fn key_for<'a>(slot: &'a mut Option<(Direction, LessSafeKey)>, shared: &[u8; 32], dir: Direction) -> &'a LessSafeKey {
    if slot.as_ref().is_none_or(|(d, _)| *d != dir) {
        let mut material = Vec::with_capacity(32 + 2 * 20);
        material.extend_from_slice(shared);
        for (gid, qpn) in [dir.from, dir.to] {
            material.extend_from_slice(&gid.0);
            material.extend_from_slice(&qpn.to_be_bytes());
        }
        let derived = blake3::derive_key("uroce 2026-11 authenticated mode: GMAC key of one direction", &material);
        let key = UnboundKey::new(&AES_256_GCM, &derived).expect("AES-256-GCM takes a 32-byte key");
        *slot = Some((dir, LessSafeKey::new(key)));
    }
    &slot.as_ref().expect("set above").1
}

/// The GMAC tag of `body` (authenticated, not encrypted) under `key`, with
/// the nonce made of the counter and the wrap count of the extended PSN.
fn tag(key: &LessSafeKey, counter: u64, ext: u64, body: &[u8]) -> [u8; TAG_LEN] {
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(&counter.to_be_bytes());
    // The wrap count (PSNs are 24 bits); 32 bits of it last 2^56 packets.
    nonce[8..].copy_from_slice(&((ext >> 24) as u32).to_be_bytes());
    let mut nothing_to_encrypt = [0u8; 0];
    let sealed =
        key.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(body), &mut nothing_to_encrypt);
    let mut out = [0u8; TAG_LEN];
    // GMAC of an empty text never fails (only an over-long text can);
    // were it to, the all-zero tag simply fails the peer's check.
    if let Ok(t) = sealed {
        out.copy_from_slice(t.as_ref());
    }
    out
}

/// Which sequence a packet's PSN belongs to, for the end that sends it
/// (`sending`) or receives it: requests this QP sends and the responses it
/// receives are its own sequence; the others the peer's. Both ends thus
/// extend a PSN from their own reference of the same sequence. Read from
/// the BTH alone (opcode, PSN); `packet` holds at least the BTH.
fn sequence_of(packet: &[u8], sending: bool) -> (Sequence, Psn) {
    let bth = Bth::new_unchecked(packet);
    let ours = bth.opcode().is_response() != sending;
    (if ours { Sequence::Ours } else { Sequence::Peers }, bth.psn())
}

/// The 64-bit PSN nearest to `reference` whose low 24 bits are `psn`.
fn decode(reference: u64, psn: Psn) -> u64 {
    const WRAP: u64 = 1 << 24;
    let candidate = (reference & !(WRAP - 1)) | u64::from(psn.value());
    if candidate + WRAP / 2 <= reference {
        candidate + WRAP
    } else if candidate > reference + WRAP / 2 && candidate >= WRAP {
        candidate - WRAP
    } else {
        candidate
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::wire::Opcode;

    #[test]
    fn extended_psns_follow_the_wrap() {
        assert_eq!(decode(5, Psn::new(6)), 6);
        assert_eq!(decode(0xff_fff0, Psn::new(3)), 0x100_0003);
        assert_eq!(decode(0x100_0003, Psn::new(0xff_fff0)), 0xff_fff0);
        assert_eq!(decode(3, Psn::new(0xff_fff0)), 0xff_fff0, "no epoch below 0");
        assert_eq!(decode(0x500_0000, Psn::new(0x80_0001)), 0x480_0001);
    }

    const A: End = (Gid([1; 16]), 0x11);
    const B: End = (Gid([2; 16]), 0x22);

    #[test]
    fn every_packet_has_its_own_nonce() {
        let mut sender = Auth::new([1; 32], u64::MAX, Psn::new(0), Psn::new(0));
        let mut nonces = Vec::new();
        for _ in 0..3 {
            let mut buf = vec![0u8; 12 + AUTH_TRAILER_LEN + 4];
            buf[0] = u8::from(Opcode::RcSendOnly);
            sender.seal(&mut buf, 16, A, B);
            nonces.push(u64::from_be_bytes(buf[12..20].try_into().unwrap()));
        }
        assert_eq!(nonces, [u64::MAX, 0, 1], "counted from the start given, wrapping");
    }

    /// A request with PSN 5 sealed one wrap after the start (its 64-bit PSN
    /// 2^24 + 5); `len` bytes with the ICRC slot, room for the tag.
    fn sealed_request() -> (Vec<u8>, usize) {
        let mut buf = vec![0u8; 12 + 8 + AUTH_TRAILER_LEN + 4];
        buf[0] = u8::from(Opcode::RcSendOnly);
        buf[9..12].copy_from_slice(&[0, 0, 5]);
        buf[12..20].copy_from_slice(b"8 bytes!");
        let mut sender = Auth::new([1; 32], 7, Psn::new(0xff_fff0), Psn::new(0));
        let len = sender.seal(&mut buf, 24, A, B);
        (buf, len)
    }

    #[test]
    fn a_packet_from_another_wrap_does_not_match() {
        let (buf, len) = sealed_request();
        let (a, b) = (A, B);
        // The receiver in the same wrap takes it once.
        let mut same = Auth::new([1; 32], 9, Psn::new(0), Psn::new(0xff_fff0));
        assert_eq!(same.open(&buf[..len], a, b, QpType::Rc).map(|d| d.len()), Ok(24));
        // One wrap later (its expected PSN back near 5), the recorded packet
        // has the same 24-bit PSN but another 64-bit one: refused.
        let mut later = Auth::new([1; 32], 9, Psn::new(0), Psn::new(0));
        later.resp_ext = (2 << 24) - 0x10;
        assert_eq!(later.open(&buf[..len], a, b, QpType::Rc), Err(Refused::BadMac));
        // Another key, other addresses or QPNs, another nonce: refused.
        let mut other = Auth::new([2; 32], 9, Psn::new(0), Psn::new(0xff_fff0));
        assert_eq!(other.open(&buf[..len], a, b, QpType::Rc), Err(Refused::BadMac));
        assert_eq!(same.open(&buf[..len], b, a, QpType::Rc), Err(Refused::BadMac));
        assert_eq!(same.open(&buf[..len], (A.0, 3), b, QpType::Rc), Err(Refused::BadMac));
        let mut renonced = buf.clone();
        renonced[20 + 7] ^= 1;
        assert_eq!(same.open(&renonced[..len], a, b, QpType::Rc), Err(Refused::BadMac));
    }
}
