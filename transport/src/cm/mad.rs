//! The Management Datagram: 256 bytes, a 24-byte common header, then the
//! class's data (IBTA Vol 1 13.4.2). On RoCE a MAD is the whole payload of a
//! UD SEND to QP1.

use super::field::{get_u64, set_u64};
use crate::wire::{Error, Result};
use core::fmt;

/// Bytes in a MAD.
pub const MAD_LEN: usize = 256;
/// Bytes of the common header.
pub const MAD_HEADER_LEN: usize = 24;
/// Bytes of class data after the header.
pub const MAD_DATA_LEN: usize = MAD_LEN - MAD_HEADER_LEN;

/// `BaseVersion` of every MAD on RoCE.
pub const BASE_VERSION: u8 = 1;
/// The Communication Management class.
pub const CM_CLASS: u8 = 0x07;
/// The version of the CM class the kernel speaks.
pub const CM_CLASS_VERSION: u8 = 2;
/// `Send()`: CM messages are all sends, none is a Get/Set with a response.
pub const METHOD_SEND: u8 = 0x03;

mod field {
    use core::ops::Range;
    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    pub const METHOD: usize = 3;
    pub const STATUS: Range<usize> = 4..6;
    pub const CLASS_SPECIFIC: Range<usize> = 6..8;
    pub const TID: usize = 8;
    pub const ATTR_ID: Range<usize> = 16..18;
    pub const RESERVED: Range<usize> = 18..20;
    pub const ATTR_MOD: Range<usize> = 20..24;
}

/// A read/write view of one MAD. `new_checked` makes sure all 256 bytes are
/// there, after which no accessor panics; bytes past 256 are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mad<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Mad<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short one.
    pub const fn new_unchecked(buffer: T) -> Self {
        Mad { buffer }
    }

    /// Wraps a buffer after checking it holds a whole MAD.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let m = Self::new_unchecked(buffer);
        m.check_len()?;
        Ok(m)
    }

    /// `Err(Truncated)` if the buffer is shorter than a MAD.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < MAD_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        u16::from_be_bytes([self.b()[r.start], self.b()[r.start + 1]])
    }

    pub fn base_version(&self) -> u8 {
        self.b()[field::BASE_VERSION]
    }
    pub fn mgmt_class(&self) -> u8 {
        self.b()[field::MGMT_CLASS]
    }
    pub fn class_version(&self) -> u8 {
        self.b()[field::CLASS_VERSION]
    }
    /// The method byte: the response bit (0x80) and the method.
    pub fn method(&self) -> u8 {
        self.b()[field::METHOD]
    }
    pub fn status(&self) -> u16 {
        self.u16_at(field::STATUS)
    }
    pub fn class_specific(&self) -> u16 {
        self.u16_at(field::CLASS_SPECIFIC)
    }
    /// The transaction ID.
    pub fn tid(&self) -> u64 {
        get_u64(self.b(), field::TID)
    }
    pub fn attr_id(&self) -> u16 {
        self.u16_at(field::ATTR_ID)
    }
    pub fn reserved(&self) -> u16 {
        self.u16_at(field::RESERVED)
    }
    pub fn attr_mod(&self) -> u32 {
        let r = field::ATTR_MOD;
        u32::from_be_bytes([self.b()[r.start], self.b()[r.start + 1], self.b()[r.start + 2], self.b()[r.start + 3]])
    }
    /// The 232 bytes of class data.
    pub fn data(&self) -> &[u8] {
        &self.b()[MAD_HEADER_LEN..MAD_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Mad<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    fn set_u16_at(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.bm()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_base_version(&mut self, v: u8) {
        self.bm()[field::BASE_VERSION] = v;
    }
    pub fn set_mgmt_class(&mut self, v: u8) {
        self.bm()[field::MGMT_CLASS] = v;
    }
    pub fn set_class_version(&mut self, v: u8) {
        self.bm()[field::CLASS_VERSION] = v;
    }
    pub fn set_method(&mut self, v: u8) {
        self.bm()[field::METHOD] = v;
    }
    pub fn set_status(&mut self, v: u16) {
        self.set_u16_at(field::STATUS, v)
    }
    pub fn set_class_specific(&mut self, v: u16) {
        self.set_u16_at(field::CLASS_SPECIFIC, v)
    }
    pub fn set_tid(&mut self, v: u64) {
        set_u64(self.bm(), field::TID, v)
    }
    pub fn set_attr_id(&mut self, v: u16) {
        self.set_u16_at(field::ATTR_ID, v)
    }
    pub fn set_reserved(&mut self, v: u16) {
        self.set_u16_at(field::RESERVED, v)
    }
    pub fn set_attr_mod(&mut self, v: u32) {
        self.bm()[field::ATTR_MOD].copy_from_slice(&v.to_be_bytes());
    }
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[MAD_HEADER_LEN..MAD_LEN]
    }
}

/// The common header of a MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadHeaderRepr {
    pub base_version: u8,
    pub mgmt_class: u8,
    pub class_version: u8,
    pub method: u8,
    pub status: u16,
    pub class_specific: u16,
    pub tid: u64,
    pub attr_id: u16,
    pub reserved: u16,
    pub attr_mod: u32,
}

impl MadHeaderRepr {
    /// The header of a CM message: class 0x07 version 2, `Send()`.
    pub const fn cm(attr_id: u16, tid: u64) -> MadHeaderRepr {
        MadHeaderRepr {
            base_version: BASE_VERSION,
            mgmt_class: CM_CLASS,
            class_version: CM_CLASS_VERSION,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            tid,
            attr_id,
            reserved: 0,
            attr_mod: 0,
        }
    }

    pub fn parse<T: AsRef<[u8]>>(m: &Mad<T>) -> Result<MadHeaderRepr> {
        m.check_len()?;
        Ok(MadHeaderRepr {
            base_version: m.base_version(),
            mgmt_class: m.mgmt_class(),
            class_version: m.class_version(),
            method: m.method(),
            status: m.status(),
            class_specific: m.class_specific(),
            tid: m.tid(),
            attr_id: m.attr_id(),
            reserved: m.reserved(),
            attr_mod: m.attr_mod(),
        })
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, m: &mut Mad<T>) {
        m.set_base_version(self.base_version);
        m.set_mgmt_class(self.mgmt_class);
        m.set_class_version(self.class_version);
        m.set_method(self.method);
        m.set_status(self.status);
        m.set_class_specific(self.class_specific);
        m.set_tid(self.tid);
        m.set_attr_id(self.attr_id);
        m.set_reserved(self.reserved);
        m.set_attr_mod(self.attr_mod);
    }

    /// A CM message this stack takes: base version 1, class 0x07 version 2,
    /// `Send()` with no response bit.
    pub fn is_cm_send(&self) -> bool {
        self.base_version == BASE_VERSION
            && self.mgmt_class == CM_CLASS
            && self.class_version == CM_CLASS_VERSION
            && self.method == METHOD_SEND
    }
}

impl fmt::Display for MadHeaderRepr {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "MAD base {} class 0x{:02x} v{} method 0x{:02x} status 0x{:04x} tid 0x{:016x} attr 0x{:04x}",
            self.base_version, self.mgmt_class, self.class_version, self.method, self.status, self.tid, self.attr_id
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn header_round_trip() {
        let mut buf = [0u8; MAD_LEN];
        let h = MadHeaderRepr::cm(0x0010, 0x0000_0002_45b7_c33c);
        h.emit(&mut Mad::new_unchecked(&mut buf[..]));
        assert_eq!(
            &buf[..24],
            &[1, 7, 2, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0x45, 0xb7, 0xc3, 0x3c, 0, 0x10, 0, 0, 0, 0, 0, 0]
        );
        let back = MadHeaderRepr::parse(&Mad::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(back, h);
        assert!(back.is_cm_send());
        assert_eq!(Mad::new_checked(&buf[..255]).unwrap_err(), Error::Truncated);
    }
}
