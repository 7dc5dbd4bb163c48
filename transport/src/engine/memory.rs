//! Registered memory, checked as an RNIC checks it: every access names a key,
//! and the key's region must exist, be valid, belong to the QP's protection
//! domain, contain the whole range and allow the access. The bytes live behind
//! [`MrStorage`], so the owner (a test, the verbs layer) chooses the storage;
//! the engine never touches a byte outside a region's `0..len()`.

use super::status::WcStatus;
use super::window::Mw;
use super::wr::{AccessFlags, Sge};
use super::Error;
use std::collections::BTreeMap;

/// A protection domain handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pd(pub u32);

/// The bytes of one memory region. Offsets are from the region's start and
/// the engine guarantees `offset + len <= self.len()` on every call (and
/// `offset + 8 <= self.len()` for the atomics).
///
/// Storage the application can see while the engine runs (memory it owns)
/// keeps a NIC's contract: `write` places bytes in address order with the last
/// byte stored last, and the atomics are single atomic operations on the
/// memory itself. The provided atomics suit storage only the engine touches.
pub trait MrStorage: Send {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn read(&self, offset: usize, dst: &mut [u8]);
    fn write(&mut self, offset: usize, src: &[u8]);

    /// Runs `op` on the native-endian 64-bit word at `offset` and returns the
    /// value it held before.
    fn atomic(&mut self, offset: usize, op: AtomicOp) -> u64 {
        op.by_copy(self, offset)
    }

    /// Stores the 8 bytes of an ATOMIC_WRITE at `offset` at once.
    fn atomic_store(&mut self, offset: usize, bytes: [u8; 8]) {
        self.write(offset, &bytes);
    }
}

/// The read-modify-write of an RDMA atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// Stores `swap` if the word equals `compare`.
    CompareSwap { compare: u64, swap: u64 },
    /// Adds `add`, wrapping.
    FetchAdd { add: u64 },
}

impl AtomicOp {
    /// Runs the operation on `storage` as a read and a write: atomic only
    /// against whoever holds `storage` mutably (the engine, under its lock).
    /// Returns the word before.
    pub fn by_copy<S: MrStorage + ?Sized>(self, storage: &mut S, offset: usize) -> u64 {
        let mut bytes = [0u8; 8];
        storage.read(offset, &mut bytes);
        let orig = u64::from_ne_bytes(bytes);
        storage.write(offset, &self.apply(orig).to_ne_bytes());
        orig
    }

    /// The word after the operation, given the word before.
    pub fn apply(self, orig: u64) -> u64 {
        match self {
            AtomicOp::CompareSwap { compare, swap } if orig == compare => swap,
            AtomicOp::CompareSwap { .. } => orig,
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        }
    }
}

impl MrStorage for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self[offset..offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        self[offset..offset + src.len()].copy_from_slice(src);
    }
}

/// The keys of a registered region. As on rxe, lkey and rkey are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MrKeys {
    pub lkey: u32,
    pub rkey: u32,
}

pub(crate) struct Mr {
    pub pd: Pd,
    /// The virtual address of byte 0.
    pub addr: u64,
    pub access: AccessFlags,
    /// False after a remote invalidate (SEND_WITH_INV).
    pub valid: bool,
    pub storage: Box<dyn MrStorage>,
}

impl Mr {
    /// The offset of `len` bytes at `va` in this region, after every check an
    /// RNIC makes on a key's region (valid, PD, bounds, access).
    fn offset_of(&self, pd: Pd, va: u64, len: u64, need: AccessFlags) -> Option<usize> {
        let end = va.checked_add(len)?;
        let mr_end = self.addr + self.storage.len() as u64;
        let ok = self.valid && self.pd == pd && va >= self.addr && end <= mr_end && self.access.contains(need);
        ok.then(|| (va - self.addr) as usize)
    }
}

/// Why a remote access was refused; the responder turns it into a NAK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AccessError {
    /// Key unknown or invalidated, wrong PD, out of bounds or access denied.
    Violation,
}

/// Every region and memory window of an engine, by key.
#[derive(Default)]
pub(crate) struct MrTable {
    pub(super) by_key: BTreeMap<u32, Mr>,
    /// Memory windows by index (the rkey without its key byte): a window
    /// owns all 256 keys of its index, as its key byte changes with each
    /// bind, so no region's key falls in that block (`engine/window.rs`).
    pub(super) windows: BTreeMap<u32, Mw>,
    /// Counts the regions removed or invalidated: a work request checked
    /// under an older count is checked again before its bytes are read.
    pub(super) generation: u64,
}

/// Who reaches memory by a remote key: the QP and its protection domain
/// (a type 2 window answers only the QP it was bound by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Accessor {
    pub qpn: u32,
    pub pd: Pd,
}

/// Where a checked remote access lands: the region's key and the offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub key: u32,
    pub offset: usize,
}

impl MrTable {
    pub fn insert(&mut self, key: u32, mr: Mr) {
        self.by_key.insert(key, mr);
    }
    /// Whether `key` may be given to a new region: no region has it and it
    /// is not in a window's block.
    pub fn key_is_free(&self, key: u32) -> bool {
        !self.by_key.contains_key(&key) && !self.windows.contains_key(&(key >> 8))
    }
    /// Removes the region of `key`; refused while a memory window is bound
    /// to it (rxe's EINVAL, IBA 10.6.7.2.6).
    pub fn remove(&mut self, key: u32) -> Result<Mr, Error> {
        if !self.by_key.contains_key(&key) {
            return Err(Error::NoSuchMr(key));
        }
        if self.windows_bound_to(key) > 0 {
            return Err(Error::MrHasWindows(key));
        }
        self.generation += 1;
        self.by_key.remove(&key).ok_or(Error::NoSuchMr(key))
    }
    pub fn get(&self, key: u32) -> Option<&Mr> {
        self.by_key.get(&key)
    }
    pub fn get_mut(&mut self, key: u32) -> Option<&mut Mr> {
        self.by_key.get_mut(&key)
    }
    /// Moves `key`'s region to `pd` with `access` (a re-registration): work
    /// requests checked before are checked again. Whether it existed.
    pub fn modify(&mut self, key: u32, pd: Pd, access: AccessFlags) -> bool {
        match self.by_key.get_mut(&key) {
            Some(mr) => {
                (mr.pd, mr.access) = (pd, access);
                self.generation += 1;
                true
            }
            None => false,
        }
    }

    /// How many regions were removed or invalidated so far.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The region and offset for `len` bytes at `va` under `key`, after every
    /// check an RNIC makes. A zero-length access is checked like any other.
    fn check(&self, key: u32, pd: Pd, va: u64, len: u64, need: AccessFlags) -> Option<usize> {
        self.by_key.get(&key)?.offset_of(pd, va, len, need)
    }

    /// Checks a remote access (rkey, a region's or a window's) and says where
    /// it lands. Remote write and atomic need the matching flag; a region
    /// allowing remote write or atomic must also allow local write, which
    /// registration (or the window's bind) already enforced.
    pub fn check_remote(
        &self,
        rkey: u32,
        who: Accessor,
        va: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<Target, AccessError> {
        let (key, va, need) = self.resolve(rkey, who, va, len, need)?;
        let offset = self.check(key, who.pd, va, len, need).ok_or(AccessError::Violation)?;
        Ok(Target { key, offset })
    }

    /// The region key, address and rights to check for a remote access: the
    /// rkey's own when it names a region, the bound region's after the
    /// window's checks when it names a window.
    fn resolve(
        &self,
        rkey: u32,
        who: Accessor,
        va: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(u32, u64, AccessFlags), AccessError> {
        match self.windows.get(&(rkey >> 8)) {
            Some(mw) => {
                let mr_va = mw.reach(rkey, who, va, len, need).ok_or(AccessError::Violation)?;
                // Through a window the window's rights count, not the region's.
                Ok((mw.region().ok_or(AccessError::Violation)?, mr_va, AccessFlags::EMPTY))
            }
            None => Ok((rkey, va, need)),
        }
    }

    /// Whether `rkey` names a whole region (or a bound window) `who` may
    /// reach with `need` (a FLUSH of the whole region).
    pub fn check_whole(&self, rkey: u32, who: Accessor, need: AccessFlags) -> bool {
        match self.windows.get(&(rkey >> 8)) {
            Some(mw) => mw.reach(rkey, who, mw.start(), mw.len(), need).is_some(),
            None => self.by_key.get(&rkey).is_some_and(|mr| mr.valid && mr.pd == who.pd && mr.access.contains(need)),
        }
    }

    pub fn read_remote(&self, at: Target, dst: &mut [u8]) {
        // Checked under the engine's lock just before; a region gone anyway
        // reads as zeros rather than a panic.
        match self.by_key.get(&at.key) {
            Some(mr) => mr.storage.read(at.offset, dst),
            None => dst.fill(0),
        }
    }
    /// Writes one packet's payload of a remote WRITE, checking its range
    /// again: the region may have been deregistered or invalidated since the
    /// message's first packet (and its key even given to another region).
    pub fn write_remote(&mut self, rkey: u32, who: Accessor, va: u64, src: &[u8]) -> Result<(), AccessError> {
        let len = src.len() as u64;
        let (key, va, need) = self.resolve(rkey, who, va, len, AccessFlags::REMOTE_WRITE)?;
        // One lookup per packet: check and write through the same entry.
        let mr = self.by_key.get_mut(&key).ok_or(AccessError::Violation)?;
        let offset = mr.offset_of(who.pd, va, len, need).ok_or(AccessError::Violation)?;
        mr.storage.write(offset, src);
        Ok(())
    }
    pub fn atomic_remote(&mut self, at: Target, op: AtomicOp) -> u64 {
        let mr = self.by_key.get_mut(&at.key).expect("checked before");
        mr.storage.atomic(at.offset, op)
    }
    pub fn atomic_store_remote(&mut self, at: Target, bytes: [u8; 8]) {
        let mr = self.by_key.get_mut(&at.key).expect("checked before");
        mr.storage.atomic_store(at.offset, bytes);
    }

    /// Checks every SGE of a local work request (lkey, PD, bounds, and local
    /// write when the engine will write into it).
    pub fn check_local(&self, pd: Pd, sges: &[Sge], write: bool) -> Result<(), WcStatus> {
        let need = if write { AccessFlags::LOCAL_WRITE } else { AccessFlags::EMPTY };
        for s in sges {
            if s.length == 0 {
                continue;
            }
            if self.check(s.lkey, pd, s.addr, s.length.into(), need).is_none() {
                return Err(WcStatus::LocProtErr);
            }
        }
        Ok(())
    }

    /// Copies message bytes `offset..offset + dst.len()` out of a checked SGE list.
    pub fn gather(&self, sges: &[Sge], mut offset: u64, mut dst: &mut [u8]) {
        for s in sges {
            if dst.is_empty() {
                return;
            }
            let len = u64::from(s.length);
            if offset >= len {
                offset -= len;
                continue;
            }
            let n = ((len - offset) as usize).min(dst.len());
            // Checked under the current generation by the caller; a region
            // gone anyway reads as zeros rather than a panic.
            match self.by_key.get(&s.lkey) {
                Some(mr) => mr.storage.read((s.addr + offset - mr.addr) as usize, &mut dst[..n]),
                None => dst[..n].fill(0),
            }
            dst = &mut dst[n..];
            offset = 0;
        }
    }

    /// Copies `src` into message bytes `offset..` of an SGE list, checking each
    /// SGE it touches. `LocLenErr` when the list is too short.
    pub fn scatter(&mut self, pd: Pd, sges: &[Sge], mut offset: u64, mut src: &[u8]) -> Result<(), WcStatus> {
        for s in sges {
            if src.is_empty() {
                return Ok(());
            }
            let len = u64::from(s.length);
            if offset >= len {
                offset -= len;
                continue;
            }
            let n = ((len - offset) as usize).min(src.len());
            let va = s.addr + offset;
            let mr = self.by_key.get_mut(&s.lkey).ok_or(WcStatus::LocProtErr)?;
            let off = mr.offset_of(pd, va, n as u64, AccessFlags::LOCAL_WRITE).ok_or(WcStatus::LocProtErr)?;
            mr.storage.write(off, &src[..n]);
            src = &src[n..];
            offset = 0;
        }
        if src.is_empty() {
            Ok(())
        } else {
            Err(WcStatus::LocLenErr)
        }
    }
}

/// The total length of an SGE list, or `None` above the 2^31 message limit.
pub(crate) fn sge_total(sges: &[Sge]) -> Option<u32> {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    (total <= 1 << 31).then_some(total as u32)
}

#[cfg(test)]
mod test {
    use super::*;

    fn table() -> MrTable {
        let mut t = MrTable::default();
        let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ;
        t.insert(7, Mr { pd: Pd(1), addr: 0x1000, access, valid: true, storage: Box::new(vec![0u8; 16]) });
        t
    }

    #[test]
    fn remote_checks() {
        let t = table();
        let (pd1, pd2) = (Accessor { qpn: 1, pd: Pd(1) }, Accessor { qpn: 1, pd: Pd(2) });
        assert_eq!(t.check_remote(7, pd1, 0x1004, 12, AccessFlags::REMOTE_READ), Ok(Target { key: 7, offset: 4 }));
        assert!(t.check_remote(7, pd1, 0x1001, 16, AccessFlags::REMOTE_READ).is_err());
        assert!(t.check_remote(7, pd2, 0x1000, 1, AccessFlags::REMOTE_READ).is_err());
        assert!(t.check_remote(7, pd1, 0x1000, 1, AccessFlags::REMOTE_WRITE).is_err());
        assert!(t.check_remote(8, pd1, 0x1000, 1, AccessFlags::REMOTE_READ).is_err());
        assert!(t.check_remote(7, pd1, u64::MAX, 2, AccessFlags::REMOTE_READ).is_err());
    }

    #[test]
    fn scatter_gather_across_sges() {
        let mut t = table();
        let sges = [Sge { addr: 0x1000, length: 3, lkey: 7 }, Sge { addr: 0x1008, length: 8, lkey: 7 }];
        t.scatter(Pd(1), &sges, 1, &[1, 2, 3, 4]).unwrap();
        let mut out = [0u8; 5];
        t.gather(&sges, 0, &mut out);
        assert_eq!(out, [0, 1, 2, 3, 4]);
        assert_eq!(t.scatter(Pd(1), &sges, 0, &[0; 12]), Err(WcStatus::LocLenErr));
        assert_eq!(t.scatter(Pd(2), &sges, 0, &[0; 1]), Err(WcStatus::LocProtErr));
        assert_eq!(t.check_local(Pd(1), &[Sge { addr: 0x100f, length: 2, lkey: 7 }], false), Err(WcStatus::LocProtErr));
    }
}
