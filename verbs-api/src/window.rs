//! Memory windows (`ibv_alloc_mw`, `ibv_bind_mw`, the BIND_MW and LOCAL_INV
//! work requests): a peer reaches a range of a region under a window's own
//! rkey, handed out and taken back while the region stays registered. The
//! rules are the engine's (`engine/window.rs` in uroce-transport).

use crate::error::Error;
use crate::memory::{Mr, Pd};
use crate::qp::Qp;
use uroce_transport::engine::{AccessFlags, MwBind, MwType, SendFlags, SendWr, WrOp};

/// `struct ibv_mw`: freed when dropped (`ibv_dealloc_mw`), bound or not.
/// The guide has an example (`uroce_verbs::guide`, "Memory windows").
pub struct Mw {
    pd: Pd,
    kind: MwType,
    /// The rkey it was allocated with: its index names it in the engine
    /// whatever key byte later binds gave it.
    handle: u32,
    /// Set by [`Mw::dealloc`], so that dropping it frees nothing again (the
    /// index may be another window's by then).
    freed: bool,
}

impl Pd {
    /// `ibv_alloc_mw`: an unbound memory window of this PD.
    pub fn alloc_mw(&self, kind: MwType) -> Result<Mw, Error> {
        let handle = self
            .context()
            .driver()
            .lock()
            .engine
            .alloc_mw(self.handle(), kind)
            .map_err(Error::engine("ibv_alloc_mw"))?;
        Ok(Mw { pd: self.clone(), kind, handle, freed: false })
    }
}

impl Mw {
    /// The window's rkey now: the key byte of the last bind that ran.
    pub fn rkey(&self) -> u32 {
        self.pd.context().driver().lock().engine.mw_rkey(self.handle).unwrap_or(self.handle)
    }

    /// Type 1 or type 2B.
    pub fn kind(&self) -> MwType {
        self.kind
    }

    /// A signaled BIND_MW work request giving the window `len` bytes of
    /// `mr` from `offset` with the remote rights `access`, and the rkey it
    /// will have once the request has run (the next key byte, as
    /// `ibv_inc_rkey` makes it). Posting it is how a type 2 window is bound.
    pub fn bind_wr(&self, wr_id: u64, mr: &Mr, offset: u64, len: u64, access: AccessFlags) -> (SendWr, u32) {
        self.bind_wr_of(wr_id, MwBind { mr_lkey: mr.lkey(), addr: mr.addr() + offset, length: len, access })
    }

    /// As [`Mw::bind_wr`], for the range and rights of `bind`.
    pub fn bind_wr_of(&self, wr_id: u64, bind: MwBind) -> (SendWr, u32) {
        let mw_rkey = self.rkey();
        let rkey = next_key(mw_rkey);
        (SendWr::new(wr_id, WrOp::BindMw { mw_rkey, rkey, bind }, Vec::new()), rkey)
    }

    /// A signaled LOCAL_INV work request for the window's current rkey: it
    /// frees a type 2 window bound by the QP it is posted to.
    pub fn local_inv_wr(&self, wr_id: u64) -> SendWr {
        SendWr::new(wr_id, WrOp::LocalInv { rkey: self.rkey() }, Vec::new())
    }

    /// Frees the window now (`ibv_dealloc_mw`); dropping it does the same.
    pub fn dealloc(mut self) -> Result<(), Error> {
        self.freed = true;
        self.pd.context().driver().lock().engine.dealloc_mw(self.handle).map_err(Error::engine("ibv_dealloc_mw"))
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        if !self.freed {
            // Nothing can fail here but an engine already gone.
            let _ = self.pd.context().driver().lock().engine.dealloc_mw(self.handle);
        }
    }
}

impl Qp {
    /// `ibv_bind_mw` of a type 1 window: posts a BIND_MW work request (as
    /// rxe's provider does) for the range and rights of `bind`, and returns
    /// the rkey the window has once it has run; the completion (BIND_MW, or
    /// MW_BIND_ERR) comes on the send CQ when `flags` asks for one or the
    /// bind fails. Length 0 unbinds the window. EINVAL for a type 2 window
    /// or a zero-based bind, as libibverbs answers.
    pub fn bind_mw(&self, mw: &Mw, wr_id: u64, flags: SendFlags, bind: MwBind) -> Result<u32, Error> {
        let refuse = |what: &str| Err(Error::InvalidValue { verb: "ibv_bind_mw", what: what.into() });
        if mw.kind != MwType::Type1 {
            return refuse("a type 2 window is bound by a BIND_MW work request (ibv_post_send), not ibv_bind_mw");
        }
        if bind.access.contains(AccessFlags::ZERO_BASED) {
            return refuse("a type 1 window cannot be zero-based");
        }
        let (mut wr, rkey) = mw.bind_wr_of(wr_id, bind);
        wr.flags = flags;
        self.post_send(&wr)?;
        Ok(rkey)
    }
}

/// `ibv_inc_rkey`: the same index, the next key byte.
pub fn next_key(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}
