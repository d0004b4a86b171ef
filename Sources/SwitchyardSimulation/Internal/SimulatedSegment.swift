/// What travels on a simulated link from one end of a connection to the other, a
/// small TCP: bytes, the end of stream, a reset, the receive window the reader
/// frees by reading, and, between ends with stall detection (`SimulatedStallDetector`),
/// acknowledgements and keepalive probes.
enum SimulatedSegment: CustomStringConvertible {
    /// Bytes of the stream, in order.
    case data([UInt8])
    /// The end of stream (FIN), after every byte sent before it.
    case fin
    /// A reset (RST): the receiver ends with `unavailable`/`reset`.
    case reset
    /// The reader took this many bytes from its receive buffer: the writer may send
    /// as many more.
    case window(Int)
    /// This many more bytes arrived (0 answers a probe); sent to an end with stall
    /// detection only.
    case ack(Int)
    /// A keepalive probe: the receiving end answers with `ack(0)`.
    case probe

    var description: String {
        switch self {
        case .data(let bytes): "data \(bytes.count)"
        case .fin: "fin"
        case .reset: "reset"
        case .window(let count): "window \(count)"
        case .ack(let count): "ack \(count)"
        case .probe: "probe"
        }
    }
}

extension SimulatedNetwork {
    /// Sends `segment` from `sender` to its peer: dropped if either host is black-holed
    /// or the connection stalled, now or when it arrives; otherwise delivered on the peer's loop after the link's
    /// latency and jitter, never before a segment the sender sent earlier (in order, as
    /// TCP delivers). Call on the sender's loop.
    func transmit(_ segment: SimulatedSegment, from sender: SimulatedConnection) {
        guard let receiver = sender.peer else { return }
        let from = sender.localAddress
        let to = sender.remoteAddress
        let (link, blackHoled, rejected) = state.withLock {
            ($0.link(from.host, to.host), $0.isBlackHoled(from.host, to.host), !$0.rejecting.isEmpty && $0.rejecting.contains(to.host))
        }
        if blackHoled || sender.stalled.load(ordering: .relaxed) {
            clock.record("drop \(from) > \(to) \(segment)")
            return
        }
        var delay = link.latency
        if link.jitter > .zero { delay += clock.random(upTo: link.jitter) }
        if rejected {
            // A firewall before the receiver answers for it: the sender hears a reset (a
            // reset itself is dropped, as TCP never answers one).
            clock.record("reject \(from) > \(to) \(segment)")
            if case .reset = segment { return }
            sender.loop.schedule(at: max(clock.now + delay, sender.lastArrival)) { [weak sender] in sender?.receive(.reset) }
            return
        }
        let arrival = max(clock.now + delay, sender.lastArrival)
        sender.lastArrival = arrival
        // The network through the receiver, which holds it anyway; a loop's stop drops
        // its events, and what they hold with them.
        receiver.loop.schedule(at: arrival) {
            let network = receiver.network
            if receiver.stalled.load(ordering: .relaxed) || network.state.withLock({ $0.isBlackHoled(from.host, to.host) }) {
                network.clock.record("drop \(from) > \(to) \(segment)")
                return
            }
            network.clock.record("deliver \(from) > \(to) \(segment)")
            receiver.receive(segment)
        }
    }
}
