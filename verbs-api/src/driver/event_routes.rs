//! Which context's descriptor each asynchronous event goes to. The engine
//! raises events per device; as the kernel does for each `ibv_context`, an
//! event goes to the context that made the QP, CQ or SRQ it names, so that
//! two contexts of one device in one process (rdma-core's tests open
//! several; so do UCX and libfabric) each read only their own objects'
//! events. An event whose object is gone, or one of the device's own (QP1),
//! goes nowhere.

use crate::event_fd::EventQueue;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use uroce_transport::engine::{CqHandle, Event, SrqHandle};

/// A context's asynchronous events, behind `context->async_fd`.
pub(crate) type AsyncQueue = EventQueue<Event>;

/// What an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EventObject {
    Qp(u32),
    Cq(CqHandle),
    Srq(SrqHandle),
}

impl EventObject {
    fn of(event: &Event) -> EventObject {
        match *event {
            Event::QpRequestError { qpn }
            | Event::QpAccessError { qpn }
            | Event::QpFatal { qpn }
            | Event::SqDrained { qpn }
            | Event::QpLastWqeReached { qpn, .. } => EventObject::Qp(qpn),
            Event::CqError { cq } => EventObject::Cq(cq),
            Event::SrqLimitReached { srq } => EventObject::Srq(srq),
        }
    }
}

/// The context (its event queue) of each live QP, CQ and SRQ.
#[derive(Default)]
pub(crate) struct EventRoutes {
    owners: HashMap<EventObject, Weak<AsyncQueue>>,
}

impl EventRoutes {
    /// `object`'s events go to `queue` from now on.
    pub fn insert(&mut self, object: EventObject, queue: &Arc<AsyncQueue>) {
        self.owners.insert(object, Arc::downgrade(queue));
    }

    /// `object` is destroyed: its number may name another one later.
    pub fn remove(&mut self, object: EventObject) {
        self.owners.remove(&object);
    }

    /// Each event with the queue it goes to; those that go nowhere left out.
    pub fn route(&self, events: impl Iterator<Item = Event>) -> Vec<(Event, Arc<AsyncQueue>)> {
        events
            .filter_map(|e| {
                let queue = self.owners.get(&EventObject::of(&e)).and_then(Weak::upgrade);
                if queue.is_none() {
                    tracing::debug!("uroce: async event {e:?} for no live object of a context: dropped");
                }
                Some((e, queue?))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_goes_to_its_objects_context_and_none_to_others() {
        let (a, b) = (Arc::new(AsyncQueue::new("test").unwrap()), Arc::new(AsyncQueue::new("test").unwrap()));
        let mut routes = EventRoutes::default();
        routes.insert(EventObject::Qp(7), &a);
        routes.insert(EventObject::Cq(CqHandle(3)), &b);
        routes.insert(EventObject::Srq(SrqHandle(4)), &b);
        let events = [
            Event::QpFatal { qpn: 7 },
            Event::CqError { cq: CqHandle(3) },
            Event::QpFatal { qpn: 8 },
            Event::SrqLimitReached { srq: SrqHandle(4) },
            Event::QpLastWqeReached { qpn: 7, srq: SrqHandle(4) },
        ];
        let routed = routes.route(events.into_iter());
        let to = |q: &Arc<AsyncQueue>| routed.iter().filter(|(_, t)| Arc::ptr_eq(t, q)).map(|(e, _)| *e).collect();
        let (to_a, to_b): (Vec<Event>, Vec<Event>) = (to(&a), to(&b));
        assert_eq!(to_a, [events[0], events[4]]);
        assert_eq!(to_b, [events[1], events[3]]);
        routes.remove(EventObject::Qp(7));
        drop((routed, b));
        assert!(routes.route(events.into_iter()).is_empty(), "a destroyed QP's or a closed context's events");
    }
}
