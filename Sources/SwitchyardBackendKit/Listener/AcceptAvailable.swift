public import CSwitchyardPosix
public import SwitchyardPosix

/// How ``acceptAvailable(on:limit:_:)`` stopped.
public enum AcceptStop: Sendable {
    /// No connection waits, `limit` were accepted (level-triggered epoll reports the
    /// rest on the next turn), or an error the next readiness event tries again.
    case drained
    /// Out of descriptors or memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`): stop
    /// watching the listener for a while rather than spin on the error.
    case outOfResources
}

/// Accepts the connections waiting on the nonblocking listening socket `listener`, up
/// to `limit`, handing each to `hand` as the `Socket` that owns it (nonblocking,
/// close-on-exec) and the peer's address. A connection that was aborted before it was
/// accepted (`ECONNABORTED`, `EPROTO`, or `EPERM` from a firewall) is skipped. Call on
/// the listener's loop when its descriptor is readable.
///
/// ```swift
/// if acceptAvailable(on: fd, { socket, remote in hand(socket, remote: remote.endpoint) }) == .outOfResources {
///     pauseAccepting()
/// }
/// ```
@inlinable
public func acceptAvailable(
    on listener: CInt, limit: Int = 256, _ hand: (consuming Socket, SystemSocketAddress) -> Void
) -> AcceptStop {
    for _ in 0..<limit {
        do {
            switch try Posix.accept(listener) {
            case .wouldBlock:
                return .drained
            case .done(let (descriptor, remote)):
                hand(Socket(takingOwnershipOf: descriptor), remote)
            }
        } catch {
            switch error.errno {
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                return .outOfResources
            case ECONNABORTED, EPROTO, EPERM:
                continue
            default:
                return .drained
            }
        }
    }
    return .drained
}
