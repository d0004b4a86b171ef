public import Switchyard

/// A fault a simulated network applies at a virtual time: ``SimulatedNetwork/inject(_:)``
/// applies it now, ``SimulatedNetwork/schedule(_:at:)`` at a time of the clock.
///
/// Each mirrors a fault of a real network (docs: TESTING.md's table of faults):
/// - `blackHole(host:)`: every segment to or from the host vanishes, in flight too,
///   with no error: a reader waits, a writer stops completing once its window is full.
///   `liftBlackHole(host:)` ends it; what vanished stays lost.
/// - `resetConnections(host:)`: every open connection with an end on the host ends
///   with `unavailable`/`reset` there, and its peer hears a reset after the link's
///   latency.
/// - `stallConnections(host:)`: every connection open now with an end on the host
///   stalls: its segments vanish from now on, both ways, with no error, as when a
///   middlebox on the path lost its state (a NAT binding gone); connections made later
///   travel. A stalled connection stays so until it ends.
/// - `rejectWithReset(host:)`: every segment sent to the host from now on is answered
///   with a reset, which reaches its sender after the link's latency (a firewall's
///   `reject with tcp reset`): a connection ends `unavailable`/`reset` at its next
///   send, an idle one stays. `stopRejecting(host:)` ends it.
/// - `reclaimSocket(local:remote:)`: the system takes away the socket of the connection
///   end with those addresses (a suspended app's sockets, reclaimed): the end ends with
///   `unavailable`/`reclaimed` there at once, its writes not sent, and its peer hears a
///   reset after the link's latency.
/// - `stopReading(host:)`: the host's connections take nothing more from their
///   receive buffers, even while their users read, so writers to it stop after a
///   window's worth (flow control, not an error). `resumeReading(host:)` ends it.
public struct SimulatedFault: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        case blackHole, liftBlackHole, stallConnections, resetConnections, rejectWithReset, stopRejecting, stopReading, resumeReading
        case reclaimSocket
    }

    let kind: Kind
    /// The host (an IP address) the fault applies to.
    public let host: String
    /// The local port of the one connection end it applies to, if it names one.
    public let port: Int?
    /// The remote address of the one connection end it applies to, if it names one.
    public let remote: Endpoint?

    init(kind: Kind, host: String, port: Int? = nil, remote: Endpoint? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.remote = remote
    }

    /// Every segment to or from `host` vanishes from now on, with no error.
    public static func blackHole(host: String) -> SimulatedFault { SimulatedFault(kind: .blackHole, host: host) }

    /// Segments to and from `host` travel again.
    public static func liftBlackHole(host: String) -> SimulatedFault { SimulatedFault(kind: .liftBlackHole, host: host) }

    /// Every connection open now with an end on `host` stalls: its segments vanish.
    public static func stallConnections(host: String) -> SimulatedFault {
        SimulatedFault(kind: .stallConnections, host: host)
    }

    /// Every open connection with an end on `host` is reset.
    public static func resetConnections(host: String) -> SimulatedFault {
        SimulatedFault(kind: .resetConnections, host: host)
    }

    /// Every segment sent to `host` from now on is answered with a reset.
    public static func rejectWithReset(host: String) -> SimulatedFault { SimulatedFault(kind: .rejectWithReset, host: host) }

    /// Segments to `host` are delivered again.
    public static func stopRejecting(host: String) -> SimulatedFault { SimulatedFault(kind: .stopRejecting, host: host) }

    /// The socket of the connection end from `local` to `remote` (its `localAddress` and
    /// `remoteAddress`) is reclaimed by the system.
    public static func reclaimSocket(local: Endpoint, remote: Endpoint) -> SimulatedFault {
        SimulatedFault(kind: .reclaimSocket, host: local.host, port: local.port, remote: remote)
    }

    /// The connections on `host` stop taking bytes from their receive buffers.
    public static func stopReading(host: String) -> SimulatedFault { SimulatedFault(kind: .stopReading, host: host) }

    /// The connections on `host` take bytes from their receive buffers again.
    public static func resumeReading(host: String) -> SimulatedFault { SimulatedFault(kind: .resumeReading, host: host) }

    public var description: String {
        switch kind {
        case .blackHole: "black hole \(host)"
        case .liftBlackHole: "lift black hole \(host)"
        case .stallConnections: "stall connections \(host)"
        case .resetConnections: "reset connections \(host)"
        case .rejectWithReset: "reject with reset \(host)"
        case .stopRejecting: "stop rejecting \(host)"
        case .reclaimSocket: "reclaim socket \(Endpoint(host: host, port: port ?? 0)) > \(remote.map(\.description) ?? "?")"
        case .stopReading: "stop reading \(host)"
        case .resumeReading: "resume reading \(host)"
        }
    }
}
