#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging
public import ServiceLifecycle
public import Switchyard
import SwitchyardServiceLifecycle

/// How the tools run in a swift-service-lifecycle `ServiceGroup` that SIGINT and SIGTERM
/// stop (``ShutdownSignals``).
public enum ToolRun {
    /// Runs a server tool's services (echo-server, transfer-server) until a signal stops them.
    ///
    /// - The `ready` lines are printed once the signals are handled, so a signal sent after
    ///   them is never missed (the tests and scripts wait for them).
    /// - The first SIGINT or SIGTERM shuts the group down gracefully (`TOOL: SIGTERM,
    ///   shutting down`): the services stop in reverse order, each as its graceful shutdown
    ///   says, within `gracePeriod` seconds.
    /// - The grace period running out cancels them: what is still open is cut, and the
    ///   tool exits 0 as after a graceful stop.
    /// - A second signal cancels them too (`TOOL: SIGTERM again, stopping at once`), and
    ///   the tool exits with 128 plus the signal's number once they returned, as a shell
    ///   reports a process the signal ended.
    /// - Either way, `whenStopped` runs, the transport shuts down and `TOOL: stopped` is
    ///   printed last.
    public static func runServer(
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
        let status: Int32
        do {
            status = try await exitStatus(running: group)
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

    /// Runs `group` to its end and returns the exit status its end asks for: 0, or 128
    /// plus the signal's number when a second signal forced it (``ForcedShutdown``).
    /// - Throws: what else the group's `run()` threw.
    public static func exitStatus(running group: ServiceGroup) async throws -> Int32 {
        do {
            try await group.run()
            return 0
        } catch let forced as ForcedShutdown {
            return forced.exitStatus
        }
    }
}
