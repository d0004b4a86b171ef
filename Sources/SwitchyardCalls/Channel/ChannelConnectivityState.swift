/// Where a channel's connection stands (gRPC's connectivity semantics,
/// doc/connectivity-semantics-and-api.md in grpc/grpc).
///
/// - `idle`: no connection, none being made; the next call starts one. A channel
///   starts here and comes back after its idle time without calls.
/// - `connecting`: a connection is being made (TCP, TLS, the HTTP/2 preface).
/// - `ready`: a connection carries calls.
/// - `transientFailure`: the last attempt to connect failed; the next one waits for its
///   backoff. Wait-for-ready calls wait; others fail with that attempt's error. (A
///   connection that broke after it was ready goes back to `idle`: the next call
///   reconnects at once, over whatever path the network now has.)
/// - `shutdown`: the channel was closed; it never leaves this state.
public enum ChannelConnectivityState: Sendable, Hashable, CustomStringConvertible {
    case idle
    case connecting
    case ready
    case transientFailure
    case shutdown

    public var description: String {
        switch self {
        case .idle: "idle"
        case .connecting: "connecting"
        case .ready: "ready"
        case .transientFailure: "transient failure"
        case .shutdown: "shutdown"
        }
    }
}
