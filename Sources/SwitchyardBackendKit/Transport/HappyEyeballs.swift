import Glibc
public import Switchyard

/// How a backend connects to a host with several addresses, written once for every
/// backend: RFC 8305 ("Happy Eyeballs version 2"), connection attempts without the DNS
/// half (``HostResolver`` returns every address at once).
///
/// - **Order.** Attempts start with an IPv6 address, then alternate families, each
///   family in the resolver's order (RFC 8305 section 4; `[v6a, v6b, v4a]` becomes
///   `[v6a, v4a, v6b]`).
/// - **Staggering.** The first attempt starts at once; while the attempts started so far
///   are pending, the next starts ``attemptDelay`` (250 ms, RFC 8305 section 5) after the
///   last one; when an attempt fails, the next starts at once. So an address that
///   black-holes delays the connect by 250 ms, not by the whole timeout, and one that is
///   refused or unreachable costs nothing.
/// - **The first to connect wins.** Every other attempt is cancelled (its descriptor is
///   closed); one that connected in the same instant is closed with `discard`.
/// - **Ends.** Every attempt failed: the last failure. ``ConnectOptions/timeout`` passed
///   (name resolution included): `deadlineExceeded`/`connect timeout`. The calling task
///   was cancelled: `cancelled`/`task cancelled` at once (the lookup and the attempts are
///   abandoned). An attempt failing with `cancelled` (the transport shut down),
///   `deadlineExceeded` or `resourceExhausted` (out of descriptors: the next address
///   would fail the same way) ends the connect with that error; any other failure of
///   one address (refused, unreachable, reset, a family the host does not support, a
///   firewall's `permissionDenied`) moves on to the next.
public enum HappyEyeballs {
    /// RFC 8305's connection attempt delay: how long an attempt has to itself before the
    /// next address is tried beside it.
    public static let attemptDelay: Duration = .milliseconds(250)

    /// `addresses` in the order attempts start: IPv6 first, families alternating, each
    /// family in its given order.
    public static func ordered(_ addresses: [SystemSocketAddress]) -> [SystemSocketAddress] {
        let v6 = addresses.filter { $0.family == AF_INET6 }
        let others = addresses.filter { $0.family != AF_INET6 }
        var ordered: [SystemSocketAddress] = []
        ordered.reserveCapacity(addresses.count)
        for index in 0..<max(v6.count, others.count) {
            if index < v6.count { ordered.append(v6[index]) }
            if index < others.count { ordered.append(others[index]) }
        }
        return ordered
    }

    /// Whether a connect whose attempt failed with `error` goes on to the next address.
    public static func triesNextAddress(after error: TransportError) -> Bool {
        error.code != .cancelled && error.code != .deadlineExceeded && error.code != .resourceExhausted
    }

    /// Resolves `endpoint` (``HostResolver/resolve(_:)``) and connects to its addresses as the
    /// type's documentation says, with `attempt`: one connect to one address, given the
    /// time left, which must end with the calling task's cancellation and must itself end
    /// with `deadlineExceeded` once that time passes (a ``PendingConnect`` with its timer
    /// does). `discard` closes a connection that lost the race. An IP literal is one
    /// address: its attempt runs alone, with the whole timeout.
    public static func connect<Connected: Sendable>(
        to endpoint: Endpoint, timeout: Duration, attemptDelay: Duration = attemptDelay,
        discard: @escaping @Sendable (Connected) -> Void,
        attempt: @escaping @Sendable (SystemSocketAddress, Duration) async throws -> Connected
    ) async throws -> Connected {
        // One address, no lookup (the common case): the attempt alone, with its own timer.
        if let literal = try SystemSocketAddress(literal: endpoint) {
            do {
                return try await attempt(literal, timeout)
            } catch is CancellationError {
                throw TransportError(code: .cancelled, reason: .taskCancelled, message: "the connect to \(literal) was cancelled")
            }
        }
        let start = ContinuousClock.now
        let deadline = start + timeout
        let timedOut = TransportError(
            code: .deadlineExceeded, reason: .connectTimeout, message: "connecting to \(endpoint) took longer than \(timeout)")

        typealias Event = AttemptEvent<Connected>
        func failure(_ error: any Error, _ address: SystemSocketAddress) -> TransportError {
            if let error = error as? TransportError { return error }
            if error is CancellationError {
                return TransportError(code: .cancelled, reason: .taskCancelled, message: "the connect to \(address) was cancelled")
            }
            return TransportError(code: .internal, reason: .init("unexpected error"), message: "connecting to \(address): \(error)")
        }

        let result: Result<Connected, TransportError> = await withTaskGroup(of: Event.self) { group in
            group.addTask {
                do {
                    try await Task.sleep(until: deadline, clock: .continuous)
                    return .deadline
                } catch {
                    return .cancelled
                }
            }
            group.addTask {
                do throws(TransportError) {
                    return .resolved(.success(try await HostResolver.resolve(endpoint)))
                } catch {
                    return .resolved(.failure(error))
                }
            }

            var addresses: [SystemSocketAddress] = []
            var next = 0
            var pending = 0
            var generation = 0
            var lastError: TransportError?
            func startNext() {
                let address = addresses[next]
                next += 1
                pending += 1
                let left = ContinuousClock.now.duration(to: deadline)
                group.addTask {
                    do {
                        return .connected(try await attempt(address, left))
                    } catch {
                        return .failed(failure(error, address))
                    }
                }
                generation += 1
                if next < addresses.count {
                    let current = generation
                    group.addTask {
                        do {
                            try await Task.sleep(for: attemptDelay)
                            return .delayElapsed(generation: current)
                        } catch {
                            return .cancelled
                        }
                    }
                }
            }
            func end(_ result: Result<Connected, TransportError>) async -> Result<Connected, TransportError> {
                group.cancelAll()
                while let event = await group.next() {
                    if case .connected(let late) = event { discard(late) }
                }
                return result
            }

            while let event = await group.next() {
                switch event {
                case .resolved(.success(let found)):
                    addresses = ordered(found)
                    guard !addresses.isEmpty else {
                        return await end(.failure(.nameResolution(endpoint.host, detail: "no addresses")))
                    }
                    startNext()
                case .resolved(.failure(let error)):
                    return await end(.failure(error))
                case .connected(let connection):
                    return await end(.success(connection))
                case .failed(let error):
                    pending -= 1
                    guard triesNextAddress(after: error) else { return await end(.failure(error)) }
                    lastError = error
                    if next < addresses.count {
                        startNext()
                    } else if pending == 0 {
                        return await end(.failure(error))
                    }
                case .delayElapsed(let elapsed):
                    if elapsed == generation, next < addresses.count { startNext() }
                case .deadline:
                    return await end(.failure(timedOut))
                case .cancelled:
                    continue
                }
            }
            // Unreachable: the deadline task ends the loop at the latest.
            return .failure(lastError ?? timedOut)
        }
        return try result.get()
    }
}

/// What ends one task of ``HappyEyeballs/connect(to:timeout:attemptDelay:discard:attempt:)``'s group.
private enum AttemptEvent<Connected: Sendable>: Sendable {
    /// The lookup's answer.
    case resolved(Result<[SystemSocketAddress], TransportError>)
    /// An attempt connected.
    case connected(Connected)
    /// An attempt failed.
    case failed(TransportError)
    /// The delay after the attempt of this generation passed.
    case delayElapsed(generation: Int)
    /// The connect's timeout passed.
    case deadline
    /// A timer task was cancelled (the connect ended).
    case cancelled
}
