//! A udp link that shares its address with other processes (see
//! [`super::super::share`]): an owner's hand-offs to its tenants, a
//! tenant's receives of them, and a tenant taking the port over.

use super::*;

impl UdpLink {
    /// Receives that find nothing before the sharing processes are served,
    /// and receives at most between two services (under steady traffic).
    const SERVE_WHEN_IDLE: u32 = 4;
    const SERVE_AT_LEAST: u32 = 64;
    /// How many times a tenant's claim follows its owner's leaving to the
    /// process that holds the address next (`Link::claim`).
    pub(super) const CLAIM_TAKEOVERS: u32 = 4;

    /// A tenant looks whether its owner left (an owner's tenants are served
    /// by a thread of its own). Every few receives, so that the hot path
    /// pays one `epoll_wait` in 64 at most. A tenant that takes over puts
    /// what its owner forwarded last into `batch`: how many datagrams.
    pub(super) fn serve_sharing(&mut self, received: usize, batch: &mut RxBatch) -> usize {
        if !matches!(self.share, Share::Tenant(_)) {
            return 0;
        }
        self.recvs_since_look += 1;
        let due = (received == 0 && self.recvs_since_look >= Self::SERVE_WHEN_IDLE)
            || self.recvs_since_look >= Self::SERVE_AT_LEAST;
        if !due {
            return 0;
        }
        self.recvs_since_look = 0;
        if !self.aux_wait.wait(Duration::ZERO).unwrap_or(true) {
            return 0;
        }
        let Share::Tenant(t) = &mut self.share else { return 0 };
        if !t.owner_gone() {
            return 0;
        }
        self.take_over();
        self.hand_over_left_over(batch)
    }

    pub(super) fn claim_once(&mut self, key: SteerKey) -> io::Result<()> {
        match &mut self.share {
            Share::Alone => Ok(()),
            Share::Owner(o) => o.claim(key),
            Share::Tenant(t) => t.claim(key),
        }
    }

    /// An owner's send while it has tenants: its packets to a tenant go to
    /// it at once, not round through the owner's own socket (where they
    /// would be lost if it closed), all in one system call after the
    /// others, which leave in runs between them: every peer's packets keep
    /// their order (a tenant's are its own). Nothing is allocated: at most
    /// [`MAX_BATCH`] packets.
    pub(super) fn send_with_tenants(&mut self, chunk: &[TxDatagram<'_>]) -> io::Result<usize> {
        let mut tenant = [None; MAX_BATCH];
        if let Some(owner) = self.share.owner_with_tenants() {
            let to_self = chunk.iter().map(|d| Some(d.roce).filter(|_| wire_addr(d.peer) == self.local));
            owner.route_each(to_self, &mut tenant);
        }
        let mut handoffs = SmallVec::<[Handoff<'_>; MAX_BATCH]>::new();
        let (mut sent, mut from) = (0, 0);
        for (i, d) in chunk.iter().enumerate() {
            let Some(to) = tenant[i] else { continue };
            if from < i {
                sent += self.send_out(&chunk[from..i])?;
            }
            handoffs.extend(self.handoff(to, d.roce));
            from = i + 1;
        }
        if from < chunk.len() {
            sent += self.send_out(&chunk[from..])?;
        }
        let handed = self.forward_all(&handoffs);
        self.stats.tx_packets += handed as u64;
        self.stats.tx_bytes += handoffs[..handed].iter().map(|h| (h.body.len() + ICRC_LEN) as u64).sum::<u64>();
        Ok(sent + handed)
    }

    /// A packet this owner sends to its own address, for the tenant on
    /// `port`, as if it had come back from the wire: ICRC and all.
    fn handoff<'a>(&self, (port, token): (u16, u64), roce: &'a [u8]) -> Option<Handoff<'a>> {
        let ends = (self.local, ROCEV2_UDP_PORT);
        let crc = icrc_to_send(roce, || icrc_between(ends, ends, 0, roce))?;
        let integrity = match (marked_authenticated(roce), self.local.is_ipv4()) {
            (true, _) => Integrity::Mac,
            (false, true) => Integrity::IcrcButIpId { ident: 0 },
            (false, false) => Integrity::Icrc,
        };
        let hdr = Forwarded { peer: self.local, src_port: ROCEV2_UDP_PORT, local: self.local, integrity, token };
        Some(Handoff { port, hdr: hdr.emit(), body: &roce[..roce.len() - ICRC_LEN], icrc: crc.to_le_bytes() })
    }

    /// Hands a received packet (ICRC included) to the tenant on `port`.
    pub(super) fn forward(&mut self, port: u16, hdr: &Forwarded, roce: &[u8]) -> bool {
        let (body, icrc) = roce.split_at(roce.len() - ICRC_LEN);
        let icrc = icrc.try_into().expect("ICRC_LEN bytes");
        self.forward_all(&[Handoff { port, hdr: hdr.emit(), body, icrc }]) == 1
    }

    /// Hands packets to their tenants in as few system calls as the
    /// kernel's limits allow, runs of one size to one tenant as one GSO
    /// message (a READ's responses to a tenant went one system call each,
    /// at under half the rate of a WRITE's); how many went. Those the
    /// socket refused are counted dropped.
    fn forward_all(&mut self, handoffs: &[Handoff<'_>]) -> usize {
        let mut groups = [0usize; MAX_BATCH];
        let size = |h: &Handoff<'_>| h.hdr.len() + h.body.len() + h.icrc.len();
        // Three pieces a datagram (header, body, ICRC): a run fits one call.
        let gso = self.offload.gso.then_some(mmsg::MAX_IOV / 3);
        let ngroups = gso_runs(handoffs.len(), gso, |i| (Some(handoffs[i].port), size(&handoffs[i])), &mut groups);
        let mut pieces = SmallVec::<[&[u8]; 3 * MAX_BATCH]>::new();
        for h in handoffs {
            pieces.extend([&h.hdr[..], h.body, &h.icrc[..]]);
        }
        let mut msgs = SmallVec::<[TxMsg<'_>; MAX_BATCH]>::new();
        let mut first = 0;
        for &len in &groups[..ngroups] {
            let mut to = self.socket_addr(self.local);
            to.set_port(handoffs[first].port);
            let gso_segment = if len > 1 { size(&handoffs[first]) as u16 } else { 0 };
            msgs.push(TxMsg { addr: Some(to), iov: &pieces[3 * first..3 * (first + len)], gso_segment });
            first += len;
        }
        let (mut sent_msgs, mut sent) = (0, 0);
        while sent_msgs < msgs.len() {
            self.stats.tx_syscalls += 1;
            match mmsg::send_batch(self.sock.fd(), &msgs[sent_msgs..]) {
                Ok(k) if k > 0 => {
                    sent += groups[sent_msgs..sent_msgs + k].iter().sum::<usize>();
                    sent_msgs += k;
                }
                _ => break,
            }
        }
        self.stats.rx_forwarded += sent as u64;
        self.stats.tx_dropped += (handoffs.len() - sent) as u64;
        sent
    }

    /// A tenant keeps a packet its owner forwarded, as the owner checked it;
    /// anything else sent to its port is not RoCEv2 for it.
    pub(super) fn keep_forwarded(&mut self, src: SocketAddr, batch: &mut RxBatch, at: Range<usize>) -> bool {
        let from_owner = wire_addr(src.ip()) == self.local && src.port() == ROCEV2_UDP_PORT;
        let hdr = batch.bytes(at.clone());
        let owner = |f: &Forwarded| matches!(&self.share, Share::Tenant(t) if t.is_from_owner(f));
        let fwd = Forwarded::parse(hdr).filter(|f| from_owner && owner(f) && hdr.len() >= Forwarded::LEN + MIN_ROCE);
        let Some(f) = fwd else {
            self.stats.rx_other += 1;
            return false;
        };
        let at = at.start + Forwarded::LEN..at.end;
        let roce = batch.bytes(at.clone());
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += roce.len() as u64;
        let ident = match f.integrity {
            Integrity::IcrcButIpId { ident } => {
                self.stats.rx_icrc_partial += 1;
                ident
            }
            _ => 0,
        };
        if let (Some(sink), Some(repr)) = (self.sink.as_mut(), Self::repr(f.peer, f.local, f.src_port, ident)) {
            let carried = icrc::carried(roce).unwrap_or(0);
            Self::to_sink(sink, &mut self.scratch, Direction::Rx, &repr, roce, carried);
        }
        batch.keep_at(f.peer, f.src_port, f.local, at, f.integrity);
        true
    }

    /// The owner left: this tenant takes `IP:4791` over, or joins the
    /// tenant that did ([`bind_or_join`], bounded), and claims again what it
    /// held. A tenant that finds neither stays alone, and receives nothing
    /// more (its QPs time out, as on a network that failed).
    pub(super) fn take_over(&mut self) {
        if !matches!(self.share, Share::Tenant(_)) {
            return;
        }
        self.keep_what_was_forwarded();
        let Share::Tenant(old) = std::mem::replace(&mut self.share, Share::Alone) else { return };
        self.aux_wait.remove(old.fd());
        let claims: Vec<SteerKey> = old.claims().collect();
        drop(old);
        // Its owner's port and name go as that process closes, in either
        // order: while neither a port nor a name is there, wait.
        let sharing = Sharing::AfterOwnerLeft;
        let Ok((sock, port, share)) =
            bind_or_join(self.local, (None, self.scope_id), self.offload, sharing, &self.aux_wait)
        else {
            return;
        };
        if let Some(w) = &self.tenant_wait {
            w.remove(self.sock.fd());
            let _ = w.add(sock.fd());
        }
        let _ = sock.set_multicast_source(self.local, self.ifindex);
        (self.sock, self.port, self.share) = (sock, port, share);
        for k in claims {
            let _ = self.claim_once(k);
        }
    }
}

impl UdpLink {
    /// Reads, while it is still a tenant's, what its socket holds into
    /// `left_over`: the owner forwarded it before it left (an owner that
    /// exits right after answering, as udaddy's server does its last
    /// replies, closes its end of the control connection after its sends
    /// are queued here), and the socket is about to be replaced. Bounded:
    /// a few batches, what the socket's queue held.
    fn keep_what_was_forwarded(&mut self) {
        let mut kept = std::mem::take(&mut self.left_over);
        for _ in 0..16 {
            match self.recv_from(self.sock.fd(), &mut kept, MAX_BATCH) {
                Ok((_, got)) if got > 0 => {}
                _ => break,
            }
        }
        self.left_over = kept;
    }

    /// Moves `left_over` into `batch`: how many datagrams.
    pub(super) fn hand_over_left_over(&mut self, batch: &mut RxBatch) -> usize {
        self.left_over.iter().for_each(|d| batch.push(&d));
        let n = self.left_over.len();
        self.left_over.clear();
        n
    }
}

/// A packet an owner hands to a tenant: the tenant's port, the header that
/// says where it came from, the packet up to its ICRC, and the ICRC.
struct Handoff<'a> {
    port: u16,
    hdr: [u8; Forwarded::LEN],
    body: &'a [u8],
    icrc: [u8; ICRC_LEN],
}
