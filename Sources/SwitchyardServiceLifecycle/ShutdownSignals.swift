public import Logging
public import ServiceLifecycle
public import UnixSignals

/// The signals that stop a process run as a `ServiceGroup`, in two steps: the first of
/// them shuts the group down gracefully, a second one (while the graceful shutdown is
/// under way) cancels it.
///
/// A `ServiceGroup` takes a signal either as a graceful shutdown signal or as a
/// cancellation signal, never both in turn (the two lists must not overlap). This service
/// adds the second step. Run it first in the group
/// (``configuration(running:logger:maximumGracefulShutdownDuration:)`` does, and makes
/// the same signals the group's graceful shutdown signals):
///
/// - The first signal: the group shuts its services down gracefully, in reverse order
///   (its own signal handling); this service only reports it (`onSignal`, `forced`
///   false) and keeps waiting.
/// - A second signal before the group is done: this service reports it (`forced` true)
///   and throws ``ForcedShutdown``; the group cancels every service still running and
///   its `run()` throws that error once they returned. A process exits at once then;
///   the tools exit with 128 plus the signal's number, as a shell reports a process the
///   signal ended, since open connections were cut.
/// - Graceful shutdown reaches this service last (it is first in the group): it returns
///   then, and on cancellation.
///
/// The signals are trapped through `UnixSignalsSequence` (dispatch sources), as the group
/// traps its own: their default actions never run while the group runs. `onReady` is
/// called once both traps are in place (the group traps its signals before it starts its
/// services, and this service traps its own before it calls `onReady`): a tool prints
/// that it is ready there, so a signal sent after that line is always handled.
public struct ShutdownSignals: Service, CustomStringConvertible {
    /// The signals, in the order given.
    public let signals: [UnixSignal]
    private let onReady: @Sendable () -> Void
    private let onSignal: @Sendable (_ signal: UnixSignal, _ forced: Bool) -> Void

    /// - Parameters:
    ///   - signals: what stops the process (default `SIGTERM` and `SIGINT`).
    ///   - onReady: called once, when the signals are handled (see above).
    ///   - onSignal: called with each signal as it arrives: `forced` is false for the
    ///     first (the graceful shutdown), true for the second.
    public init(
        _ signals: [UnixSignal] = [.sigterm, .sigint],
        onReady: @escaping @Sendable () -> Void = {},
        onSignal: @escaping @Sendable (_ signal: UnixSignal, _ forced: Bool) -> Void = { _, _ in }
    ) {
        self.signals = signals
        self.onReady = onReady
        self.onSignal = onSignal
    }

    public var description: String { "ShutdownSignals(\(signals.map(ShutdownSignals.name(of:)).joined(separator: ", ")))" }

    /// A group configuration that runs this service first, then `services` (started in
    /// order, shut down in reverse), with ``signals`` as its graceful shutdown signals.
    /// - Parameter maximumGracefulShutdownDuration: after it, the graceful shutdown
    ///   becomes a cancellation (nil: no limit).
    public func configuration(
        running services: [any Service], logger: Logger, maximumGracefulShutdownDuration: Duration? = nil
    ) -> ServiceGroupConfiguration {
        configuration(
            running: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) }, logger: logger,
            maximumGracefulShutdownDuration: maximumGracefulShutdownDuration)
    }

    /// The same, with each service's configuration (its termination behaviours) given.
    public func configuration(
        running services: [ServiceGroupConfiguration.ServiceConfiguration], logger: Logger,
        maximumGracefulShutdownDuration: Duration? = nil
    ) -> ServiceGroupConfiguration {
        var configuration = ServiceGroupConfiguration(
            services: [ServiceGroupConfiguration.ServiceConfiguration(service: self)] + services,
            gracefulShutdownSignals: signals, logger: logger)
        configuration.maximumGracefulShutdownDuration = maximumGracefulShutdownDuration
        return configuration
    }

    public func run() async throws {
        let arrivals = await UnixSignalsSequence(trapping: signals)
        onReady()
        var first = true
        for await signal in arrivals.cancelOnGracefulShutdown() {
            onSignal(signal, !first)
            if !first { throw ForcedShutdown(signal: signal) }
            first = false
        }
    }

    /// `SIGTERM`, `SIGINT`, ...: the name a signal goes by in messages.
    public static func name(of signal: UnixSignal) -> String {
        "SIG" + signal.description.dropFirst(3).uppercased()
    }
}

/// A second shutdown signal arrived during a graceful shutdown (``ShutdownSignals``).
public struct ForcedShutdown: Error, CustomStringConvertible {
    /// The second signal.
    public var signal: UnixSignal

    public init(signal: UnixSignal) { self.signal = signal }

    /// What a process exits with after it: 128 plus the signal's number.
    public var exitStatus: Int32 { 128 + signal.rawValue }

    public var description: String { "stopped at once by a second \(ShutdownSignals.name(of: signal))" }
}
