//! Protection domains, memory regions (library-owned buffers a peer may write
//! at any time, so every user access is synchronised) and address handles.

use crate::context::Context;
use crate::error::Error;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use uroce_transport::engine::{self, AccessFlags, Gid, MrStorage, Sge, UdDest};

/// `struct ibv_pd`: cheap to clone; keeps its context alive.
#[derive(Clone)]
pub struct Pd(pub(crate) Arc<PdInner>);

pub(crate) struct PdInner {
    pub ctx: Context,
    pub pd: engine::Pd,
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

    /// Registers a new zeroed buffer of `len` bytes (`ibv_reg_mr`).
    pub fn reg_mr(&self, len: usize, access: AccessFlags) -> Result<Mr, Error> {
        self.reg_mr_with(vec![0; len], access)
    }

    /// Registers `data` as a memory region; it stays owned by the region.
    pub fn reg_mr_with(&self, data: Vec<u8>, access: AccessFlags) -> Result<Mr, Error> {
        if data.is_empty() {
            return Err(Error::InvalidValue { verb: "ibv_reg_mr", what: "length 0".into() });
        }
        let bytes = SharedBytes(Arc::new(RwLock::new(data.into_boxed_slice())));
        // The buffer never moves or grows, so its address names it, as on a NIC.
        let addr = bytes.read().as_ptr() as u64;
        let len = bytes.read().len();
        let keys = self
            .context()
            .driver()
            .lock()
            .engine
            .reg_mr(self.0.pd, addr, Box::new(bytes.clone()), access)
            .map_err(Error::engine("ibv_reg_mr"))?;
        Ok(Mr(Arc::new(MrInner { pd: self.clone(), bytes, addr, len, lkey: keys.lkey, rkey: keys.rkey })))
    }

    /// An address handle for UD sends to `dgid` (`ibv_create_ah`).
    pub fn create_ah(&self, dgid: Gid) -> Ah {
        Ah { _pd: self.clone(), dgid }
    }
}

/// The bytes of a region, shared by the user's handle and the engine.
#[derive(Clone)]
struct SharedBytes(Arc<RwLock<Box<[u8]>>>);

impl SharedBytes {
    fn read(&self) -> RwLockReadGuard<'_, Box<[u8]>> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, Box<[u8]>> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl MrStorage for SharedBytes {
    fn len(&self) -> usize {
        self.read().len()
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&SharedBytes::read(self)[offset..offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        SharedBytes::write(self)[offset..offset + src.len()].copy_from_slice(src);
    }
}

/// `struct ibv_mr`: cheap to clone; deregistered when the last clone drops.
#[derive(Clone)]
pub struct Mr(Arc<MrInner>);

struct MrInner {
    pd: Pd,
    bytes: SharedBytes,
    addr: u64,
    len: usize,
    lkey: u32,
    rkey: u32,
}

impl Drop for MrInner {
    fn drop(&mut self) {
        let _ = self.pd.context().driver().lock().engine.dereg_mr(self.lkey);
    }
}

impl Mr {
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
        self.0.lkey
    }
    /// The remote key, for peers' RDMA and atomics.
    pub fn rkey(&self) -> u32 {
        self.0.rkey
    }
    /// The PD the region belongs to.
    pub fn pd(&self) -> &Pd {
        &self.0.pd
    }

    /// A scatter/gather entry for `len` bytes at `offset` in this region.
    pub fn sge(&self, offset: usize, len: u32) -> Sge {
        Sge { addr: self.0.addr + offset as u64, length: len, lkey: self.0.lkey }
    }

    /// Copies bytes out; panics if `offset + dst.len()` is past the end, like
    /// slice indexing.
    pub fn read(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.0.bytes.read()[offset..offset + dst.len()]);
    }

    /// Copies bytes in; panics if `offset + src.len()` is past the end.
    pub fn write(&self, offset: usize, src: &[u8]) {
        self.0.bytes.write()[offset..offset + src.len()].copy_from_slice(src);
    }

    /// A copy of the whole region.
    pub fn to_vec(&self) -> Vec<u8> {
        self.0.bytes.read().to_vec()
    }

    /// Runs `f` on the whole region, with peers' writes held off meanwhile.
    pub fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.0.bytes.read())
    }

    /// Runs `f` on the whole region mutably, with the engine held off meanwhile.
    pub fn with_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        f(&mut self.0.bytes.write())
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
