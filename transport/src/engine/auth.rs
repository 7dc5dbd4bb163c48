//! The authenticated mode between two uroce peers (uroce's own, off by
//! default): every packet of a QP carries a MAC, so that neither a third
//! host nor an on-path attacker can forge, change or replay one.
//!
//! The ICRC is a CRC anybody can recompute. A QP given a key
//! ([`super::Engine::set_qp_auth_key`], the same 32 bytes at both ends)
//! appends to every packet it sends, between the pad and the ICRC, a 16-byte
//! tag: keyed BLAKE3 over everything from the BTH to the pad, the source
//! and destination GIDs and the packet's 64-bit extended PSN. The receiving
//! QP checks the tag before anything else reads the packet and drops it,
//! counted (`auth_bad_mac`), when it does not match. This is sRDMA's proposal
//! (Taranov et al., USENIX ATC 2020) in software; the payload is not
//! encrypted.
//!
//! Replays: a PSN is 24 bits and wraps, so the MAC covers the extended PSN
//! (the 64-bit count, inferred from the nearest PSN of the same sequence, as
//! QUIC infers packet numbers): a packet recorded one wrap ago no longer
//! matches its tag. Within a wrap, an RC request already seen is a duplicate,
//! which RC never executes twice (SEND and WRITE are acknowledged again, a
//! READ is answered again to the peer, an atomic's saved result is sent);
//! UC, which has no duplicates, takes only PSNs beyond the last it took
//! (`auth_replay` counts the others).
//!
//! Only between two uroce peers that both have the key: rxe and RNICs would
//! take the tag for payload. RC and UC only (a UD QP takes datagrams from
//! anyone, so it has no peer to share a key with).

use super::attr::QpType;
use super::Gid;
use crate::wire::Bth;
use crate::Psn;

/// The bytes a tag adds to every packet of an authenticated QP.
pub const AUTH_TAG_LEN: usize = 16;

/// The key and the two sequences of one QP.
#[derive(Debug, Clone)]
pub(crate) struct Auth {
    key: [u8; 32],
    /// The extended PSN this QP's requester last used (its requests, the
    /// responses to them): the reference for PSNs of that sequence.
    req_ext: u64,
    /// The extended PSN last seen of the peer's requests (their responses
    /// are ours): the reference for PSNs of the peer's sequence.
    resp_ext: u64,
    /// UC: the extended PSN of the last request taken.
    uc_last: Option<u64>,
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
    pub fn new(key: [u8; 32], sq_psn: Psn, rq_psn: Psn) -> Auth {
        Auth { key, req_ext: sq_psn.value().into(), resp_ext: rq_psn.value().into(), uc_last: None }
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
    /// this QP sends from `src` to `dst`: the tag goes where the ICRC slot
    /// was, the slot after it. The new length.
    pub fn seal(&mut self, buf: &mut [u8], len: usize, src: Gid, dst: Gid) -> usize {
        let body = len - 4;
        let (seq, psn) = sequence_of(&buf[..body], true);
        let ext = self.extend(seq, psn);
        let tag = self.tag(src, dst, ext, &buf[..body]);
        buf[body..body + AUTH_TAG_LEN].copy_from_slice(&tag);
        buf[body + AUTH_TAG_LEN..body + AUTH_TAG_LEN + 4].fill(0);
        len + AUTH_TAG_LEN
    }

    /// Checks the tag of `data` (BTH .. tag, ICRC) received from `src` to
    /// `dst` on a QP of `qp_type`; the packet without its tag (the parser's
    /// four ICRC bytes are the tag's first four, unread) when it is good.
    pub fn open<'a>(&mut self, data: &'a [u8], src: Gid, dst: Gid, qp_type: QpType) -> Result<&'a [u8], Refused> {
        let Some(body) = data.len().checked_sub(AUTH_TAG_LEN + 4).filter(|&b| b >= 12) else {
            return Err(Refused::BadMac);
        };
        let (seq, psn) = sequence_of(&data[..body], false);
        let ext = decode(self.reference(seq), psn);
        let tag = self.tag(src, dst, ext, &data[..body]);
        if !constant_time_eq(&tag, &data[body..body + AUTH_TAG_LEN]) {
            return Err(Refused::BadMac);
        }
        if qp_type == QpType::Uc && seq == Sequence::Peers {
            if self.uc_last.is_some_and(|last| ext <= last) {
                return Err(Refused::Replay);
            }
            self.uc_last = Some(ext);
        }
        self.advance(seq, ext);
        Ok(&data[..body + 4])
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

    fn tag(&self, src: Gid, dst: Gid, ext: u64, body: &[u8]) -> [u8; AUTH_TAG_LEN] {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        // The body first, in one piece: BLAKE3 then hashes its 1 KiB chunks
        // side by side (SIMD); 40 bytes in front would cost 2.4x here.
        h.update(body);
        h.update(&src.0);
        h.update(&dst.0);
        h.update(&ext.to_be_bytes());
        let mut tag = [0u8; AUTH_TAG_LEN];
        tag.copy_from_slice(&h.finalize().as_bytes()[..AUTH_TAG_LEN]);
        tag
    }
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

    /// A request with PSN 5 sealed one wrap after the start (its 64-bit PSN
    /// 2^24 + 5); `len` bytes with the ICRC slot, room for the tag.
    fn sealed_request() -> (Vec<u8>, usize) {
        let mut buf = vec![0u8; 12 + 8 + AUTH_TAG_LEN + 4];
        buf[0] = u8::from(Opcode::RcSendOnly);
        buf[9..12].copy_from_slice(&[0, 0, 5]);
        buf[12..20].copy_from_slice(b"8 bytes!");
        let mut sender = Auth::new([1; 32], Psn::new(0xff_fff0), Psn::new(0));
        let len = sender.seal(&mut buf, 24, Gid([1; 16]), Gid([2; 16]));
        (buf, len)
    }

    #[test]
    fn a_packet_from_another_wrap_does_not_match() {
        let (buf, len) = sealed_request();
        let (a, b) = (Gid([1; 16]), Gid([2; 16]));
        // The receiver in the same wrap takes it once.
        let mut same = Auth::new([1; 32], Psn::new(0), Psn::new(0xff_fff0));
        assert_eq!(same.open(&buf[..len], a, b, QpType::Rc).map(|d| d.len()), Ok(24));
        // One wrap later (its expected PSN back near 5), the recorded packet
        // has the same 24-bit PSN but another 64-bit one: refused.
        let mut later = Auth::new([1; 32], Psn::new(0), Psn::new(0));
        later.resp_ext = (2 << 24) - 0x10;
        assert_eq!(later.open(&buf[..len], a, b, QpType::Rc), Err(Refused::BadMac));
        // Another key, or other addresses: refused.
        let mut other = Auth::new([2; 32], Psn::new(0), Psn::new(0xff_fff0));
        assert_eq!(other.open(&buf[..len], a, b, QpType::Rc), Err(Refused::BadMac));
        assert_eq!(same.open(&buf[..len], b, a, QpType::Rc), Err(Refused::BadMac));
    }
}
