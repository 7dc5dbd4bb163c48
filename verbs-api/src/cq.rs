//! Completion queues.

use crate::channel::CompChannel;
use crate::context::Context;
use crate::diag;
use crate::driver::EventObject;
use crate::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uroce_transport::engine::{CqHandle, CqRing, WcStatus, WorkCompletion};

/// `struct ibv_cq`: cheap to clone; keeps its context alive.
#[derive(Clone)]
pub struct Cq(pub(crate) Arc<CqInner>);

pub(crate) struct CqInner {
    pub ctx: Context,
    pub handle: CqHandle,
    /// Where the engine puts the CQ's completions: polled without the driver's lock.
    ring: CqRing,
    pub channel: Option<CompChannel>,
    /// The entries it holds: as created, or as last resized.
    cqe: AtomicUsize,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        // QPs hold their CQs: none uses it now.
        self.ctx.driver().lock().destroy_cq(self.handle);
    }
}

impl Context {
    /// A CQ of `cqe` entries (`ibv_create_cq`); with a channel, its events go there.
    pub fn create_cq(&self, cqe: usize, channel: Option<&CompChannel>) -> Result<Cq, Error> {
        self.check_cqe("ibv_create_cq", cqe)?;
        let (handle, ring) = {
            let mut core = self.driver().lock();
            let handle = core.engine.create_cq(cqe);
            self.route_events_of(&mut core, EventObject::Cq(handle));
            (handle, core.engine.cq_ring(handle).expect("the CQ was just created"))
        };
        Ok(Cq(Arc::new(CqInner { ctx: self.clone(), handle, ring, channel: channel.cloned(), cqe: cqe.into() })))
    }

    fn check_cqe(&self, verb: &'static str, cqe: usize) -> Result<(), Error> {
        let max = self.query_device().max_cqe as usize;
        if cqe == 0 || cqe > max {
            return Err(Error::InvalidValue { verb, what: format!("cqe {cqe} (1..={max})") });
        }
        Ok(())
    }

    /// A completion channel (`ibv_create_comp_channel`).
    pub fn create_comp_channel(&self) -> Result<CompChannel, Error> {
        CompChannel::new(Arc::downgrade(&self.0.owner.driver))
    }
}

impl Cq {
    /// Moves up to `wcs.len()` completions out (`ibv_poll_cq`); returns how many.
    /// Each failed one is also explained in one tracing line. Completions
    /// are taken from the CQ's ring without the driver's lock; a poll that
    /// finds none runs a round itself if no other thread is (see
    /// [`Context::try_progress`]).
    pub fn poll(&self, wcs: &mut [WorkCompletion]) -> usize {
        let n = self.0.ring.pop_into(wcs);
        if n == 0 && self.0.ctx.driver().help() > 0 {
            return self.poll(wcs);
        }
        for wc in &wcs[..n] {
            diag::explain_completion(wc);
            if wc.status == WcStatus::RetryExcErr {
                if let Some(why) = self.0.ctx.unresolved_neighbour() {
                    tracing::warn!(qp = wc.qp_num, "uroce: {why}");
                }
            }
        }
        n
    }

    /// Polls until one completion arrives or `timeout` passes, driving progress
    /// itself on a [`crate::Progress::Manual`] context.
    pub fn wait_one(&self, timeout: Duration) -> Result<WorkCompletion, Error> {
        let deadline = Instant::now() + timeout;
        let manual = self.0.ctx.progress_mode() == crate::Progress::Manual;
        let mut wc = [WorkCompletion::default()];
        loop {
            if self.poll(&mut wc) == 1 {
                return Ok(wc[0]);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout { verb: "ibv_poll_cq" });
            }
            if manual {
                self.0.ctx.progress();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Completions waiting to be polled (a snapshot: other threads may poll
    /// them first).
    pub fn pending(&self) -> usize {
        self.0.ring.len()
    }

    /// Arms the CQ (`ibv_req_notify_cq`): its channel becomes readable at the
    /// next completion (not for completions already waiting, as on a NIC:
    /// poll after arming, before waiting).
    pub fn req_notify(&self, solicited_only: bool) -> Result<(), Error> {
        let _ = solicited_only;
        let channel = self.0.channel.clone().ok_or(Error::InvalidValue {
            verb: "ibv_req_notify_cq",
            what: "a CQ created without a completion channel".into(),
        })?;
        self.0.ctx.driver().arm(self.0.handle, Arc::downgrade(&self.0), channel);
        Ok(())
    }

    /// Whether the CQ overflowed (after which it takes no more completions; an
    /// `Event::CqError` was raised).
    pub fn overflowed(&self) -> bool {
        self.0.ctx.driver().lock().engine.cq_overflowed(self.0.handle)
    }

    /// The number of entries the CQ holds: as created, or as last resized.
    pub fn cqe(&self) -> usize {
        self.0.cqe.load(Ordering::Acquire)
    }

    /// Makes the CQ hold `cqe` entries (`ibv_resize_cq`), the completions
    /// waiting kept in order; refused (EINVAL) when more than `cqe` wait or
    /// `cqe` is past the device's `max_cqe`. Polls on other threads go on
    /// meanwhile: they wait for the moment the queue is swapped.
    pub fn resize(&self, cqe: usize) -> Result<(), Error> {
        self.0.ctx.check_cqe("ibv_resize_cq", cqe)?;
        let mut core = self.0.ctx.driver().lock();
        core.engine.resize_cq(self.0.handle, cqe).map_err(Error::engine("ibv_resize_cq"))?;
        self.0.cqe.store(cqe, Ordering::Release);
        Ok(())
    }

    /// The context the CQ belongs to.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }

    /// The engine's handle, which its asynchronous events name.
    pub fn handle(&self) -> CqHandle {
        self.0.handle
    }

    /// An identity of this CQ, the same for each of its clones, for keying
    /// maps (the drop-in library finds its C CQ by it).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

impl PartialEq for Cq {
    fn eq(&self, other: &Cq) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
