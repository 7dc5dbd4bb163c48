//! Shared receive queues.

use crate::driver::EventObject;
use crate::error::Error;
use crate::memory::Pd;
use std::sync::Arc;
use uroce_transport::engine::{RecvWr, SrqAttr, SrqHandle};

/// `struct ibv_srq`: cheap to clone; keeps its PD alive.
#[derive(Clone)]
pub struct Srq(pub(crate) Arc<SrqInner>);

pub(crate) struct SrqInner {
    pub pd: Pd,
    pub handle: SrqHandle,
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        // QPs hold their SRQ: none uses it now.
        self.pd.context().driver().lock().destroy_srq(self.handle);
    }
}

impl Pd {
    /// `ibv_create_srq`. With `srq_limit` > 0, an `Event::SrqLimitReached`
    /// comes when fewer receives than that remain.
    pub fn create_srq(&self, attr: SrqAttr) -> Result<Srq, Error> {
        let mut core = self.context().driver().lock();
        let handle = core.engine.create_srq(self.handle(), attr).map_err(Error::engine("ibv_create_srq"))?;
        self.context().route_events_of(&mut core, EventObject::Srq(handle));
        drop(core);
        Ok(Srq(Arc::new(SrqInner { pd: self.clone(), handle })))
    }
}

impl Srq {
    /// Posts one receive to the SRQ (`ibv_post_srq_recv`).
    pub fn post_recv(&self, wr: &RecvWr) -> Result<(), Error> {
        let driver = self.0.pd.context().driver();
        driver.post(|e| e.post_srq_recv(self.0.handle, wr.clone())).map_err(Error::engine("ibv_post_srq_recv"))
    }

    /// Arms the limit event again (`ibv_modify_srq` with IBV_SRQ_LIMIT).
    pub fn modify_limit(&self, limit: u32) -> Result<(), Error> {
        let mut core = self.0.pd.context().driver().lock();
        core.engine.modify_srq_limit(self.0.handle, limit).map_err(Error::engine("ibv_modify_srq"))
    }

    /// Makes the SRQ take at most `max_wr` receives (`ibv_modify_srq` with
    /// IBV_SRQ_MAX_WR), those posted kept; refused (EINVAL) when more are
    /// posted, or `max_wr` is 0 or past the device's `max_srq_wr`.
    pub fn resize(&self, max_wr: u32) -> Result<(), Error> {
        let max = self.0.pd.context().query_device().max_srq_wr;
        if max_wr == 0 || max_wr > max {
            return Err(Error::InvalidValue { verb: "ibv_modify_srq", what: format!("max_wr {max_wr} (1..={max})") });
        }
        let mut core = self.0.pd.context().driver().lock();
        core.engine.resize_srq(self.0.handle, max_wr).map_err(Error::engine("ibv_modify_srq"))
    }

    /// `ibv_query_srq`: its sizes (as made or last resized) and the limit, 0 once the
    /// limit event has fired.
    pub fn attr(&self) -> Result<SrqAttr, Error> {
        let core = self.0.pd.context().driver().lock();
        core.engine.srq_attr(self.0.handle).map_err(Error::engine("ibv_query_srq"))
    }

    /// Receives posted and not yet consumed.
    pub fn len(&self) -> usize {
        self.0.pd.context().driver().lock().engine.srq_len(self.0.handle)
    }

    /// Whether no receive is posted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The engine's handle, which its asynchronous events name.
    pub fn handle(&self) -> SrqHandle {
        self.0.handle
    }
}
