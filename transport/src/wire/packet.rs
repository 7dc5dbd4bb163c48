//! One RoCEv2 transport packet: the UDP payload from the BTH to the ICRC.
//!
//! Layout: BTH (12) | extension headers (per opcode) | payload | pad (BTH PadCnt,
//! zeros) | ICRC (4, least significant byte first).

use super::*;

/// The BTH followed by extension headers, payload, pad and ICRC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RocePacket<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        RocePacket { buffer }
    }

    /// Wraps a buffer after checking that the lengths its opcode implies fit:
    /// after this, no accessor panics.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` when the headers or ICRC do not fit; `Malformed` when the
    /// pad count exceeds the data, data follows an opcode that carries none, or
    /// data plus pad is not a multiple of 4 bytes.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < Bth::<&[u8]>::LEN + ICRC_LEN {
            return Err(Error::Truncated);
        }
        let shape = self.shape();
        let data = len - ICRC_LEN;
        if data < shape.header_len {
            return Err(Error::Truncated);
        }
        let body = data - shape.header_len;
        if !shape.known {
            return Ok(());
        }
        if !shape.has_payload {
            return if body == 0 { Ok(()) } else { Err(Error::Malformed) };
        }
        if usize::from(self.bth().pad_count()) > body || !body.is_multiple_of(4) {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    pub fn bth(&self) -> Bth<&[u8]> {
        Bth::new_unchecked(&self.buffer.as_ref()[..Bth::<&[u8]>::LEN])
    }

    /// What the opcode says of the packet's layout: one table lookup.
    fn shape(&self) -> Shape {
        match opcode::info_of(self.buffer.as_ref()[bth::OPCODE_BYTE]) {
            Some(i) => Shape {
                known: true,
                headers: i.headers,
                header_len: Bth::<&[u8]>::LEN + i.ext_len,
                has_payload: i.has_payload,
            },
            None => {
                Shape { known: false, headers: ExtHeaders::NONE, header_len: Bth::<&[u8]>::LEN, has_payload: false }
            }
        }
    }

    /// The extension headers the opcode calls for (none for an unknown opcode).
    pub fn ext_headers(&self) -> ExtHeaders {
        self.shape().headers
    }

    /// BTH plus extension headers.
    pub fn header_len(&self) -> usize {
        self.shape().header_len
    }

    /// The bytes of one extension header, if the opcode has it.
    pub fn ext(&self, which: ExtHeaders) -> Option<&[u8]> {
        let hdrs = self.ext_headers();
        if which.is_empty() || !hdrs.contains(which) {
            return None;
        }
        let at = Bth::<&[u8]>::LEN + hdrs.offset_of(which);
        Some(&self.buffer.as_ref()[at..at + which.len()])
    }

    /// Pad bytes in use: the BTH's count for opcodes with data, else 0.
    fn pad_len(&self, shape: Shape) -> usize {
        if shape.has_payload {
            usize::from(self.bth().pad_count())
        } else {
            0
        }
    }

    /// The data after the headers, without pad and ICRC. For an unknown opcode,
    /// everything between the BTH and the ICRC.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let shape = self.shape();
        &b[shape.header_len..b.len() - ICRC_LEN - self.pad_len(shape)]
    }

    /// The pad bytes (zeros when well formed).
    pub fn pad(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[b.len() - ICRC_LEN - self.pad_len(self.shape())..b.len() - ICRC_LEN]
    }

    /// The ICRC as the number it is (its bytes are on the wire LSB first).
    pub fn icrc(&self) -> u32 {
        let b = self.buffer.as_ref();
        let t = &b[b.len() - ICRC_LEN..];
        u32::from_le_bytes([t[0], t[1], t[2], t[3]])
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RocePacket<T> {
    /// Writes the ICRC trailer.
    pub fn set_icrc(&mut self, icrc: u32) {
        let b = self.buffer.as_mut();
        let n = b.len();
        b[n - ICRC_LEN..].copy_from_slice(&icrc.to_le_bytes());
    }
}

/// What a packet's opcode says of its layout.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// The opcode has a name (an unknown one has no extension headers and
    /// no pad: all between BTH and ICRC is payload).
    known: bool,
    headers: ExtHeaders,
    /// BTH plus extension headers.
    header_len: usize,
    has_payload: bool,
}

/// The headers of a RoCEv2 packet: the BTH and every extension header present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceRepr {
    pub bth: BthRepr,
    pub deth: Option<DethRepr>,
    pub feth: Option<FethRepr>,
    pub reth: Option<RethRepr>,
    pub atomic_eth: Option<AtomicEthRepr>,
    pub immdt: Option<ImmDtRepr>,
    pub ieth: Option<IethRepr>,
    pub aeth: Option<AethRepr>,
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    pub cnp: Option<CnpRepr>,
}

/// The pad that brings `payload_len` to a multiple of 4.
pub const fn pad_for(payload_len: usize) -> usize {
    (4 - payload_len % 4) % 4
}

impl RoceRepr {
    /// A packet with only a BTH; set the extension headers its opcode needs.
    pub fn new(bth: BthRepr) -> RoceRepr {
        RoceRepr {
            bth,
            deth: None,
            feth: None,
            reth: None,
            atomic_eth: None,
            immdt: None,
            ieth: None,
            aeth: None,
            atomic_ack_eth: None,
            cnp: None,
        }
    }

    pub fn parse<T: AsRef<[u8]>>(p: &RocePacket<T>) -> Result<RoceRepr> {
        p.check_len()?;
        let mut r = RoceRepr::new(BthRepr::parse(&p.bth())?);
        // One walk over the headers the opcode calls for, in wire order.
        let hdrs = p.ext_headers();
        let bytes = p.buffer.as_ref();
        let mut at = Bth::<&[u8]>::LEN;
        for (which, len) in ExtHeaders::ORDER {
            if hdrs.contains(which) {
                r.parse_ext(which, &bytes[at..at + len])?;
                at += len;
            }
        }
        Ok(r)
    }

    /// Parses extension header `which` from its bytes (exactly its length).
    fn parse_ext(&mut self, which: ExtHeaders, b: &[u8]) -> Result<()> {
        match which {
            ExtHeaders::DETH => self.deth = Some(DethRepr::parse(&Deth::new_unchecked(b))?),
            ExtHeaders::FETH => self.feth = Some(FethRepr::parse(&Feth::new_unchecked(b))?),
            ExtHeaders::RETH => self.reth = Some(RethRepr::parse(&Reth::new_unchecked(b))?),
            ExtHeaders::ATOMIC_ETH => self.atomic_eth = Some(AtomicEthRepr::parse(&AtomicEth::new_unchecked(b))?),
            ExtHeaders::IMMDT => self.immdt = Some(ImmDtRepr::parse(&ImmDt::new_unchecked(b))?),
            ExtHeaders::IETH => self.ieth = Some(IethRepr::parse(&Ieth::new_unchecked(b))?),
            ExtHeaders::AETH => self.aeth = Some(AethRepr::parse(&Aeth::new_unchecked(b))?),
            ExtHeaders::ATOMIC_ACK_ETH => {
                self.atomic_ack_eth = Some(AtomicAckEthRepr::parse(&AtomicAckEth::new_unchecked(b))?)
            }
            ExtHeaders::CNP => self.cnp = Some(CnpRepr::parse(b)?),
            _ => {}
        }
        Ok(())
    }

    /// The extension headers present in this repr.
    pub fn ext_headers(&self) -> ExtHeaders {
        let mut h = ExtHeaders::NONE;
        let present = [
            (self.deth.is_some(), ExtHeaders::DETH),
            (self.feth.is_some(), ExtHeaders::FETH),
            (self.reth.is_some(), ExtHeaders::RETH),
            (self.atomic_eth.is_some(), ExtHeaders::ATOMIC_ETH),
            (self.immdt.is_some(), ExtHeaders::IMMDT),
            (self.ieth.is_some(), ExtHeaders::IETH),
            (self.aeth.is_some(), ExtHeaders::AETH),
            (self.atomic_ack_eth.is_some(), ExtHeaders::ATOMIC_ACK_ETH),
            (self.cnp.is_some(), ExtHeaders::CNP),
        ];
        for (is, which) in present {
            if is {
                h = h.union(which);
            }
        }
        h
    }

    /// BTH plus extension headers: the lengths of those present, summed.
    pub fn header_len(&self) -> usize {
        let len = |present: bool, which: ExtHeaders| if present { which.len() } else { 0 };
        Bth::<&[u8]>::LEN
            + len(self.deth.is_some(), ExtHeaders::DETH)
            + len(self.feth.is_some(), ExtHeaders::FETH)
            + len(self.reth.is_some(), ExtHeaders::RETH)
            + len(self.atomic_eth.is_some(), ExtHeaders::ATOMIC_ETH)
            + len(self.immdt.is_some(), ExtHeaders::IMMDT)
            + len(self.ieth.is_some(), ExtHeaders::IETH)
            + len(self.aeth.is_some(), ExtHeaders::AETH)
            + len(self.atomic_ack_eth.is_some(), ExtHeaders::ATOMIC_ACK_ETH)
            + len(self.cnp.is_some(), ExtHeaders::CNP)
    }

    /// The pad the packet carries for `payload_len` bytes of data.
    fn pad_len(&self, payload_len: usize) -> usize {
        if self.bth.opcode.has_payload() {
            pad_for(payload_len)
        } else {
            0
        }
    }

    /// The whole packet's length with `payload_len` bytes of data, ICRC included.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len + self.pad_len(payload_len) + ICRC_LEN
    }

    /// Writes the headers, the pad count, zero pad and a zero ICRC into `buf`
    /// (exactly `buffer_len(payload_len)` bytes) and returns where the data goes,
    /// so a sender can copy it straight from memory. The ICRC is computed over
    /// the IP packet afterwards ([`crate::icrc`]).
    pub fn emit_headers(&self, buf: &mut [u8], payload_len: usize) -> core::ops::Range<usize> {
        debug_assert_eq!(buf.len(), self.buffer_len(payload_len));
        let mut bth = self.bth;
        if self.bth.opcode.info().is_some() {
            bth.pad_count = self.pad_len(payload_len) as u8;
        }
        bth.emit(&mut Bth::new_unchecked(&mut buf[..Bth::<&[u8]>::LEN]));
        let mut off = Bth::<&[u8]>::LEN;
        let mut take = |len: usize| {
            let r = off..off + len;
            off += len;
            r
        };
        if let Some(h) = &self.deth {
            h.emit(&mut Deth::new_unchecked(&mut buf[take(h.buffer_len())]));
        }
        if let Some(h) = &self.feth {
            h.emit(&mut Feth::new_unchecked(&mut buf[take(h.buffer_len())]));
        }
        if let Some(h) = &self.reth {
            h.emit(&mut Reth::new_unchecked(&mut buf[take(h.buffer_len())]));
        }
        if let Some(h) = &self.atomic_eth {
            h.emit(&mut AtomicEth::new_unchecked(&mut buf[take(h.buffer_len())]));
        }
        if let Some(h) = &self.immdt {
            h.emit(&mut ImmDt::new_unchecked(&mut buf[take(h.buffer_len())]));
        }
        if let Some(h) = &self.ieth {
            h.emit(&mut Ieth::new_unchecked(&mut buf[take(h.buffer_len())]));
        }
        if let Some(h) = &self.aeth {
            h.emit(&mut Aeth::new_unchecked(&mut buf[take(h.buffer_len())]));
        }
        if let Some(h) = &self.atomic_ack_eth {
            h.emit(&mut AtomicAckEth::new_unchecked(&mut buf[take(h.buffer_len())]));
        }
        if let Some(h) = &self.cnp {
            h.emit(&mut buf[take(h.buffer_len())]);
        }
        let data = off..off + payload_len;
        buf[data.end..].fill(0);
        data
    }

    /// Writes the whole packet with `payload`, ICRC left zero.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) {
        let data = self.emit_headers(buf, payload.len());
        buf[data].copy_from_slice(payload);
    }
}

impl RoceRepr {
    /// A packet of opcode `op` to QP 0x12 with every header its opcode calls for,
    /// filled with recognisable values: for tests, examples and teaching.
    pub fn example(op: Opcode, psn: crate::Psn) -> RoceRepr {
        let mut r = RoceRepr::new(BthRepr::new(op, 0x12, psn));
        let h = op.headers().unwrap_or(ExtHeaders::NONE);
        let has = |x| h.contains(x);
        if has(ExtHeaders::DETH) {
            r.deth = Some(DethRepr { qkey: 0x1111_1111, src_qp: 0x34, reserved: 0 });
        }
        if has(ExtHeaders::FETH) {
            r.feth = Some(FethRepr { selectivity: 1, placement: 1, reserved: 0 });
        }
        if has(ExtHeaders::RETH) {
            r.reth = Some(RethRepr { va: 0x7f00_1234_5000, rkey: 0x1ec0, dma_len: 4096 });
        }
        if has(ExtHeaders::ATOMIC_ETH) {
            r.atomic_eth = Some(AtomicEthRepr { va: 0x7f00_1234_6000, rkey: 0x1ec1, swap_add: 3, compare: 4 });
        }
        if has(ExtHeaders::IMMDT) {
            r.immdt = Some(ImmDtRepr { imm: 0x0102_0304 });
        }
        if has(ExtHeaders::IETH) {
            r.ieth = Some(IethRepr { rkey: 0x1ec2 });
        }
        if has(ExtHeaders::AETH) {
            r.aeth = Some(AethRepr { syndrome: AethSyndrome::Ack { credits: 31 }, msn: 9 });
        }
        if has(ExtHeaders::ATOMIC_ACK_ETH) {
            r.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: 42 });
        }
        if has(ExtHeaders::CNP) {
            r.cnp = Some(CnpRepr { reserved: [0; 16] });
            r.bth.becn = true;
        }
        r
    }

    /// The extension headers present, in wire order, as displayable values.
    pub fn ext_displays(&self) -> impl Iterator<Item = &dyn fmt::Display> {
        let parts: [Option<&dyn fmt::Display>; 9] = [
            self.deth.as_ref().map(|h| h as _),
            self.feth.as_ref().map(|h| h as _),
            self.reth.as_ref().map(|h| h as _),
            self.atomic_eth.as_ref().map(|h| h as _),
            self.immdt.as_ref().map(|h| h as _),
            self.ieth.as_ref().map(|h| h as _),
            self.aeth.as_ref().map(|h| h as _),
            self.atomic_ack_eth.as_ref().map(|h| h as _),
            self.cnp.as_ref().map(|h| h as _),
        ];
        parts.into_iter().flatten()
    }
}

impl fmt::Display for RoceRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.bth)?;
        for h in self.ext_displays() {
            write!(f, " {h}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::Psn;

    #[test]
    fn every_opcode_round_trips() {
        for &op in Opcode::ALL {
            for len in [0usize, 1, 2, 3, 4, 5, 255] {
                let payload: Vec<u8> = (0..len as u8).collect();
                let payload = if op.has_payload() { &payload[..] } else { &[][..] };
                let mut repr = RoceRepr::example(op, Psn::new(0xabcdef));
                repr.bth.pad_count = pad_for(payload.len()) as u8 * u8::from(op.has_payload());
                let mut buf = vec![0xa5u8; repr.buffer_len(payload.len())];
                repr.emit(&mut buf, payload);
                let p = RocePacket::new_checked(&buf[..]).unwrap();
                assert_eq!(RoceRepr::parse(&p).unwrap(), repr, "{op}");
                assert_eq!(p.payload(), payload, "{op}");
                let mut again = vec![0x5au8; buf.len()];
                RoceRepr::parse(&p).unwrap().emit(&mut again, p.payload());
                assert_eq!(again, buf, "{op}");
            }
        }
    }

    #[test]
    fn short_and_inconsistent() {
        let repr = RoceRepr::example(Opcode::RcWriteOnly, Psn::new(1));
        let mut buf = vec![0u8; repr.buffer_len(5)];
        repr.emit(&mut buf, &[1, 2, 3, 4, 5]);
        // Shorter than BTH + RETH + ICRC: truncated. Longer: a shorter write,
        // valid or not, but never a panic.
        for n in 0..buf.len() {
            let r = RocePacket::new_checked(&buf[..n]);
            if n < 12 + 16 + 4 {
                assert_eq!(r.unwrap_err(), Error::Truncated, "length {n}");
            } else if let Ok(p) = r {
                let _ = (p.payload(), p.pad(), p.icrc());
            }
        }
        // A pad count larger than the data.
        let mut bad = vec![0u8; 12 + 16 + 4];
        repr.emit_headers(&mut bad, 0);
        bad[1] |= 0x30;
        assert_eq!(RocePacket::new_checked(&bad[..]).unwrap_err(), Error::Malformed);
        // Data after an ACK.
        let ack = RoceRepr::example(Opcode::RcAck, Psn::new(1));
        let mut buf = vec![0u8; ack.buffer_len(0) + 4];
        ack.emit_headers(&mut buf[..ack.buffer_len(0)], 0);
        assert_eq!(RocePacket::new_checked(&buf[..]).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn unknown_opcode_is_opaque() {
        let mut buf = [0u8; 24];
        buf[0] = 0x15;
        let p = RocePacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
        let r = RoceRepr::parse(&p).unwrap();
        assert_eq!(r.bth.opcode, Opcode::Unknown(0x15));
    }
}
