#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging
public import ServiceLifecycle
public import Switchyard
import SwitchyardServiceLifecycle

/// How the server tools run (echo-server, transfer-server): their services in a
/// swift-service-lifecycle `ServiceGroup` that SIGINT and SIGTERM stop.
///
/// - The `ready` lines are printed once the signals are handled, so a signal sent after
///   them is never missed (the tests and scripts wait for them).
/// - The first SIGINT or SIGTERM shuts the group down gracefully (`TOOL: SIGTERM,
///   shutting down`): the services stop in reverse order, each as its graceful shutdown
///   says, within `gracePeriod` seconds.
/// - A second signal, or the grace period running out, cancels them (`TOOL: SIGTERM
///   again, stopping at once`), and the tool exits with 128 plus the signal's number once
///   they returned, as a shell reports a process the signal ended, since work was cut.
/// - Either way, `whenStopped` runs, the transport shuts down and `TOOL: stopped` is
///   printed last.
public enum ServerRun {
    public static func run(
        tool: String, services: [any Service], transport: any Transport, gracePeriod: Double,
        ready: [String], whenStopped: () async -> Void = {}
    ) async {
        let signals = ShutdownSignals(
            onReady: {
                for line in ready { print(line) }
                fflush(nil)
            },
            onSignal: { signal, forced in
                let name = ShutdownSignals.name(of: signal)
                print(forced ? "\(tool): \(name) again, stopping at once" : "\(tool): \(name), shutting down")
                fflush(nil)
            })
        let group = ServiceGroup(
            configuration: signals.configuration(
                running: services, logger: Logger(label: tool),
                maximumGracefulShutdownDuration: .milliseconds(Int64(gracePeriod * 1000))))
        var status: Int32 = 0
        do {
            try await group.run()
        } catch let forced as ForcedShutdown {
            status = forced.exitStatus
        } catch {
            await transport.shutdownNow()
            ToolOutput.fail(tool: tool, "\(error)")
        }
        await whenStopped()
        // Nothing is open any more (or it was just cut): the loops stop.
        await transport.shutdownNow()
        print("\(tool): stopped")
        fflush(nil)
        if status != 0 { exit(status) }
    }
}
