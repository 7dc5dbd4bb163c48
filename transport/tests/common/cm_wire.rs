//! Two CMs over a virtual wire and clock, for the CM tests: MADs moved
//! across (some lost, as a test decides), timers advanced by hand.

use std::time::Duration;
use uroce_transport::cm::msg::PathRepr;
use uroce_transport::cm::timing::*;
use uroce_transport::cm::*;
use uroce_transport::engine::{Gid, Instant};
use uroce_transport::Seed;

pub const SERVICE: u64 = 0x0106_1c06;

pub struct Wire {
    pub a: Cm,
    pub b: Cm,
    pub now: Instant,
    /// Attribute IDs sent, in order, with the side that sent them.
    pub log: Vec<(char, u16)>,
}

pub fn ga() -> Gid {
    Gid::from_ipv4([127, 0, 30, 1])
}
pub fn gb() -> Gid {
    Gid::from_ipv4([127, 0, 30, 2])
}

impl Wire {
    pub fn new() -> Wire {
        Wire::with_max_conns_per_peer(MAX_CONNS_PER_PEER)
    }

    /// B, listening on [`SERVICE`], takes at most `max` connections of A.
    pub fn with_max_conns_per_peer(max: usize) -> Wire {
        let cfg = |guid, seed| CmConfig {
            ca_guid: guid,
            ack_delay: RXE_LOCAL_CA_ACK_DELAY,
            seed: Seed::Fixed(seed),
            max_conns_per_peer: max,
        };
        let mut b = Cm::new(cfg(0xb, 2));
        b.listen(SERVICE).unwrap();
        Wire { a: Cm::new(cfg(0xa, 1)), b, now: Instant::from_nanos(1_000_000_000), log: Vec::new() }
    }

    /// Moves every queued MAD across, as often as answers come back;
    /// `lose` decides which to drop (by sender and attribute).
    pub fn run(&mut self, lose: &mut dyn FnMut(char, u16) -> bool) {
        loop {
            let mut moved = false;
            while let Some(o) = self.a.poll_transmit() {
                moved = true;
                let attr_id = u16::from_be_bytes([o.mad[16], o.mad[17]]);
                self.log.push(('a', attr_id));
                assert_eq!(o.dgid, gb());
                if !lose('a', attr_id) {
                    self.b.handle_mad(self.now, ga(), &o.mad);
                }
            }
            while let Some(o) = self.b.poll_transmit() {
                moved = true;
                let attr_id = u16::from_be_bytes([o.mad[16], o.mad[17]]);
                self.log.push(('b', attr_id));
                assert_eq!(o.dgid, ga());
                if !lose('b', attr_id) {
                    self.a.handle_mad(self.now, gb(), &o.mad);
                }
            }
            if !moved {
                return;
            }
        }
    }

    pub fn deliver(&mut self) {
        self.run(&mut |_, _| false);
    }

    pub fn advance(&mut self, d: Duration) {
        self.now = self.now + d;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }

    pub fn events_a(&mut self) -> Vec<CmEvent> {
        std::iter::from_fn(|| self.a.poll_event()).collect()
    }
    pub fn events_b(&mut self) -> Vec<CmEvent> {
        std::iter::from_fn(|| self.b.poll_event()).collect()
    }

    pub fn connect(&mut self, private: &[u8]) -> CommId {
        self.a.connect(self.now, &params(private)).unwrap()
    }

    /// REQ in, the consumer accepts, REP out.
    pub fn accept_on_b(&mut self) -> CommId {
        let ev = self.events_b();
        let [CmEvent::ReqReceived { id, req, src_gid }] = &ev[..] else { panic!("{ev:?}") };
        assert_eq!(*src_gid, ga());
        assert_eq!(req.local_qpn, 0x11);
        let p = AcceptParams {
            local_qpn: 0x22,
            starting_psn: 0x2222,
            responder_resources: 1,
            initiator_depth: 1,
            rnr_retry_count: 7,
            ..Default::default()
        };
        self.b.accept(self.now, *id, &p).unwrap();
        *id
    }

    pub fn establish(&mut self) -> (CommId, CommId) {
        let a = self.connect(b"hello");
        self.deliver();
        let b = self.accept_on_b();
        self.deliver();
        let ev = self.events_a();
        assert!(matches!(&ev[..], [CmEvent::RepReceived { id, rep }] if *id == a && rep.local_qpn == 0x22), "{ev:?}");
        self.a.ready_to_use(a, &[]).unwrap();
        self.deliver();
        assert_eq!(self.events_b(), [CmEvent::RtuReceived { id: b }]);
        assert_eq!((self.a.state(a), self.b.state(b)), (Some(State::Established), Some(State::Established)));
        (a, b)
    }

    pub fn attrs(&self) -> Vec<(char, u16)> {
        self.log.clone()
    }
}

/// The REQ every test connects with: QPN 0x11, PSN 0x1111, rdma_cm's timing.
pub fn params(private: &[u8]) -> ConnectParams {
    ConnectParams {
        dgid: gb(),
        service_id: SERVICE,
        local_qpn: 0x11,
        starting_psn: 0x1111,
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        flow_control: false,
        srq: false,
        path_mtu: 3,
        path: PathRepr {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: ga(),
            remote_gid: gb(),
            hop_limit: 64,
            ..Default::default()
        },
        packet_life_time: CMA_IBOE_PACKET_LIFETIME,
        remote_cm_response_timeout: CMA_CM_RESPONSE_TIMEOUT,
        local_cm_response_timeout: CMA_CM_RESPONSE_TIMEOUT,
        max_cm_retries: CMA_MAX_CM_RETRIES,
        private_data: private.to_vec(),
    }
}
