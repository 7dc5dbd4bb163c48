//! The Base Transport Header (IBTA Vol 1, 9.2), 12 bytes, first in every packet.

use super::{be, opcode::Opcode, Result};
use crate::Psn;
use core::fmt;

mod field {
    use core::ops::Range;
    pub const OPCODE: usize = 0;
    /// SE (bit 7), MigReq (bit 6), PadCnt (bits 5-4), TVer (bits 3-0).
    pub const FLAGS: usize = 1;
    pub const PKEY: Range<usize> = 2..4;
    /// FECN (bit 7), BECN (bit 6), 6 reserved bits. Masked to ones in the ICRC.
    pub const ECN_RESV: usize = 4;
    pub const DEST_QP: Range<usize> = 5..8;
    /// AckReq (bit 7), 7 reserved bits.
    pub const ACK_RESV: usize = 8;
    pub const PSN: Range<usize> = 9..12;
}

fixed_header!(
    /// A read/write view of a BTH.
    Bth,
    12
);

/// The byte of the BTH that holds the opcode.
pub const OPCODE_BYTE: usize = field::OPCODE;

/// The byte of the BTH that the ICRC masks (FECN, BECN and reserved bits).
pub const ICRC_MASKED_BYTE: usize = field::ECN_RESV;

impl<T: AsRef<[u8]>> Bth<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn opcode(&self) -> Opcode {
        Opcode::from(self.b()[field::OPCODE])
    }
    pub fn solicited(&self) -> bool {
        self.b()[field::FLAGS] & 0x80 != 0
    }
    pub fn mig_req(&self) -> bool {
        self.b()[field::FLAGS] & 0x40 != 0
    }
    pub fn pad_count(&self) -> u8 {
        (self.b()[field::FLAGS] >> 4) & 0x3
    }
    pub fn tver(&self) -> u8 {
        self.b()[field::FLAGS] & 0x0f
    }
    pub fn pkey(&self) -> u16 {
        u16::from_be_bytes([self.b()[field::PKEY.start], self.b()[field::PKEY.start + 1]])
    }
    pub fn fecn(&self) -> bool {
        self.b()[field::ECN_RESV] & 0x80 != 0
    }
    pub fn becn(&self) -> bool {
        self.b()[field::ECN_RESV] & 0x40 != 0
    }
    /// The 6 reserved bits after FECN/BECN.
    pub fn resv6(&self) -> u8 {
        self.b()[field::ECN_RESV] & 0x3f
    }
    pub fn dest_qp(&self) -> u32 {
        be::u24(&self.b()[field::DEST_QP])
    }
    pub fn ack_req(&self) -> bool {
        self.b()[field::ACK_RESV] & 0x80 != 0
    }
    /// The 7 reserved bits after AckReq.
    pub fn resv7(&self) -> u8 {
        self.b()[field::ACK_RESV] & 0x7f
    }
    pub fn psn(&self) -> Psn {
        Psn::new(be::u24(&self.b()[field::PSN]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    fn m(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    fn set_bits(&mut self, idx: usize, mask: u8, value: u8) {
        let b = &mut self.m()[idx];
        *b = (*b & !mask) | (value & mask);
    }
    pub fn set_opcode(&mut self, op: Opcode) {
        self.m()[field::OPCODE] = op.into();
    }
    pub fn set_solicited(&mut self, v: bool) {
        self.set_bits(field::FLAGS, 0x80, if v { 0x80 } else { 0 });
    }
    pub fn set_mig_req(&mut self, v: bool) {
        self.set_bits(field::FLAGS, 0x40, if v { 0x40 } else { 0 });
    }
    pub fn set_pad_count(&mut self, pad: u8) {
        self.set_bits(field::FLAGS, 0x30, pad << 4);
    }
    pub fn set_tver(&mut self, v: u8) {
        self.set_bits(field::FLAGS, 0x0f, v);
    }
    pub fn set_pkey(&mut self, v: u16) {
        self.m()[field::PKEY].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_fecn(&mut self, v: bool) {
        self.set_bits(field::ECN_RESV, 0x80, if v { 0x80 } else { 0 });
    }
    pub fn set_becn(&mut self, v: bool) {
        self.set_bits(field::ECN_RESV, 0x40, if v { 0x40 } else { 0 });
    }
    pub fn set_resv6(&mut self, v: u8) {
        self.set_bits(field::ECN_RESV, 0x3f, v);
    }
    pub fn set_dest_qp(&mut self, qpn: u32) {
        be::set_u24(&mut self.m()[field::DEST_QP], qpn);
    }
    pub fn set_ack_req(&mut self, v: bool) {
        self.set_bits(field::ACK_RESV, 0x80, if v { 0x80 } else { 0 });
    }
    pub fn set_resv7(&mut self, v: u8) {
        self.set_bits(field::ACK_RESV, 0x7f, v);
    }
    pub fn set_psn(&mut self, psn: Psn) {
        be::set_u24(&mut self.m()[field::PSN], psn.value());
    }
}

/// Every field of a BTH. Reserved bits are kept so that parse -> emit is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    pub opcode: Opcode,
    pub solicited: bool,
    pub mig_req: bool,
    pub pad_count: u8,
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    pub resv6: u8,
    pub dest_qp: u32,
    pub ack_req: bool,
    pub resv7: u8,
    pub psn: Psn,
}

impl BthRepr {
    /// The default P_Key, as every RoCE device uses it.
    pub const DEFAULT_PKEY: u16 = 0xffff;

    /// A BTH with the defaults a sender uses: P_Key 0xFFFF, TVer 0, no flags.
    pub fn new(opcode: Opcode, dest_qp: u32, psn: Psn) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: Self::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            resv6: 0,
            dest_qp,
            ack_req: false,
            resv7: 0,
            psn,
        }
    }

    pub fn parse<T: AsRef<[u8]>>(h: &Bth<T>) -> Result<BthRepr> {
        h.check_len()?;
        Ok(BthRepr {
            opcode: h.opcode(),
            solicited: h.solicited(),
            mig_req: h.mig_req(),
            pad_count: h.pad_count(),
            tver: h.tver(),
            pkey: h.pkey(),
            fecn: h.fecn(),
            becn: h.becn(),
            resv6: h.resv6(),
            dest_qp: h.dest_qp(),
            ack_req: h.ack_req(),
            resv7: h.resv7(),
            psn: h.psn(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        Bth::<&[u8]>::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Bth<T>) {
        h.set_opcode(self.opcode);
        h.set_solicited(self.solicited);
        h.set_mig_req(self.mig_req);
        h.set_pad_count(self.pad_count);
        h.set_tver(self.tver);
        h.set_pkey(self.pkey);
        h.set_fecn(self.fecn);
        h.set_becn(self.becn);
        h.set_resv6(self.resv6);
        h.set_dest_qp(self.dest_qp);
        h.set_ack_req(self.ack_req);
        h.set_resv7(self.resv7);
        h.set_psn(self.psn);
    }
}

impl fmt::Display for BthRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} QP=0x{:06x} PSN={}", self.opcode, self.dest_qp, self.psn.value())?;
        if self.ack_req {
            write!(f, " A")?;
        }
        if self.solicited {
            write!(f, " SE")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // SEND_FIRST to QP 0x000011, PSN 0x9cbb4a, P_Key 0xffff (from rc_send_recv.pcap).
    static BYTES: [u8; 12] = [0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x9c, 0xbb, 0x4a];

    #[test]
    fn deconstruct() {
        let h = Bth::new_checked(&BYTES[..]).unwrap();
        assert_eq!(h.opcode(), Opcode::RcSendFirst);
        assert_eq!(h.pkey(), 0xffff);
        assert_eq!(h.dest_qp(), 0x11);
        assert_eq!(h.psn(), Psn::new(0x9cbb4a));
        assert!(!h.ack_req());
    }

    #[test]
    fn construct() {
        let mut buf = [0xa5u8; 12];
        let mut h = Bth::new_unchecked(&mut buf[..]);
        BthRepr::new(Opcode::RcSendFirst, 0x11, Psn::new(0x9cbb4a)).emit(&mut h);
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn every_bit_round_trips() {
        for b in [0x00u8, 0xff, 0xa5, 0x5a] {
            let bytes = [b; 12];
            let repr = BthRepr::parse(&Bth::new_unchecked(&bytes[..])).unwrap();
            let mut out = [!b; 12];
            repr.emit(&mut Bth::new_unchecked(&mut out[..]));
            assert_eq!(out, bytes);
        }
    }

    #[test]
    fn impossible_len() {
        assert_eq!(Bth::new_checked(&BYTES[..11]).unwrap_err(), super::super::Error::Truncated);
    }
}
