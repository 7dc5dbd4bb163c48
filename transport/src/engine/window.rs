//! Memory windows (IBTA 10.6.7; the rules and errors of rxe's `rxe_mw.c`):
//! a window hands a peer a range of a registered region under a key of its
//! own, bound and taken back while the region stays registered.
//!
//! - Type 1: bound by `ibv_bind_mw`, which posts a BIND_MW work request (as
//!   rxe's provider does); valid for any QP of its PD until the next bind
//!   (length 0 unbinds it); never invalidated.
//! - Type 2B: bound by a BIND_MW work request while free; answers only the
//!   QP that bound it; freed by that QP's LOCAL_INV or by a SEND_WITH_INV
//!   naming its rkey arriving on that QP (rxe does not check the QP of an
//!   invalidation; uroce does, so that a peer on another connection cannot
//!   take a window away), then bound again.
//!
//! Keys: an rkey is the window's 24-bit index and an 8-bit key byte, as on
//! rxe; each bind sets the key byte its work request names, so an rkey of
//! an earlier binding (a stale key) no longer matches. The index is random
//! (rxe counts), and all 256 keys of it are the window's: no region's key
//! falls in its block.
//!
//! Access through a window: its rkey and state, its PD (and QP, type 2),
//! its range and its rights, then the region's own checks (valid, PD,
//! bounds), but not the region's remote rights: the window's count. rxe
//! checks a window access against the region's range only; uroce against
//! the window's.

use super::memory::{Accessor, MrTable, Pd};
use super::wr::AccessFlags;

/// `enum ibv_mw_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwType {
    /// Bound by the `ibv_bind_mw` verb.
    Type1,
    /// Type 2B: bound by a BIND_MW work request, associated with its QP.
    Type2,
}

/// What a BIND_MW work request binds (`struct ibv_mw_bind_info`): `length`
/// bytes of the region `mr_lkey` from `addr` (an address of the region, or
/// with `ZERO_BASED` in `access` the window's own addresses start at 0),
/// with the remote rights in `access`. Length 0 unbinds a type 1 window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MwBind {
    pub mr_lkey: u32,
    pub addr: u64,
    pub length: u64,
    pub access: AccessFlags,
}

/// The access flags a bind may give a window (rxe's
/// `RXE_ACCESS_SUPPORTED_MW`, without on-demand paging).
const BINDABLE: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.bits()
        | AccessFlags::REMOTE_WRITE.bits()
        | AccessFlags::REMOTE_READ.bits()
        | AccessFlags::REMOTE_ATOMIC.bits()
        | AccessFlags::MW_BIND.bits()
        | AccessFlags::ZERO_BASED.bits()
        | AccessFlags::FLUSH_GLOBAL.bits()
        | AccessFlags::FLUSH_PERSISTENT.bits(),
);

/// One memory window.
pub(crate) struct Mw {
    pd: Pd,
    kind: MwType,
    /// The current rkey: index and key byte.
    rkey: u32,
    binding: Option<Binding>,
}

/// What a bound window grants.
#[derive(Debug, Clone, Copy)]
struct Binding {
    bind: MwBind,
    /// Type 2: the QP that bound it, the only one it answers.
    qpn: Option<u32>,
}

impl Mw {
    /// The region address `va` (a window address) maps to, if `who` may
    /// reach `len` bytes there under `rkey` with `need`.
    pub fn reach(&self, rkey: u32, who: Accessor, va: u64, len: u64, need: AccessFlags) -> Option<u64> {
        let b = self.binding?;
        let qp_ok = b.qpn.is_none_or(|q| q == who.qpn);
        if rkey != self.rkey || self.pd != who.pd || !qp_ok || !b.bind.access.contains(need) {
            return None;
        }
        let end = va.checked_add(len)?;
        if va < self.start() || end > self.start().checked_add(b.bind.length)? {
            return None;
        }
        Some(if self.zero_based() { b.bind.addr.checked_add(va)? } else { va })
    }

    /// The key of the region the window is bound to.
    pub fn region(&self) -> Option<u32> {
        self.binding.map(|b| b.bind.mr_lkey)
    }
    /// The window's first address as peers name it.
    pub fn start(&self) -> u64 {
        match self.binding {
            Some(b) if !self.zero_based() => b.bind.addr,
            _ => 0,
        }
    }
    pub fn len(&self) -> u64 {
        self.binding.map_or(0, |b| b.bind.length)
    }
    fn zero_based(&self) -> bool {
        self.binding.is_some_and(|b| b.bind.access.contains(AccessFlags::ZERO_BASED))
    }
}

impl MrTable {
    /// A new unbound window of `pd` with a key from `draw` (random, not 0),
    /// whose whole 256-key block is free. Its rkey.
    pub fn alloc_window(&mut self, pd: Pd, kind: MwType, mut draw: impl FnMut() -> u32) -> u32 {
        let rkey = loop {
            let k = draw();
            let block = (k & !0xff)..=(k | 0xff);
            if k != 0 && !self.windows.contains_key(&(k >> 8)) && self.by_key.range(block).next().is_none() {
                break k;
            }
        };
        self.windows.insert(rkey >> 8, Mw { pd, kind, rkey, binding: None });
        rkey
    }

    /// Frees the window with any key of its index, bound or not (as rxe):
    /// its keys reach nothing from now on. Whether it existed.
    pub fn dealloc_window(&mut self, rkey: u32) -> bool {
        self.windows.remove(&(rkey >> 8)).is_some()
    }

    /// The current rkey of the window with any key of its index.
    pub fn window_rkey(&self, rkey: u32) -> Option<u32> {
        self.windows.get(&(rkey >> 8)).map(|w| w.rkey)
    }

    /// Runs a BIND_MW work request of QP `who` naming the window by its
    /// current rkey `mw_rkey` and the new key byte in `rkey`'s low 8 bits
    /// (the other bits are the window's, whatever `rkey` says, as on rxe).
    /// Why it was refused, for the MW_BIND_ERR completion.
    pub fn bind_window(&mut self, mw_rkey: u32, rkey: u32, bind: MwBind, who: Accessor) -> Result<(), &'static str> {
        let mw = self.windows.get(&(mw_rkey >> 8)).ok_or("no window with this rkey")?;
        if mw.rkey != mw_rkey {
            return Err("the window's rkey is not the one named (stale)");
        }
        self.check_bind(mw, bind, who)?;
        let qpn = (mw.kind == MwType::Type2).then_some(who.qpn);
        let mw = self.windows.get_mut(&(mw_rkey >> 8)).expect("found above");
        mw.rkey = (mw.rkey & !0xff) | (rkey & 0xff);
        mw.binding = (bind.length > 0).then_some(Binding { bind, qpn });
        Ok(())
    }

    /// rxe's `rxe_check_bind_mw`, and the PD of the QP for type 1 windows
    /// too (rxe checks it for type 2 only).
    fn check_bind(&self, mw: &Mw, bind: MwBind, who: Accessor) -> Result<(), &'static str> {
        if !(bind.access & !BINDABLE).is_empty() {
            return Err("access flags a window cannot have");
        }
        if mw.pd != who.pd {
            return Err("the QP's PD is not the window's");
        }
        match mw.kind {
            MwType::Type1 if bind.access.contains(AccessFlags::ZERO_BASED) => {
                return Err("a type 1 window cannot be zero-based")
            }
            MwType::Type2 if mw.binding.is_some() => {
                return Err("a type 2 window must be invalidated before a new bind")
            }
            MwType::Type2 if bind.length == 0 => return Err("a type 2 window cannot be bound with length 0"),
            _ => {}
        }
        if bind.length == 0 {
            return Ok(());
        }
        let mr = self.by_key.get(&bind.mr_lkey).filter(|mr| mr.valid).ok_or("no valid region with this lkey")?;
        if mr.pd != mw.pd {
            return Err("the region's PD is not the window's");
        }
        if mr.access.contains(AccessFlags::ZERO_BASED) {
            return Err("a zero-based region cannot hold windows");
        }
        if !mr.access.contains(AccessFlags::MW_BIND) {
            return Err("the region was not registered with MW_BIND");
        }
        let writes = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
        if !(bind.access & writes).is_empty() && !mr.access.contains(AccessFlags::LOCAL_WRITE) {
            return Err("a writable window needs a region with LOCAL_WRITE");
        }
        // Zero-based or not, the bound range is named by region addresses.
        let mr_end = mr.addr + mr.storage.len() as u64;
        if bind.addr < mr.addr || bind.addr.checked_add(bind.length).is_none_or(|end| end > mr_end) {
            return Err("the range is not inside the region");
        }
        Ok(())
    }

    /// Invalidates `rkey` for QP `who` (a LOCAL_INV, or with `remote` a
    /// peer's SEND_WITH_INV): a bound type 2 window of its PD (remotely: of
    /// its QP) is freed; a region of its PD registered as invalidatable
    /// (`REMOTE_INVALIDATE`, the stand-in for rxe's fast-registration MRs)
    /// with no window bound stops accepting access. Anything else is
    /// refused (rxe: a type 1 window, an ordinary region). Whether done.
    pub fn invalidate(&mut self, rkey: u32, who: Accessor, remote: bool) -> bool {
        if let Some(mw) = self.windows.get_mut(&(rkey >> 8)) {
            let Some(b) = mw.binding else { return false };
            let qp_ok = !remote || b.qpn == Some(who.qpn);
            if mw.rkey != rkey || mw.kind != MwType::Type2 || mw.pd != who.pd || !qp_ok {
                return false;
            }
            mw.binding = None;
            return true;
        }
        let bound = self.windows_bound_to(rkey);
        match self.by_key.get_mut(&rkey) {
            Some(mr) if mr.pd == who.pd && mr.access.contains(AccessFlags::REMOTE_INVALIDATE) && bound == 0 => {
                mr.valid = false;
                self.generation += 1;
                true
            }
            _ => false,
        }
    }

    /// How many windows are bound to the region `lkey`.
    pub fn windows_bound_to(&self, lkey: u32) -> usize {
        self.windows.values().filter(|w| w.region() == Some(lkey)).count()
    }

    /// Unbinds every window bound to the region `lkey` (type 1 windows keep
    /// their key, unbound; type 2 ones are free again).
    pub fn unbind_windows_on(&mut self, lkey: u32) {
        for mw in self.windows.values_mut() {
            if mw.region() == Some(lkey) {
                mw.binding = None;
            }
        }
    }

    /// Frees the type 2 windows bound by QP `qpn`, which is going away (a
    /// later QP given the same number must not inherit them).
    pub fn release_windows_of(&mut self, qpn: u32) {
        for mw in self.windows.values_mut() {
            if mw.binding.is_some_and(|b| b.qpn == Some(qpn)) {
                mw.binding = None;
            }
        }
    }
}
