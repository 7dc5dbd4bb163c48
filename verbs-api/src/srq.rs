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

/// The smallest queue an SRQ is made with (rxe's RXE_MIN_SRQ_WR): a
/// smaller size, at creation or resize, grows to it.
pub const MIN_SRQ_WR: u32 = 4;

impl Pd {
    /// `ibv_create_srq`: a queue of at least `attr.max_wr` receives (under
    /// [`MIN_SRQ_WR`] grows to it) of at most `attr.max_sge` SGEs (at least
    /// one), as rxe makes them: [`Srq::attr`] says the sizes made. Refused
    /// (EINVAL) with `max_wr` 0 or past the device's `max_srq_wr` or
    /// `max_srq_sge` (the limit is not checked here, as on rxe). With `srq_limit` > 0, an
    /// `Event::SrqLimitReached` comes when fewer receives than that remain.
    pub fn create_srq(&self, attr: SrqAttr) -> Result<Srq, Error> {
        const VERB: &str = "ibv_create_srq";
        let dev = self.context().query_device();
        if attr.max_wr == 0 || attr.max_wr > dev.max_srq_wr || attr.max_sge > dev.max_srq_sge {
            let what = format!(
                "max_wr {} and max_sge {}: the device takes 1..={} receives of at most {} SGEs",
                attr.max_wr, attr.max_sge, dev.max_srq_wr, dev.max_srq_sge
            );
            return Err(Error::InvalidValue { verb: VERB, what });
        }
        let attr = SrqAttr { max_wr: attr.max_wr.max(MIN_SRQ_WR), max_sge: attr.max_sge.max(1), ..attr };
        let mut core = self.context().driver().lock();
        let handle = core.engine.create_srq(self.handle(), attr).map_err(Error::engine(VERB))?;
        self.context().route_events_of(&mut core, EventObject::Srq(handle));
        drop(core);
        Ok(Srq(Arc::new(SrqInner { pd: self.clone(), handle })))
    }
}

/// A limit must fit the queue it watches (rxe's check).
fn check_limit(verb: &'static str, limit: u32, max_wr: u32) -> Result<(), Error> {
    if limit > max_wr {
        return Err(Error::InvalidValue {
            verb,
            what: format!("a limit of {limit} past the queue's {max_wr} receives"),
        });
    }
    Ok(())
}

impl Srq {
    /// Posts one receive to the SRQ (`ibv_post_srq_recv`).
    pub fn post_recv(&self, wr: &RecvWr) -> Result<(), Error> {
        let driver = self.0.pd.context().driver();
        driver.post(|e| e.post_srq_recv(self.0.handle, wr.clone())).map_err(Error::engine("ibv_post_srq_recv"))
    }

    /// Arms the limit event again (`ibv_modify_srq` with IBV_SRQ_LIMIT);
    /// see [`Srq::modify`].
    pub fn modify_limit(&self, limit: u32) -> Result<(), Error> {
        self.modify(None, Some(limit))
    }

    /// Makes the SRQ take at most `max_wr` receives (`ibv_modify_srq` with
    /// IBV_SRQ_MAX_WR); see [`Srq::modify`].
    pub fn resize(&self, max_wr: u32) -> Result<(), Error> {
        self.modify(Some(max_wr), None)
    }

    /// `ibv_modify_srq`, as rxe serves it: a new size (IBV_SRQ_MAX_WR; the
    /// receives posted kept, a size under [`MIN_SRQ_WR`] grown to it),
    /// and the limit armed (IBV_SRQ_LIMIT; 0 disarms). Refused (EINVAL),
    /// nothing changed, for a size of 0, past the device's `max_srq_wr` or
    /// under the receives posted, or a limit (the one given, or the one
    /// armed) past the size.
    pub fn modify(&self, max_wr: Option<u32>, limit: Option<u32>) -> Result<(), Error> {
        const VERB: &str = "ibv_modify_srq";
        let max = self.0.pd.context().query_device().max_srq_wr;
        if let Some(n) = max_wr.filter(|&n| n == 0 || n > max) {
            return Err(Error::InvalidValue { verb: VERB, what: format!("max_wr {n} (1..={max})") });
        }
        let mut core = self.0.pd.context().driver().lock();
        let now = core.engine.srq_attr(self.0.handle).map_err(Error::engine(VERB))?;
        let size = max_wr.map_or(now.max_wr, |n| n.max(MIN_SRQ_WR));
        check_limit(VERB, limit.unwrap_or(now.srq_limit), size)?;
        if size != now.max_wr {
            core.engine.resize_srq(self.0.handle, size).map_err(Error::engine(VERB))?;
        }
        match limit {
            Some(l) => core.engine.modify_srq_limit(self.0.handle, l).map_err(Error::engine(VERB)),
            None => Ok(()),
        }
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
