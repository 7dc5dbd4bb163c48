//! Protection domains, memory regions and address handles. A region's bytes
//! are either a buffer the library owns or memory the application owns; a
//! peer may write either at any time, so both are reached by copies, never by
//! references.

use crate::context::Context;
use crate::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use uroce_stack::memory::{AppBuffer, RawRegion};
use uroce_transport::engine::{self, AccessFlags, Gid, MrKeys, MrStorage, Sge, UdDest};

/// `struct ibv_pd`: cheap to clone; keeps its context alive.
#[derive(Clone)]
pub struct Pd(pub(crate) Arc<PdInner>);

pub(crate) struct PdInner {
    pub ctx: Context,
    pub pd: engine::Pd,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        // Its regions, windows, SRQs and QPs hold it: none is left.
        let _ = self.ctx.driver().lock().engine.dealloc_pd(self.pd);
    }
}

impl Pd {
    pub(crate) fn new(ctx: Context) -> Pd {
        let pd = ctx.driver().lock().engine.alloc_pd();
        Pd(Arc::new(PdInner { ctx, pd }))
    }

    /// The context the PD belongs to.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }

    pub(crate) fn handle(&self) -> engine::Pd {
        self.0.pd
    }

    /// Registers a new zeroed buffer of `len` bytes (`ibv_reg_mr`). Peers
    /// name it by a random page-aligned address ([`Mr::addr`]), not by where
    /// it lies in this process: they learn nothing of its memory layout.
    pub fn reg_mr(&self, len: usize, access: AccessFlags) -> Result<Mr, Error> {
        if len == 0 {
            return Err(Error::InvalidValue { verb: "ibv_reg_mr", what: "length 0".into() });
        }
        let buffer = AppBuffer::new(len);
        let iova = self.context().driver().lock().engine.random_iova(len as u64);
        self.reg_user_mr(buffer.region(), iova, access)
    }

    /// Registers a copy of `data` as a memory region the library owns.
    pub fn reg_mr_with(&self, data: Vec<u8>, access: AccessFlags) -> Result<Mr, Error> {
        let mr = self.reg_mr(data.len(), access)?;
        mr.write(0, &data);
        Ok(mr)
    }

    /// Registers memory the application owns, named by peers at `iova`
    /// (`ibv_reg_mr_iova`; `ibv_reg_mr` passes the pointer itself). The stack
    /// reads and writes it as a NIC would while the application uses it too
    /// (see [`RawRegion`]); deregistration waits for any access in flight.
    pub fn reg_user_mr(&self, region: RawRegion, iova: u64, access: AccessFlags) -> Result<Mr, Error> {
        let len = region.len();
        if len == 0 {
            return Err(Error::InvalidValue { verb: "ibv_reg_mr", what: "length 0".into() });
        }
        if iova.checked_add(len as u64).is_none() {
            return Err(Error::InvalidValue {
                verb: "ibv_reg_mr",
                what: format!("iova {iova:#x} + length {len} wraps"),
            });
        }
        let keys = self
            .context()
            .driver()
            .lock()
            .engine
            .reg_mr(self.0.pd, iova, Box::new(region.clone()), access)
            .map_err(Error::engine("ibv_reg_mr"))?;
        let inner = MrInner { pd: self.clone(), region, addr: iova, len, keys, registered: AtomicBool::new(true) };
        Ok(Mr(Arc::new(inner)))
    }

    /// An address handle for UD sends to `dgid` (`ibv_create_ah`).
    pub fn create_ah(&self, dgid: Gid) -> Ah {
        Ah { _pd: self.clone(), dgid }
    }
}

/// `struct ibv_mr`: cheap to clone; deregistered by [`Mr::deregister`] or
/// when the last clone drops.
#[derive(Clone)]
pub struct Mr(Arc<MrInner>);

struct MrInner {
    pd: Pd,
    /// The bytes; the stack and the user both reach them by raw copies, as a
    /// NIC and its host do, so neither holds a lock while the other waits.
    region: RawRegion,
    addr: u64,
    len: usize,
    keys: MrKeys,
    registered: AtomicBool,
}

impl MrInner {
    /// `ibv_dereg_mr`: refused while a memory window is bound to the region
    /// (as rxe), when the registration stays as it was. `unbinding`: unbind
    /// such windows first (a dropped handle, which cannot fail).
    fn deregister(&self, unbinding: bool) -> Result<(), Error> {
        // Every access the engine makes happens under the driver's lock, so
        // once the region leaves the table under it none is in flight and
        // none can start: later requests for its key get a remote access error.
        let mut core = self.pd.context().driver().lock();
        if !self.registered.load(Ordering::Acquire) {
            return Ok(());
        }
        let lkey = self.keys.lkey;
        let r = match unbinding {
            true => core.engine.dereg_mr_unbinding(lkey),
            false => core.engine.dereg_mr(lkey),
        };
        r.map_err(Error::engine("ibv_dereg_mr"))?;
        self.registered.store(false, Ordering::Release);
        Ok(())
    }
}

impl Drop for MrInner {
    fn drop(&mut self) {
        let _ = self.deregister(true);
    }
}

impl Mr {
    /// `ibv_rereg_mr` of the PD and access: the same keys and memory, now
    /// on `pd` (of the same context) with `access`. The handle returned owns
    /// the registration; this one (and its clones) no longer deregisters it.
    pub fn rereg(&self, pd: &Pd, access: AccessFlags) -> Result<Mr, Error> {
        if !Arc::ptr_eq(&pd.context().0, &self.0.pd.context().0) {
            return Err(Error::InvalidValue { verb: "ibv_rereg_mr", what: "a PD of another context".into() });
        }
        let mut core = self.0.pd.context().driver().lock();
        core.engine.rereg_mr(self.0.keys.lkey, pd.handle(), access).map_err(Error::engine("ibv_rereg_mr"))?;
        self.0.registered.store(false, Ordering::Release);
        let inner = MrInner {
            pd: pd.clone(),
            region: self.0.region.clone(),
            addr: self.0.addr,
            len: self.0.len,
            keys: self.0.keys,
            registered: AtomicBool::new(true),
        };
        Ok(Mr(Arc::new(inner)))
    }

    /// The virtual address of byte 0, as peers name it in RDMA operations.
    pub fn addr(&self) -> u64 {
        self.0.addr
    }
    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.0.len
    }
    /// Whether the region is empty (never: zero-length registrations are refused).
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }
    /// The local key, for SGEs.
    pub fn lkey(&self) -> u32 {
        self.0.keys.lkey
    }
    /// The remote key, for peers' RDMA and atomics.
    pub fn rkey(&self) -> u32 {
        self.0.keys.rkey
    }
    /// The PD the region belongs to.
    pub fn pd(&self) -> &Pd {
        &self.0.pd
    }

    /// A scatter/gather entry for `len` bytes at `offset` in this region.
    pub fn sge(&self, offset: usize, len: u32) -> Sge {
        Sge { addr: self.0.addr + offset as u64, length: len, lkey: self.0.keys.lkey }
    }

    /// Deregisters the region now (`ibv_dereg_mr`), for every clone. When it
    /// returns no access to the memory is in flight and none will start.
    /// Refused (EINVAL, as rxe) while a memory window is bound to it; the
    /// last handle dropped unbinds them instead.
    pub fn deregister(&self) -> Result<(), Error> {
        self.0.deregister(false)
    }

    /// Copies bytes out; panics if `offset + dst.len()` is past the end, like
    /// slice indexing.
    pub fn read(&self, offset: usize, dst: &mut [u8]) {
        self.0.region.load(offset, dst);
    }

    /// Copies bytes in, the last byte last; panics if `offset + src.len()` is
    /// past the end.
    pub fn write(&self, offset: usize, src: &[u8]) {
        self.0.region.store(offset, src);
    }

    /// A copy of the whole region.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.0.len];
        self.read(0, &mut v);
        v
    }
}

/// `struct ibv_ah`: where UD sends go.
#[derive(Clone)]
pub struct Ah {
    _pd: Pd,
    dgid: Gid,
}

impl Ah {
    /// The destination GID.
    pub fn dgid(&self) -> Gid {
        self.dgid
    }

    /// The UD destination of a send WR: this address, the remote QPN and Q_Key.
    pub fn dest(&self, remote_qpn: u32, remote_qkey: u32) -> UdDest {
        UdDest { dgid: self.dgid, remote_qpn, remote_qkey }
    }
}
